"""What only the PostgreSQL store has: schema versions in a table, a URL without a
password, an advisory writer lock, pgvector indexes per dimension."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.core.identity import embedding_text_key, embedding_text_key_sql
from kbsync.engine import init_config, load_config, open_store
from kbsync.errors import ConfigError, LockedError, SchemaError, StoreError
from kbsync.extract.registry import extractor_for
from kbsync.store import RecordStore
from kbsync.store.postgres import PostgresStore
from kbsync.store.postgres import schema as pg_schema
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource
from tests.conftest import Backend

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})


@pytest.fixture
def pg_backend(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


def test_the_store_follows_the_record_store_protocol(pg_backend: Backend, tmp_path: Path) -> None:
    store = pg_backend.open(tmp_path)
    assert isinstance(store, RecordStore)
    store.close()


def test_a_store_from_a_newer_kbsync_is_refused_without_writes(pg_backend: Backend) -> None:
    schema = pg_backend.schema()
    PostgresStore(pg_backend.url, schema=schema).close()
    with psycopg.connect(pg_backend.url, autocommit=True) as conn:
        conn.execute(f'UPDATE "{schema}".meta SET value = %s WHERE name = %s',
                     ("99", "schema_version"))
        before = conn.execute(f'SELECT * FROM "{schema}".meta ORDER BY name').fetchall()
        tables_before = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s",
                                     (schema,)).fetchone()
    with pytest.raises(SchemaError, match="newer"):
        PostgresStore(pg_backend.url, schema=schema)
    with psycopg.connect(pg_backend.url) as conn:
        assert conn.execute(f'SELECT * FROM "{schema}".meta ORDER BY name').fetchall() == before
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s",
                              (schema,)).fetchone()
    assert tables == tables_before  # nothing dropped or added


def _schema_at(pg_backend: Backend, version: int, *rows: tuple[str, tuple[object, ...]]) -> str:
    """A new schema as version ``version`` of the store made it, with ``rows`` inserted."""
    schema = pg_backend.schema()
    with psycopg.connect(pg_backend.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}", public')
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        for migration in pg_schema.MIGRATIONS[:version]:
            conn.execute(migration)
        conn.execute("INSERT INTO meta VALUES ('schema_version', %s)", (str(version),))
        for sql, args in rows:
            conn.execute(sql, args)
    return schema


def test_a_version_1_store_is_migrated_in_place(pg_backend: Backend) -> None:
    schema = _schema_at(pg_backend, 1)
    store = PostgresStore(pg_backend.url, schema=schema)
    assert store.get_meta("schema_version") == str(pg_schema.SCHEMA_VERSION)
    assert store.pending("no such run") == 0  # the work queue of version 2 exists
    store.close()


TEXTS = ["", "plain words", "Ünïcode, [/usr/bin] and 🚢 emoji", "x" * 10_000]


def test_postgresql_computes_the_embedding_text_key_kbsync_computes(pg_backend: Backend) -> None:
    with psycopg.connect(pg_backend.url) as conn:
        for text in TEXTS:
            got = conn.execute(
                f"SELECT {embedding_text_key_sql('t')} FROM (SELECT %s::text AS t) x", (text,)
            ).fetchone()
            assert got is not None
            assert bytes(got[0]) == embedding_text_key(text)


def test_a_version_8_store_keys_its_chunk_texts_by_the_migration(pg_backend: Backend) -> None:
    schema = _schema_at(pg_backend, 8, *(
        ("INSERT INTO chunk_texts (digest, text) VALUES (%s, %s)", (f"d{n}", text))
        for n, text in enumerate(TEXTS)))
    PostgresStore(pg_backend.url, schema=schema).close()
    with psycopg.connect(pg_backend.url) as conn:
        keys = dict(conn.execute(f'SELECT text, text_key FROM "{schema}".chunk_texts').fetchall())
    assert {text: bytes(key) for text, key in keys.items()} == {
        text: embedding_text_key(text) for text in TEXTS}


def test_a_version_9_store_names_its_embedders_dimensions_by_the_migration(
        pg_backend: Backend) -> None:
    schema = _schema_at(pg_backend, 9, *(
        ("INSERT INTO embeddings (digest, embedder, dimension, vector) VALUES (%s, %s, %s, %s)",
         (f"d{n}", embedder, len(vector), str(vector)))
        for n, (embedder, vector) in enumerate([("a:2", [0.6, 0.8]), ("a:2", [1.0, 0.0]),
                                                ("b:3", [0.0, 0.6, 0.8])])))
    store = PostgresStore(pg_backend.url, schema=schema)
    assert store.embedder_dimensions() == {"a:2": 2, "b:3": 3}
    store.close()


def test_read_only_opening_of_an_empty_database_creates_nothing(pg_backend: Backend) -> None:
    schema = pg_backend.schema()
    with pytest.raises(StoreError, match="no kbsync store"):
        PostgresStore(pg_backend.url, schema=schema, create=False)
    with psycopg.connect(pg_backend.url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           (schema,)).fetchone()
    assert row == (0,)  # not even the schema


def test_a_password_in_the_url_is_refused_and_one_from_the_environment_is_used(
    tmp_path: Path, pg_backend: Backend, monkeypatch: pytest.MonkeyPatch,
) -> None:
    init_config(tmp_path, [])
    file = tmp_path / "kbsync.toml"
    text = file.read_text()
    file.write_text(text.replace('path = ".kbsync/kbsync.db"',
                                 'url = "postgresql://kb:secret@db.invalid/kb"'))
    with pytest.raises(ConfigError, match="must not hold a password"):
        load_config(tmp_path)
    file.write_text(text)
    pg_backend.configure(tmp_path)
    file.write_text(file.read_text().replace("[store]\n",
                                             '[store]\npassword_env = "KBSYNC_TEST_PW"\n'))
    with pytest.raises(ConfigError, match="KBSYNC_TEST_PW"):
        KnowledgeBase.open(tmp_path)
    monkeypatch.setenv("KBSYNC_TEST_PW", "unused-with-trust-authentication")
    with KnowledgeBase.open(tmp_path) as engine:
        assert engine.status().documents == 0
    assert "unused-with" not in file.read_text()


def test_the_writer_lock_is_an_advisory_lock_released_with_its_connection(
    pg_backend: Backend, tmp_path: Path,
) -> None:
    store = pg_backend.open(tmp_path)
    assert isinstance(store, PostgresStore)
    holder = store.lock(wait=False)
    holder.acquire()
    with pytest.raises(LockedError, match="server process"):
        store.lock(wait=False).acquire()
    holder.release()
    with store.lock(wait=False):
        pass
    store.close()


def test_vectors_of_two_dimensions_coexist_each_with_its_own_hnsw_index(
    pg_backend: Backend, tmp_path: Path,
) -> None:
    store = PostgresStore(pg_backend.url, schema=pg_backend.schema(), ann_above=1)
    source = MemorySource({f"d{i}.txt": f"lamp {i} harbour stairs wick {i}".encode() * 30
                           for i in range(5)})
    embedder = CountingEmbedder(dimension=16)
    sync_sources([source], store, embedder, extractor_for, CHUNKER)
    digests = sorted({d for _, d in store.chunk_digests("memory")})
    rng = np.random.default_rng(7)
    wide = rng.normal(size=(len(digests), 48)).astype(np.float32)
    wide /= np.linalg.norm(wide, axis=1, keepdims=True)
    store.put_vectors("another-model:48", dict(zip(digests, wide, strict=True)))
    store.finish_vectors(48)  # as a sync does at its end
    assert store.embedder_dimensions() == {embedder.identity: 16, "another-model:48": 48}
    indexes = {r[0] for r in store._conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert {"embeddings_hnsw_16", "embeddings_hnsw_48"} <= indexes
    query = embedder.embed(["harbour stairs wick"])[0]
    hits = store.search_vector(embedder.identity, query, 3).hits
    best = max(float(np.dot(query, v)) for v in embedder.embed([h.text for h in hits]))
    assert hits[0].score == pytest.approx(best, abs=1e-4)
    wide_hits = store.search_vector("another-model:48", wide[0], 1).hits
    assert [h.digest for h in wide_hits] == [digests[0]]
    assert wide_hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert store.search_vector("another-model:48", query, 3).hits == []  # a wrong dimension
    assert store.verify(embedder.identity, None) == []
    store.close()


def test_hits_by_reference_skip_chunks_that_are_no_longer_current(
    pg_backend: Backend, tmp_path: Path,
) -> None:
    store = pg_backend.open(tmp_path)
    source = MemorySource({f"d{i}.txt": f"lamp {i} harbour stairs wick {i}".encode() * 30
                           for i in range(3)})
    sync_sources([source], store, CountingEmbedder(dimension=16), extractor_for, CHUNKER)
    refs = [(c.source, c.key, c.index, c.digest) for c in store.indexed_chunks()]
    gone = ("memory", "d1.txt", 0, "no such digest")
    hits = store.hits_at([refs[1], gone, refs[0]], [0.5, 0.4, 0.3])
    assert [(h.key, h.index, h.digest, h.score) for h in hits] == [
        (refs[1][1], refs[1][2], refs[1][3], 0.5), (refs[0][1], refs[0][2], refs[0][3], 0.3)]
    assert set(store.vectors(CountingEmbedder(dimension=16).identity, [refs[0][3]])) == {
        refs[0][3]}
    store.close()


def test_the_index_memory_setting_reaches_the_build_of_a_deferred_index(
    pg_backend: Backend, tmp_path: Path,
) -> None:
    schema = pg_backend.schema()
    vectors = {f"{i:064x}": np.eye(8, dtype=np.float32)[i] for i in range(8)}
    # The server refuses an amount below its minimum: proof that the build asked for it.
    too_little = PostgresStore(pg_backend.url, schema=schema, index_memory="1kB", ann_above=1)
    too_little.prepare_vectors(8)
    too_little.put_vectors("model", vectors)
    with pytest.raises(StoreError, match="maintenance_work_mem"):  # the driver's error, in one line
        too_little.finish_vectors(8)
    too_little.close()
    enough = PostgresStore(pg_backend.url, schema=schema, index_memory="96MB", ann_above=1)
    enough.finish_vectors(8)
    indexes = {r[0] for r in enough._conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert "embeddings_hnsw_8" in indexes
    # The setting lasts for the build only.
    assert enough._conn.execute("SHOW maintenance_work_mem").fetchone() != ("96MB",)
    enough.close()


def test_index_memory_is_read_from_kbsync_toml_and_checked(
    pg_backend: Backend, tmp_path: Path,
) -> None:
    init_config(tmp_path, [])
    pg_backend.configure(tmp_path)
    file = tmp_path / "kbsync.toml"
    text = file.read_text()
    file.write_text(text.replace("[store]\n", '[store]\nindex_memory = "lots"\n'))
    with pytest.raises(ConfigError, match="index_memory"):
        load_config(tmp_path)
    file.write_text(text.replace("[store]\n", '[store]\nindex_memory = "512MB"\n'))
    store = open_store(load_config(tmp_path), create=True)
    assert isinstance(store, PostgresStore)
    assert store.index_memory == "512MB"
    store.close()


def test_an_erase_killed_before_its_garbage_collection_is_finished_by_its_rerun(
    pg_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kept.txt").write_text("The keeper climbs the stairs at dusk.\n")
    (docs / "secret.txt").write_text("A secret sentence that only this file holds.\n")
    init_config(tmp_path, ["docs"])
    pg_backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as kb:
        kb.sync()
        (docs / "secret.txt").unlink()

        def killed(store: PostgresStore) -> dict[str, int]:
            raise KeyboardInterrupt  # the process dies after the document's transaction
        monkeypatch.setattr(PostgresStore, "gc", killed)
        with pytest.raises(KeyboardInterrupt):
            kb.erase("secret.txt")
        monkeypatch.undo()
        assert kb.store.document("secret.txt") is None
        kb.erase("secret.txt")  # the rerun: nothing matches any more, the tombstone does
        assert kb.verify().problems == ()
        assert isinstance(kb.store, PostgresStore)
        assert kb.store._conn.execute(
            "SELECT count(*) FROM chunk_texts WHERE text LIKE '%secret%'").fetchone() == (0,)


@pytest.fixture
def own_database(postgres_url: str) -> Iterator[str]:
    """The URL of a database of this test's own, whose public schema it may fill."""
    name = f"kbtest_db_{os.getpid()}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(postgres_url, dbname=name)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_store_in_its_own_schema_writes_there_beside_one_in_the_default_schema(
        own_database: str) -> None:
    default = PostgresStore(own_database)  # public: on the new schema's search path too
    default.set_meta("whose", "default")
    default.close()
    with pytest.raises(StoreError, match="no kbsync store here yet"):
        PostgresStore(own_database, schema="second", create=False)
    second = PostgresStore(own_database, schema="second")
    second.set_meta("whose", "second")
    second.close()
    with psycopg.connect(own_database) as conn:
        rows = conn.execute("SELECT schemaname FROM pg_tables WHERE tablename = 'meta' "
                            "ORDER BY 1").fetchall()
        assert rows == [("public",), ("second",)]
        assert conn.execute("SELECT value FROM public.meta WHERE name = 'whose'").fetchone() \
            == ("default",)
        assert conn.execute("SELECT value FROM second.meta WHERE name = 'whose'").fetchone() \
            == ("second",)
