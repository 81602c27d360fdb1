"""SQLite's full-text rows of a document are found by rowid when it changes: the work of an
edit, a rechunk, a retitle or a deletion does not grow with the store.

FTS5 answers ``rowid IN (SELECT ...)`` by scanning its whole table; counted in SQLite's
virtual machine instructions (not in seconds, which a loaded machine stretches), an edit
of one document in a store ten times bigger must cost about the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import Action, ChunkDraft, DocumentPlan, DocumentVersion, plan
from kbsync.model import SourceStat
from kbsync.store.sqlite import SqliteStore


def _version(i: int, edit: int = 0, title: str = "Title") -> DocumentVersion:
    chunks = tuple(
        ChunkDraft(os.urandom(16).hex(), f"words of chunk {j} in document {i} {edit} " * 8, j,
                   f"Heading {j}", 400 * j, 400 * j + 400, 60, "primary",
                   embedding_text_key(f"{i} {j} {edit}"))
        for j in range(8))
    text = "\n\n".join(c.text for c in chunks)
    return DocumentVersion(f"doc-{i:05d}.txt", f"doc-{i:05d}.txt", "text/plain",
                           SourceStat(len(text), i + edit, i), f"b{i}.{edit}", f"t{i}.{edit}",
                           "d", title, "{}", text, chunks)


def _store(folder: Path, documents: int) -> SqliteStore:
    store = SqliteStore(folder / "kb.db")
    versions = [_version(i) for i in range(documents)]
    vector = np.full(8, 1 / np.sqrt(8), dtype=np.float32)
    with store.batch():
        for doc in plan("s", {}, [v.key for v in versions], versions).documents:
            store.apply("s", doc, dict.fromkeys(doc.ops.added_digests, vector), "e", "now")
    return store


def _steps(store: SqliteStore, write: Callable[[], None]) -> int:
    """SQLite's virtual machine instructions run by ``write`` (in hundreds)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store._db.set_progress_handler(count, 100)
    try:
        write()
    finally:
        store._db.set_progress_handler(None, 100)
    return steps[0]


def _edit(store: SqliteStore) -> DocumentPlan:
    old = store.with_digests("s", [store.manifest("s")["doc-00001.txt"]])
    edited = _version(1, edit=1)
    doc = plan("s", {d.key: d for d in old}, [edited.key], [edited]).documents[0]
    assert doc.action is Action.MODIFIED
    return doc


def _retitle(store: SqliteStore) -> DocumentPlan:
    version = _version(2, title="Another title")
    return DocumentPlan(version.key, Action.METADATA, version)


def _delete(store: SqliteStore) -> DocumentPlan:
    return DocumentPlan("doc-00003.txt", Action.DELETED)


@pytest.mark.parametrize("change", [_edit, _retitle, _delete], ids=["edit", "retitle", "delete"])
def test_a_document_s_full_text_rows_cost_the_same_in_a_store_ten_times_bigger(
    tmp_path: Path, change: Callable[[SqliteStore], DocumentPlan],
) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small.mkdir()
    big.mkdir()
    stores = [_store(small, 40), _store(big, 400)]
    vector = np.full(8, 1 / np.sqrt(8), dtype=np.float32)
    try:
        counts = []
        for store in stores:
            doc = change(store)
            vectors = dict.fromkeys(doc.ops.added_digests, vector)
            counts.append(_steps(store, partial(store.apply, "s", doc, vectors, "e", "later")))
        few, many = counts
    finally:
        for store in stores:
            store.close()
    assert many < 2 * few + 10, f"{few} hundred instructions at 40 documents, {many} at 400"
