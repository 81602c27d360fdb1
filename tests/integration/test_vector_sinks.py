"""External vector stores: Qdrant (local mode) and LanceDB (embedded) mirror the records.

Each real sink runs the same scenarios through the engine; the in-memory fake
adds the failures (a refused upsert, a lost deletion, a crash before the commit).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import uuid
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from typer.testing import CliRunner

from kbsync import DocumentRef, KnowledgeBase
from kbsync.cli import app
from kbsync.core.identity import IDENTITY_SCHEMA_VERSION, canonical_bytes, vector_id
from kbsync.engine import init_config, load_config
from kbsync.errors import ConfigError, DependencyMissingError
from kbsync.extract.registry import extractor_for
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.sync.mirror import expected_points, reconcile
from kbsync.sync.vector_index import MirroredIndex
from kbsync.testing import CountingEmbedder, MemorySink, MemorySource
from kbsync.vectors import Payload, SinkHit, SinkPoint, VectorPoint, VectorSink
from tests.conftest import CORPUS

SINKS = {
    "qdrant": 'kind = "qdrant"\npath = ".kbsync/qdrant"\n',
    "lancedb": 'kind = "lancedb"\npath = ".kbsync/lancedb"\n',
}
CHUNKER = Chunker("tttd", {"min_tokens": 24, "max_tokens": 96, "primary_bits": 5,
                           "backup_bits": 3})


class Counting:
    """A sink wrapper counting the points written and deleted."""

    def __init__(self, inner: VectorSink) -> None:
        self.inner = inner
        self.writes = 0

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension

    def reset(self, dimension: int) -> None:
        self.writes += 1
        self.inner.reset(dimension)

    def upsert(self, points: Sequence[VectorPoint]) -> None:
        self.writes += len(points)
        self.inner.upsert(points)

    def delete(self, ids: Collection[str]) -> None:
        self.writes += len(ids)
        self.inner.delete(ids)

    def scan(self) -> Iterator[SinkPoint]:
        return self.inner.scan()

    def search(self, vector: npt.NDArray[np.float32], k: int,
               ids: Collection[str] | None = None) -> list[SinkHit]:
        return self.inner.search(vector, k) if ids is None else self.inner.search(vector, k, ids)

    def close(self) -> None:
        self.inner.close()


def _knowledge_base(folder: Path, vectors: str | None) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:5]:
        shutil.copy(path, docs / path.name)
    config = init_config(folder, ["docs"])
    text = config.file.read_text(encoding="utf-8").replace("dimension = 1024", "dimension = 128")
    if vectors is not None:
        text += "\n[vectors]\n" + vectors
    config.file.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(params=sorted(SINKS))
def kb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KnowledgeBase]:
    folder = _knowledge_base(tmp_path / "kb", SINKS[request.param])
    with KnowledgeBase.open(folder) as kb:
        kb.sync()  # the store, and with it the sink, exist from the first write on
        assert kb.sink is not None
        kb.sink = Counting(kb.sink)
        yield kb


def _sink(engine: KnowledgeBase) -> Counting:
    assert isinstance(engine.sink, Counting)
    return engine.sink


def _ids(engine: KnowledgeBase) -> set[str]:
    return {p.id for p in _sink(engine).scan()}


def _assert_next_sync_writes_nothing(engine: KnowledgeBase) -> None:
    rows, points = engine.store.total_changes, _sink(engine).writes
    report = engine.sync()
    assert report.total("unchanged") == report.sources[0].documents["unchanged"] > 0
    assert engine.store.total_changes - rows == 1  # the run's own report, nothing else
    assert _sink(engine).writes == points


def test_a_sync_mirrors_every_indexed_chunk_under_deterministic_ids(kb: KnowledgeBase) -> None:
    kb.sync()
    expected = expected_points(kb.store, kb.embedder.identity)
    assert len(expected) == kb.status().chunks > 20
    assert _ids(kb) == set(expected)
    some = next(iter(expected.values()))
    assert vector_id(some.source, some.key, some.digest, 0) in expected
    assert kb.verify().ok
    _assert_next_sync_writes_nothing(kb)


def test_search_through_a_sink_gives_the_same_results_as_the_store(kb: KnowledgeBase,
                                                                   tmp_path: Path) -> None:
    kb.sync()
    plain_folder = _knowledge_base(tmp_path / "plain", None)
    with KnowledgeBase.open(plain_folder) as plain:
        plain.sync()
        assert plain.sink is None
        for query in ("how a deployment is rolled back",
                      "the command line options of the tool",
                      "check the health of the service and its logs"):
            # Equal scores may come back in any order; these queries have none in the
            # vector pool that hybrid search fuses (24 hits for k = 6).
            vector = plain.embedder.embed([query])[0]
            pool = [h.score for h in plain.store.search_vector(plain.embedder.identity,
                                                               vector, 25).hits]
            assert len({round(score, 5) for score in pool}) == len(pool)
            for mode in ("vector", "hybrid"):
                ours = kb.search(query, k=6, mode=mode, context_tokens=0)
                theirs = plain.search(query, k=6, mode=mode, context_tokens=0)
                assert [(h.key, h.index) for h in ours] == [(h.key, h.index) for h in theirs]
                assert [h.score for h in ours] == pytest.approx([h.score for h in theirs],
                                                                abs=1e-5)


def test_a_filtered_search_through_a_sink_ranks_only_the_matching_documents(
        kb: KnowledgeBase, tmp_path: Path) -> None:
    plain_folder = _knowledge_base(tmp_path / "plain", None)
    with KnowledgeBase.open(plain_folder) as plain:
        plain.sync()
        keys = sorted({r.key for r in plain.store.indexed_chunks()})
        query = "how a deployment is rolled back"
        # The document the unfiltered ranking puts last: its hits are not in the sink's
        # best few, so only a filter applied inside the sink finds them.
        last = plain.search(query, k=1000, mode="vector", context_tokens=0)[-1].key
        for filters in ({"path": last}, {"path": [keys[0], last]}, {"lang": "none"}):
            ours = kb.search(query, k=4, mode="vector", context_tokens=0, filters=filters)
            theirs = plain.search(query, k=4, mode="vector", context_tokens=0, filters=filters)
            assert [(h.key, h.index) for h in ours] == [(h.key, h.index) for h in theirs]
            assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], abs=1e-5)
            assert {h.key for h in ours} <= {last, keys[0]}
            assert bool(ours) == ("path" in filters)


def test_vectors_removed_behind_its_back_and_strays_are_reported_and_repaired(
        kb: KnowledgeBase) -> None:
    kb.sync()
    before = _ids(kb)
    removed = set(sorted(before)[:3])
    kb.sink.delete(removed)  # type: ignore[union-attr]
    strays = {str(uuid.UUID(int=n)) for n in (1, 2)}
    payload = Payload("docs", "gone.md", 0, "0" * 64, None, 0, 5, kb.embedder.identity)
    kb.sink.upsert([VectorPoint(i, np.full(128, 0.1, dtype=np.float32), payload)  # type: ignore[union-attr]
                    for i in strays])

    found = kb.reconcile()
    assert found is not None
    assert (found.missing, found.stray, found.stale) == (removed, strays, frozenset())
    checked = kb.verify()
    problems = checked.problems
    assert len(problems) == 2
    assert all(i in problems[0] for i in removed)
    assert all(i in problems[1] for i in strays)
    assert checked.remaining == problems
    assert not checked.ok

    repaired = kb.verify(repair=True)
    assert (repaired.problems, repaired.remaining, repaired.ok) == (problems, (), True)
    assert kb.verify().ok
    assert _ids(kb) == before
    _assert_next_sync_writes_nothing(kb)


def test_an_edit_moves_only_the_vectors_of_the_changed_chunks(kb: KnowledgeBase) -> None:
    kb.sync()
    before = _ids(kb)
    page = kb.config.root / "docs" / "a-harbormaster-cli.md"
    text = page.read_text(encoding="utf-8")
    middle = text.index("\n\n", len(text) // 2)
    page.write_text(text[:middle] + "\n\nA brand new paragraph about zebra crossings and "
                    "their painted stripes." + text[middle:], encoding="utf-8")
    report = kb.sync().sources[0]
    after = _ids(kb)
    assert report.documents["modified"] == 1
    assert len(after - before) == report.chunks["added"] > 0
    assert len(before - after) == report.chunks["deleted"]
    assert len(after & before) > 5 * len(after - before)  # most vectors stayed put
    assert report.vectors_deleted == report.chunks["deleted"]
    assert kb.verify().ok
    _assert_next_sync_writes_nothing(kb)


def test_erase_removes_the_sinks_vectors(kb: KnowledgeBase) -> None:
    kb.sync()
    mine = {i for i, p in expected_points(kb.store, kb.embedder.identity).items()
            if p.key == "a-harbormaster-cli.md"}
    assert mine
    assert kb.erase("*-cli.md").documents == (DocumentRef("docs", "a-harbormaster-cli.md"),)
    assert not mine & _ids(kb)
    assert kb.verify().ok


def test_verify_repair_on_the_command_line(kb: KnowledgeBase) -> None:
    kb.sync()
    kb.sink.delete(sorted(_ids(kb))[:1])  # type: ignore[union-attr]
    kb.close()  # Qdrant's local mode admits one client at a time
    runner = CliRunner()
    folder = str(kb.config.root)
    first = runner.invoke(app, ["verify", "-c", folder])
    assert first.exit_code == 4
    assert "1 vector(s) missing from it" in first.stdout
    repaired = runner.invoke(app, ["verify", "--repair", "-c", folder])
    assert repaired.exit_code == 0, repaired.stdout
    assert "repaired" in repaired.stdout
    assert runner.invoke(app, ["verify", "-c", folder]).exit_code == 0


# -- failures, with the in-memory sink --------------------------------------------------


def _docs() -> dict[str, bytes | None]:
    words = [f"word{n}" for n in range(400)]
    return {f"{name}.txt": (" ".join(f"{name} {w}" for w in words[i::3]) + ".").encode()
            for i, name in enumerate(("alpha", "beta", "gamma"))}


class _Setup:
    def __init__(self, store: SqliteStore | PostgresStore) -> None:
        self.source = MemorySource(_docs())
        self.store = store
        self.embedder = CountingEmbedder(32)
        self.sink = MemorySink()

    def sync(self) -> tuple[int, int]:
        """Sync; the rows and points it wrote."""
        rows, points = self.store.total_changes, self.sink.writes
        # These tests rewrite documents entirely: apply such texts at once (not held).
        sync_sources([self.source], self.store, self.embedder, extractor_for, CHUNKER,
                     options=SyncOptions(accept_replacements=True),
                     index=MirroredIndex(self.store, self.sink))
        return self.store.total_changes - rows - 1, self.sink.writes - points

    def mirrored(self) -> bool:
        found = reconcile(self.store, self.sink, self.embedder.identity, 32)
        return not found.problems() and set(self.sink.points) == set(
            expected_points(self.store, self.embedder.identity))


@pytest.fixture
def setup(store: SqliteStore | PostgresStore) -> _Setup:
    """A memory source, a memory sink and each kind of record store."""
    return _Setup(store)


def test_a_refused_upsert_keeps_the_previous_version_and_the_next_sync_converges(
        setup: _Setup) -> None:
    setup.sync()
    old = setup.store.document("beta.txt")
    setup.source.documents["beta.txt"] = b"beta has been rewritten entirely. " * 40
    setup.source.documents["gamma.txt"] = b"gamma has been rewritten too. " * 40
    setup.sink.fail_keys = {"beta.txt"}
    rows = setup.store.total_changes
    report = sync_sources([setup.source], setup.store, setup.embedder, extractor_for, CHUNKER,
                          index=MirroredIndex(setup.store, setup.sink))
    assert setup.store.total_changes > rows
    failures = dict(report.sources[0].failures)
    assert "vector store refused" in failures["beta.txt"]
    assert report.sources[0].documents["modified"] == 1  # gamma went through
    assert setup.store.document("beta.txt") == old
    assert setup.store.verify(setup.embedder.identity, None) == []
    assert setup.mirrored()

    setup.sink.fail_keys = set()
    rows_written, points_written = setup.sync()
    assert rows_written > 0
    assert points_written > 0
    assert "rewritten entirely" in setup.store.document("beta.txt").text  # type: ignore[union-attr]
    assert setup.mirrored()
    assert setup.sync() == (0, 0)


def test_a_deletion_lost_after_the_commit_is_replayed_from_the_outbox(
        setup: _Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    setup.sync()
    old_ids = set(setup.sink.points)
    del setup.source.documents["gamma.txt"]

    def unreachable(ids: Collection[str]) -> None:
        raise ConnectionError("vector store unreachable (simulated)")

    monkeypatch.setattr(setup.sink, "delete", unreachable)
    report = sync_sources([setup.source], setup.store, setup.embedder, extractor_for, CHUNKER,
                          index=MirroredIndex(setup.store, setup.sink))
    assert report.sources[0].documents["deleted"] == 1
    assert any("outbox" in w for w in report.sources[0].warnings)
    pending = set(setup.store.pending_outbox())
    assert pending
    assert pending <= old_ids
    found = reconcile(setup.store, setup.sink, setup.embedder.identity, 32)
    assert found.stray == pending
    assert found.pending == len(pending)

    monkeypatch.undo()
    setup.sync()  # replays the outbox first
    assert setup.store.pending_outbox() == []
    assert setup.mirrored()
    assert setup.sync() == (0, 0)


def test_a_crash_between_upsert_and_commit_leaves_strays_that_repair_removes(
        setup: _Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    setup.sync()
    setup.source.documents["alpha.txt"] = b"an intermediate alpha that never commits. " * 30

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process dies between the two writes

    monkeypatch.setattr(setup.store, "apply", crash)
    with pytest.raises(KeyboardInterrupt):
        setup.sync()
    monkeypatch.undo()
    strays = set(setup.sink.points) - set(expected_points(setup.store, setup.embedder.identity))
    assert strays  # the intermediate version's vectors, which no record describes

    setup.source.documents["alpha.txt"] = b"the final alpha, different again. " * 30
    setup.sync()
    found = reconcile(setup.store, setup.sink, setup.embedder.identity, 32)
    assert found.stray == strays
    assert not found.missing
    reconcile(setup.store, setup.sink, setup.embedder.identity, 32, repair=True)
    assert setup.mirrored()
    assert setup.sync() == (0, 0)


def test_a_collection_of_another_dimension_is_reported_and_rebuilt(setup: _Setup) -> None:
    setup.sync()
    setup.sink.reset(16)
    found = reconcile(setup.store, setup.sink, setup.embedder.identity, 32)
    assert found.wrong_dimension
    assert "16 dimensions" in found.problems()[0]
    setup.sync()  # a sync rebuilds the collection from the records
    assert setup.sink.dimension == 32
    assert setup.mirrored()


def test_boilerplate_that_appears_takes_its_vectors_out_of_the_sink(setup: _Setup) -> None:
    footer = " ".join(f"footer{n}" for n in range(120)) + "."
    pages = {f"page{n}.txt": (f"page {n} " + " ".join(f"topic{n}x{m}" for m in range(150))
                              + ".\n\n" + footer).encode() for n in range(6)}
    setup.source.documents = dict(list(pages.items())[:2])  # two copies are not boilerplate
    setup.sync()
    first = dict(setup.sink.points)

    setup.source.documents = pages  # six are: the unchanged two lose their footer vectors
    setup.sync()
    shared = setup.store.boilerplate("memory")
    footer_points = {i for i, (_, p) in first.items() if p.digest in shared}
    assert footer_points
    assert not footer_points & set(setup.sink.points)
    assert setup.mirrored()
    assert setup.sync() == (0, 0)


# -- ids, configuration, dependencies -------------------------------------------------


def test_vector_ids_are_uuids_pinned_by_their_inputs() -> None:
    first = vector_id("docs", "a.md", "ab" * 32, 0)
    # The first 128 bits of the domain-separated BLAKE2b hash, written as a UUID.
    fields = canonical_bytes("kbsync:vector-id", IDENTITY_SCHEMA_VERSION, "docs", "a.md",
                             "ab" * 32, 0)
    assert first == str(uuid.UUID(hashlib.blake2b(fields, digest_size=32).hexdigest()[:32]))
    assert first == "e86131b4-cac8-124d-d8f2-8a65e59c2d36"
    assert len({first, vector_id("docs", "a.md", "ab" * 32, 1),
                vector_id("docs", "b.md", "ab" * 32, 0), vector_id("web", "a.md", "ab" * 32, 0),
                vector_id("docs", "a.md", "cd" * 32, 0)}) == 5


@pytest.mark.parametrize(("table", "message"), [
    ('kind = "faiss"\n', "kind must be one of"),
    ('kind = "qdrant"\n', "exactly one of `path` or `url`"),
    ('kind = "lancedb"\npath = "x"\nurl = "y"\n', r"unknown setting \[vectors\] lancedb url"),
])
def test_a_bad_vectors_table_is_one_clear_error(tmp_path: Path, table: str, message: str) -> None:
    folder = _knowledge_base(tmp_path, table)
    with pytest.raises(ConfigError, match=message):
        load_config(folder)


def test_the_vectors_table_survives_adding_a_source(tmp_path: Path) -> None:
    from kbsync.engine import add_source

    folder = _knowledge_base(tmp_path, SINKS["lancedb"])
    (folder / "more").mkdir()
    updated = add_source(load_config(folder), "more")
    assert load_config(folder).vectors == updated.vectors
    assert updated.vectors is not None
    assert updated.vectors.table == {"kind": "lancedb", "path": ".kbsync/lancedb"}


def test_a_missing_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    from kbsync.vectors.lancedb import LanceDBSink
    from kbsync.vectors.qdrant import QdrantSink

    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    monkeypatch.setitem(sys.modules, "lancedb", None)
    with pytest.raises(DependencyMissingError, match=r"kbsync\[qdrant\]"):
        QdrantSink(path=tmp_path / "q")
    with pytest.raises(DependencyMissingError, match=r"kbsync\[lancedb\]"):
        LanceDBSink(path=tmp_path / "l")


@pytest.mark.parametrize("name", sorted(SINKS))
def test_workers_mirror_the_vectors_into_the_sink_as_one_process_does(
        tmp_path: Path, postgres_url: str, name: str) -> None:
    from tests.conftest import Backend

    backend = Backend("postgres", postgres_url)
    folder = _knowledge_base(tmp_path / "kb", SINKS[name])
    backend.configure(folder)
    try:
        with KnowledgeBase.open(folder) as engine:
            assert engine.sync(workers=1).total("new") == 5
            assert engine.verify().problems == ()
            assert engine.sink is not None
            expected = expected_points(engine.store, engine.embedder.identity)
            assert {p.id for p in engine.sink.scan()} == set(expected)
            doc = sorted((folder / "docs").iterdir())[0]
            doc.write_text(doc.read_text(encoding="utf-8") + "\n\nA new closing paragraph "
                           "about the lantern room and its brass.\n", encoding="utf-8")
            report = engine.sync(workers=1)
            assert report.total("modified") == 1
            assert report.sources[0].vectors_upserted > 0
            assert engine.verify().problems == ()
            assert engine.store.pending_outbox() == []
            assert {p.id for p in engine.sink.scan()} == set(
                expected_points(engine.store, engine.embedder.identity))
    finally:
        backend.drop()
