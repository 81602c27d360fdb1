"""Damage inside stored values, on each kind of store: values changed behind kbsync's back
(a vector, a chunk text, a kept text) break no link, and only the checks of what the rows
hold find them.

(Bytes overwritten inside a SQLite file's pages are in
``tests/reliability/test_damaged_stores.py``.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.errors import StoreError
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.conftest import CORPUS, Backend

_FIRST = ("(SELECT min(c.digest) FROM chunks c JOIN documents d ON c.doc_id = d.id "
          "AND c.generation = d.generation)")
_KEY = "a-essay-lighthouses.txt"


@pytest.fixture
def kb(tmp_path: Path, backend: Backend) -> Path:
    """A knowledge base of 12 files, synced, on each kind of store."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.iterdir())[:12]:
        shutil.copy(path, docs / path.name)
    init_config(tmp_path, ["docs"])
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as opened:
        opened.sync()
    return tmp_path


def _vector_of_1000s(backend: Backend, dimension: int) -> str:
    """SQL that overwrites the first current chunk's vector with 1000.0s."""
    if backend.name == "sqlite":
        blob = np.full(dimension, 1000.0, dtype=np.float32).tobytes().hex()
        return f"UPDATE embeddings SET vector = x'{blob}' WHERE digest = {_FIRST}"
    literal = "[" + ",".join(["1000"] * dimension) + "]"
    return f"UPDATE embeddings SET vector = '{literal}' WHERE digest = {_FIRST}"


def _tampered_text(backend: Backend) -> str:
    """SQL that changes the current text of ``_KEY``."""
    table = "versions" if backend.name == "sqlite" else "texts"
    generation = " AND generation = (SELECT generation FROM documents " \
                 f"WHERE key = '{_KEY}')" if backend.name == "sqlite" else ""
    return (f"UPDATE {table} SET text = replace(text, 'the', 'teh') "
            f"WHERE doc_id = (SELECT id FROM documents WHERE key = '{_KEY}'){generation}")


def _damage_note(store: SqliteStore | PostgresStore) -> str | None:
    """What the store remembers, read where it keeps it: a file, or a row."""
    if isinstance(store, SqliteStore):
        note = store.path.with_name(store.path.name + ".damaged")
        return note.read_text(encoding="utf-8") if note.exists() else None
    row = store._conn.execute("SELECT value FROM meta WHERE name = 'damage'").fetchone()
    return None if row is None else str(row[0])


def test_a_tampered_vector_chunk_text_and_text_fail_verify_and_repair_makes_them_again(
        kb: Path, backend: Backend) -> None:
    with KnowledgeBase.open(kb) as engine:
        text = engine.document(_KEY).text
        store = engine.store
        assert isinstance(store, SqliteStore | PostgresStore)
        backend.execute(store, _vector_of_1000s(backend, engine.embedder.dimension))
        backend.execute(store, "UPDATE chunk_texts SET text = text || ' tampered' "
                               "WHERE digest = (SELECT max(digest) FROM chunk_texts)")
        backend.execute(store, _tampered_text(backend))
    with KnowledgeBase.open(kb) as engine:
        found = engine.verify()
        assert len(found.problems) == 3, found.problems
        assert any("vector of chunk" in p and "norm" in p for p in found.problems)
        assert any("its digest does not match its text" in p for p in found.problems)
        assert any(f"docs:{_KEY}: the text of its current version" in p
                   for p in found.problems)
        assert "verify found damaged values: 1 chunk texts, 1 document texts, 1 vectors" in \
            (_damage_note(engine.store) or "")
        hits = engine.search("lighthouse keeper lamp", k=50, mode="vector", context_tokens=0)
        assert all(h.score < 2 for h in hits)
        assert len(hits.warnings) == 1
        assert "left out 1 chunk whose vector is damaged" in hits.warnings[0]
        with pytest.raises(StoreError, match="known to be damaged"):
            engine.sync()
        repaired = engine.verify(repair=True)
        assert repaired.ok, repaired.remaining
        assert _damage_note(engine.store) is None
        assert engine.damage is None
        assert engine.verify().ok
        assert engine.document(_KEY).text == text
        assert not engine.search("lighthouse keeper lamp", mode="vector").warnings
        before = engine.store.total_changes
        engine.sync()
        assert engine.store.total_changes - before == 1  # its run report only


def test_verify_of_a_sound_store_forgets_damage_it_was_told_of(kb: Path) -> None:
    with KnowledgeBase.open(kb) as engine:
        engine.store.remember_damage("the database reported damage: a test says so")
        assert engine.damage is not None
        assert "a test says so" in engine.status().damage  # type: ignore[operator]
        with pytest.raises(StoreError, match="a test says so"):
            engine.erase("*")
        assert engine.verify().ok
        assert engine.damage is None
        assert engine.sync().total("new") == 0


def test_a_postgres_error_of_class_xx_is_remembered_as_damage(postgres_url: str,
                                                              tmp_path: Path) -> None:
    backend = Backend("postgres", postgres_url)
    store = backend.open(tmp_path)
    try:
        assert isinstance(store, PostgresStore)
        # The server says a page is damaged (SQLSTATE XX001) when a run is recorded.
        backend.execute(store, "CREATE FUNCTION corrupted() RETURNS trigger LANGUAGE plpgsql "
                               "AS $$ BEGIN RAISE EXCEPTION 'invalid page in block 7' "
                               "USING ERRCODE = 'data_corrupted'; END $$")
        backend.execute(store, "CREATE TRIGGER corrupted BEFORE INSERT ON runs "
                               "FOR EACH ROW EXECUTE FUNCTION corrupted()")
        with pytest.raises(StoreError, match=r"invalid page in block 7.*the store is damaged"):
            store.record_run("2024-01-01", "2024-01-01", {})
        known = store.known_damage()
        assert known is not None
        assert known.startswith("the database reported damage: invalid page in block 7")
        assert _damage_note(store) == known
    finally:
        store.close()
        backend.drop()
