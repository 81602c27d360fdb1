"""A PostgreSQL batch writes its documents as one group at its end (a statement per kind of
write for the lot): the store must then hold exactly what applying them one at a time,
each in its own transaction, leaves, whatever the batch mixes (new documents, edits,
retitles, moves, deletions, chunks shared between documents, a document applied twice).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import Action, ChunkDraft, DocumentPlan, DocumentVersion, plan
from kbsync.model import SourceStat
from kbsync.store.postgres import PostgresStore
from kbsync.store.postgres.dialect import PostgresDialect
from tests.conftest import Backend
from tests.integration.test_workers import dump


@pytest.fixture
def pg(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


def _version(i: int, edit: int = 0, title: str = "Title", shared: int | None = None,
             key: int | None = None) -> DocumentVersion:
    """Document ``i`` (under key ``key``, its own by default) at ``edit``; its chunks are
    those of document ``shared`` when given (the same texts in two documents)."""
    words = i if shared is None else shared
    chunks = []
    for j in range(6):
        text = f"words of chunk {j} in document {words} at {edit} " * 6
        chunks.append(ChunkDraft(hashlib.sha256(text.encode()).hexdigest()[:32], text, j,
                                 f"Heading {j}", 300 * j, 300 * j + 300, 50, "primary",
                                 embedding_text_key(text)))
    text = "\n\n".join(c.text for c in chunks)
    name = f"doc-{i if key is None else key:05d}.txt"
    return DocumentVersion(name, name, "text/plain", SourceStat(len(text), i + edit, i),
                           f"b{words}.{edit}", f"t{words}.{edit}", "d", title, "{}", text,
                           tuple(chunks))


def _vector(digest: str) -> np.ndarray[Any, np.dtype[np.float32]]:
    seed = int(digest[:8], 16)
    vector = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _plan(store: PostgresStore, versions: Sequence[DocumentVersion],
          gone: Sequence[str] = ()) -> list[DocumentPlan]:
    """The plan of ``versions`` against what ``store`` holds, the keys ``gone`` vanished."""
    manifest = store.manifest("s")
    stored = {d.key: d for d in store.with_digests("s", list(manifest.values()))}
    listed = [k for k in stored if k not in gone] + [v.key for v in versions]
    return list(plan("s", stored, sorted(set(listed)), versions,
                     allow_mass_delete=True).documents)


def _apply(store: PostgresStore, docs: Sequence[DocumentPlan], *, grouped: bool) -> None:
    """Apply ``docs``: in one batch (grouped), or each in a transaction of its own."""
    def each() -> None:
        for doc in docs:
            store.apply("s", doc, {d: _vector(d) for d in doc.ops.added_digests}, "e", "now")

    if grouped:
        with store.batch():
            each()
    else:
        each()


def _state(store: PostgresStore) -> dict[str, Any]:
    return {**dump(store), "counts": store.digest_counts("s"),
            "boilerplate": store.boilerplate_counted("s", 0.3)}


def _steps() -> list[tuple[list[DocumentVersion], list[str]]]:
    """Batches of (observed versions, vanished keys) that mix every kind of write."""
    first = [_version(i) for i in range(12)]
    second = [
        _version(1, edit=1),  # edited
        _version(2, title="Another title"),  # retitled: the same text
        replace(first[4], key="doc-00040.txt", locator="doc-00040.txt"),  # moved
        _version(20),  # new
        _version(21, shared=20),  # new, with the chunks of another new one
        _version(5, shared=6),  # edited into the chunks of a stored one
    ]
    third = [_version(22, shared=0, key=23), _version(1, edit=2), _version(7, edit=1)]
    return [(first, []), (second, ["doc-00003.txt", "doc-00004.txt"]),
            (third, ["doc-00008.txt", "doc-00040.txt"])]


def test_a_batch_written_as_one_group_stores_what_applies_one_by_one_store(
        pg: Backend, tmp_path: Path) -> None:
    alone, grouped = pg.open(tmp_path), pg.open(tmp_path)
    assert isinstance(alone, PostgresStore)
    assert isinstance(grouped, PostgresStore)
    try:
        for versions, gone in _steps():
            docs = _plan(alone, versions, gone)
            assert docs == _plan(grouped, versions, gone)
            _apply(alone, docs, grouped=False)
            _apply(grouped, docs, grouped=True)
            assert _state(grouped) == _state(alone)
    finally:
        alone.close()
        grouped.close()


def test_a_document_applied_twice_in_one_batch_is_written_twice_as_one_by_one(
        pg: Backend, tmp_path: Path) -> None:
    alone, grouped = pg.open(tmp_path), pg.open(tmp_path)
    assert isinstance(alone, PostgresStore)
    assert isinstance(grouped, PostgresStore)
    try:
        versions = [_version(i) for i in range(4)]
        docs = _plan(alone, versions)
        assert {d.action for d in docs} == {Action.NEW}
        # A batch that holds each document twice (a batch redone inside another) cannot
        # write both in one statement: the group is cut where a key comes again.
        _apply(alone, [*docs, *docs], grouped=False)
        _apply(grouped, [*docs, *docs], grouped=True)
        assert _state(grouped) == _state(alone)
        assert {r[-2] for r in dump(grouped)["documents"]} == {2}  # generation 2, as alone
    finally:
        alone.close()
        grouped.close()


def test_a_batch_that_fails_writes_none_of_its_group(pg: Backend, tmp_path: Path) -> None:
    store = pg.open(tmp_path)
    assert isinstance(store, PostgresStore)
    try:
        docs = _plan(store, [_version(i) for i in range(3)])

        def failing() -> None:
            with store.batch():
                _apply(store, docs, grouped=False)  # inside the batch: its group
                raise RuntimeError("the batch failed before its end")

        with pytest.raises(RuntimeError):
            failing()
        assert dump(store)["documents"] == []
        _apply(store, docs, grouped=True)  # and the next batch starts a group of its own
        assert len(dump(store)["documents"]) == 3
    finally:
        store.close()


def test_a_batch_of_ten_times_the_documents_sends_the_same_statements(
        pg: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    real = PostgresDialect.send

    def counted(self: PostgresDialect, sql: str, args: Sequence[Any] = ()) -> None:
        sent.append(sql)
        real(self, sql, args)

    def statements(documents: int) -> int:
        store = pg.open(tmp_path)
        assert isinstance(store, PostgresStore)
        try:
            docs = _plan(store, [_version(i) for i in range(documents)])
            sent.clear()
            _apply(store, docs, grouped=True)
            return len(sent)
        finally:
            store.close()

    monkeypatch.setattr(PostgresDialect, "send", counted)
    assert statements(40) == statements(4)
