"""The digest counts a store keeps for boilerplate: equal to a full recount after any edit
script, filled by the migration that adds them, foreseen from a sync's scratch as the pure
rule decides, and never a reason to read every digest of a source."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import (
    Action,
    ChunkDraft,
    DocumentPlan,
    DocumentVersion,
    StoredDocument,
    boilerplate,
    host_group,
)
from kbsync.extract.registry import extractor_for
from kbsync.model import SourceItem
from kbsync.store import RecordStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.sync.scratch import Scratch
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore
from tests.conftest import Backend

SOURCE = "s"
KEYS = [f"doc{i}" for i in range(4)] + [f"https://h{i % 2}.test/p{i}" for i in range(6)]
DIGESTS = st.lists(st.sampled_from([f"d{i}" for i in range(6)]), max_size=5)
NOW = "2024-01-01T00:00:00Z"

Opener = Callable[[], Any]


def recount(store: Any, source: str = SOURCE) -> dict[tuple[str, str], int]:
    """The counts made again from the current chunks: (host group, digest) -> documents,
    the empty digest for the documents of the group that have chunks."""
    counts: Counter[tuple[str, str]] = Counter()
    for doc in store.with_digests(source, list(store.manifest(source).values())):
        if doc.chunk_digests:
            group = host_group(doc.key)
            counts[(group, "")] += 1
            counts.update((group, d) for d in set(doc.chunk_digests))
    return dict(counts)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opener(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Opener]:
    """Opens a new, empty store of one kind each time it is called (a test's examples)."""
    if request.param == "memory":
        yield MemoryStore
        return
    backend = Backend(request.param)
    if request.param == "postgres":
        backend.url = request.getfixturevalue("postgres_url")
    opened: list[Any] = []

    def open_store() -> Any:
        opened.append(backend.open(tmp_path_factory.mktemp("store")))
        return opened[-1]

    try:
        yield open_store
    finally:
        for store in opened:
            store.close()
        if backend.name == "postgres":
            backend.drop()


def _version(key: str, digests: Sequence[str], text: str = "t") -> DocumentVersion:
    chunks = tuple(ChunkDraft(d, f"text of {d}", 0, None, 0, 1, 1, "end",
                              embedding_text_key(f"text of {d}")) for d in digests)
    return DocumentVersion(key=key, locator=key, media_type="text/plain", stat=None,
                           bytes_hash="b", text_hash=text, derivation="d", title=None,
                           metadata="{}", text=f"{text} of {key}", chunks=chunks)


def _stored(key: str) -> StoredDocument:
    return StoredDocument(key=key, stat=None, bytes_hash="b", text_hash="t", derivation="d",
                          title=None, metadata="{}", generation=1, chunk_digests=())


# One edit: (what, key, other key, digests, edited).
EDITS = st.lists(st.tuples(
    st.sampled_from(["write", "write", "rechunk", "delete", "move", "erase", "batch"]),
    st.sampled_from(KEYS), st.sampled_from(KEYS), DIGESTS, st.booleans()),
    min_size=1, max_size=12)


def _edit(store: Any, docs: dict[str, list[str]], what: str, key: str, other: str,
          digests: list[str], edited: bool) -> None:
    """Apply one edit to ``store`` and to the model ``docs`` (key -> current digests)."""
    if what == "write":
        action = Action.MODIFIED if key in docs else Action.NEW
        store.apply(SOURCE, DocumentPlan(key, action, _version(key, digests)), {}, "e", NOW)
        docs[key] = digests
    elif what == "rechunk" and key in docs:
        store.apply(SOURCE, DocumentPlan(key, Action.RECHUNKED, _version(key, digests)), {},
                    "e", NOW)
        docs[key] = digests
    elif what == "delete" and key in docs:
        store.apply(SOURCE, DocumentPlan(key, Action.DELETED), {}, "e", NOW)
        del docs[key]
    elif what == "move" and key in docs and other not in docs:
        kept = digests if edited else docs[key]
        version = _version(other, kept, "edited" if edited else "t")
        store.apply(SOURCE, DocumentPlan(other, Action.MOVED, version, previous_key=key,
                                         edited=edited), {}, "e", NOW)
        docs[other] = kept
        del docs[key]
    elif what == "erase" and key in docs:
        store.erase(key)
        del docs[key]
    elif what == "batch":  # several documents in one transaction
        with store.batch():
            for n, k in enumerate(sorted({key, other})):
                action = Action.MODIFIED if k in docs else Action.NEW
                mine = [*digests[n:], "d5"]
                store.apply(SOURCE, DocumentPlan(k, action, _version(k, mine)), {}, "e", NOW)
                docs[k] = mine


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS, share=st.sampled_from([0.05, 0.3, 0.5]))
def test_the_kept_counts_equal_a_full_recount_after_any_edit_script(
        opener: Opener, edits: list[tuple[str, str, str, list[str], bool]],
        share: float) -> None:
    store = opener()
    docs: dict[str, list[str]] = {}
    for edit in edits:
        _edit(store, docs, *edit)
        assert store.digest_counts(SOURCE) == recount(store)
        assert store.boilerplate_counted(SOURCE, share) == boilerplate(
            {k: v for k, v in docs.items() if v}, share)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(stored=st.dictionaries(st.sampled_from(KEYS), DIGESTS),
       fresh=st.dictionaries(st.sampled_from(KEYS), DIGESTS),
       gone=st.sets(st.sampled_from(KEYS)), share=st.sampled_from([0.05, 0.3, 0.5]))
def test_the_boilerplate_a_sync_foresees_is_the_pure_rule_over_the_documents_it_will_leave(
        opener: Opener, tmp_path_factory: pytest.TempPathFactory,
        stored: dict[str, list[str]], fresh: dict[str, list[str]], gone: set[str],
        share: float) -> None:
    """The store's counts and a scratch file's re-chunked documents and gone ones, before
    anything is written: what the single-process sync decides boilerplate with."""
    store = opener()
    for key, digests in stored.items():
        store.apply(SOURCE, DocumentPlan(key, Action.NEW, _version(key, digests)), {}, "e", NOW)
    after = {k: v for k, v in stored.items() if k not in fresh and k not in gone}
    after.update({k: v for k, v in fresh.items() if k not in gone})
    expected = boilerplate({k: v for k, v in after.items() if v}, share)
    with Scratch(tmp_path_factory.mktemp("scratch")) as scratch:
        scratch.add_stored(_stored(k) for k in stored)
        scratch.add_listed((SourceItem(k, k, "text/plain"), "d")
                           for k in {*stored, *fresh} - gone)
        for k, digests in fresh.items():
            if k not in gone:
                scratch.observe(_version(k, digests), None)
        scratch.vanish()
        foreseen = store.boilerplate_counted(SOURCE, share, replaced=scratch.replaced(),
                                             added=scratch.added(), members=scratch.members())
    assert foreseen == expected
    assert store.digest_counts(SOURCE) == recount(store)  # foreseeing wrote nothing


def _sync_folder(store: RecordStore, source: MemorySource, **options: Any) -> None:
    sync_sources([source], store, CountingEmbedder(dimension=16), extractor_for, _CHUNKER,
                 options=SyncOptions(allow_mass_delete=True, accept_replacements=True,
                                     **options))


_CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                            "backup_bits": 2})
_HEADER = b"cookie notice we value your privacy and your time " * 6


def _pages(count: int) -> dict[str, bytes]:
    return {f"https://site.test/p{i}": _HEADER + f" page {i} about {i * 7} ships".encode() * 20
            for i in range(count)}


def _no_streaming(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: str) -> Iterator[tuple[str, str]]:
        raise AssertionError(f"every chunk digest of {source} was read")

    monkeypatch.setattr(store, "chunk_digests", refuse)


def test_an_edit_decides_boilerplate_without_reading_every_digest_of_the_source(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    source = MemorySource(name="site")
    source.documents.update(_pages(12))
    _sync_folder(store, source)
    header = store.boilerplate("site")
    assert header  # the shared header is boilerplate
    _no_streaming(store, monkeypatch)
    source.documents["https://site.test/p3"] = _HEADER + b" an edited page about a pier"
    del source.documents["https://site.test/p4"]
    _sync_folder(store, source)
    assert store.boilerplate("site") == header
    assert store.digest_counts("site") == recount(store, "site")


def test_a_parallel_sync_decides_boilerplate_without_reading_every_digest(
        pg_store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbsync.sync.parallel import sync_parallel

    source = MemorySource(name="site")
    source.documents.update(_pages(12))
    options = SyncOptions(allow_mass_delete=True, accept_replacements=True)
    embedder = CountingEmbedder(dimension=16)
    sync_parallel([source], pg_store, embedder, extractor_for, _CHUNKER, options)
    _no_streaming(pg_store, monkeypatch)
    source.documents["https://site.test/p3"] = _HEADER + b" an edited page about a pier"
    sync_parallel([source], pg_store, embedder, extractor_for, _CHUNKER, options)
    assert pg_store.boilerplate("site")
    assert pg_store.digest_counts("site") == recount(pg_store, "site")


@pytest.fixture
def pg_store(postgres_url: str, tmp_path: Path) -> Iterator[Any]:
    backend = Backend("postgres", postgres_url)
    opened = backend.open(tmp_path)
    try:
        yield opened
    finally:
        opened.close()
        backend.drop()


def test_a_sqlite_store_from_before_the_counts_has_them_counted_by_the_migration(
        tmp_path: Path) -> None:
    from kbsync.store.sqlite import schema

    store = SqliteStore(tmp_path / "kb.db")
    source = MemorySource(name="site")
    source.documents.update(_pages(9))
    source.documents["notes.txt"] = b"plain notes about the harbour light " * 30
    _sync_folder(store, source)
    expected = recount(store, "site")
    store.close()
    db = sqlite3.connect(tmp_path / "kb.db")
    db.execute("DROP TABLE digest_counts")
    db.execute(f"PRAGMA user_version = {schema.DIGEST_COUNTS_VERSION - 1}")
    db.commit()
    db.close()
    reopened = SqliteStore(tmp_path / "kb.db")
    try:
        assert reopened.digest_counts("site") == expected
        assert reopened.boilerplate_counted("site", 0.05) == reopened.boilerplate("site")
    finally:
        reopened.close()


def test_a_postgres_store_from_before_the_counts_has_them_counted_by_the_migration(
        pg_store: Any) -> None:
    import psycopg

    from kbsync.store.postgres import PostgresStore, schema

    source = MemorySource(name="site")
    source.documents.update(_pages(9))
    _sync_folder(pg_store, source)
    expected = recount(pg_store, "site")
    with psycopg.connect(pg_store.url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_store.schema}"')
        conn.execute("DROP TABLE digest_counts")
        conn.execute("UPDATE meta SET value = %s WHERE name = 'schema_version'",
                     (str(schema.DIGEST_COUNTS_VERSION - 1),))
    reopened = PostgresStore(pg_store.url, schema=pg_store.schema)
    try:
        assert reopened.digest_counts("site") == expected
        assert reopened.boilerplate_counted("site", 0.05) == reopened.boilerplate("site")
    finally:
        reopened.close()


def test_counts_of_a_document_that_moves_to_another_host_follow_it(opener: Opener) -> None:
    store = opener()
    docs: dict[str, list[str]] = {}
    for n in range(4):
        _edit(store, docs, "write", f"https://a.test/{n}", "", ["d0", f"x{n}"], False)
    _edit(store, docs, "move", "https://a.test/0", "https://b.test/0", [], False)
    _edit(store, docs, "move", "https://a.test/1", "https://b.test/1", ["d0", "y"], True)
    counts: Mapping[tuple[str, str], int] = store.digest_counts(SOURCE)
    assert counts[("a.test", "d0")] == 2
    assert counts[("b.test", "d0")] == 2
    assert counts[("b.test", "")] == 2
    assert counts == recount(store)


def test_a_write_rolled_back_counts_nothing_and_the_next_one_counts(opener: Opener) -> None:
    """The first write of a connection makes its temporary tables; rolled back, they go with
    it, and the next write makes them again."""
    store = opener()

    def stopped() -> None:
        with store.batch():
            _edit(store, {}, "write", "doc0", "", ["d0", "d1"], False)
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        stopped()
    assert store.digest_counts(SOURCE) == {}
    docs: dict[str, list[str]] = {}
    _edit(store, docs, "write", "doc0", "", ["d0", "d1"], False)
    assert store.digest_counts(SOURCE) == recount(store) == {("", ""): 1, ("", "d0"): 1,
                                                             ("", "d1"): 1}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS, tampered=st.dictionaries(st.integers(0, 30), st.integers(-2, 3),
                                             max_size=4))
def test_verify_finds_exactly_the_counts_changed_by_hand_and_repair_counts_them_again(
        opener: Opener, edits: list[tuple[str, str, str, list[str], bool]],
        tampered: dict[int, int]) -> None:
    """``tampered``: a kept count, by its place in key order (past the end: a count of a
    digest no chunk holds), -> what is added to it (0 deletes it)."""
    if opener is MemoryStore:
        pytest.skip("the memory store keeps no counts in SQL to compare")
    store = opener()
    docs: dict[str, list[str]] = {}
    for edit in edits:
        _edit(store, docs, *edit)
    assert store.digest_drift() == {}
    kept = store.digest_counts(SOURCE)
    keys = sorted(kept)
    with store._transaction():
        for at, change in tampered.items():
            if at >= len(keys):
                store._dialect.write("INSERT INTO digest_counts (source, grp, digest, "
                                     "documents) VALUES (?, '', ?, ?)",
                                     (SOURCE, f"none{at}", change or 1))
            elif change == 0:
                store._dialect.write("DELETE FROM digest_counts WHERE source = ? AND grp = ? "
                                     "AND digest = ?", (SOURCE, *keys[at]))
            else:
                store._dialect.write("UPDATE digest_counts SET documents = documents + ? "
                                     "WHERE source = ? AND grp = ? AND digest = ?",
                                     (change, SOURCE, *keys[at]))
    assert store.digest_drift() == ({SOURCE: len(tampered)} if tampered else {})
    assert store.recount_drifted() == len(tampered)
    assert store.digest_counts(SOURCE) == kept
    assert store.digest_drift() == {}
