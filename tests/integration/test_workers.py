"""Parallel workers on one PostgreSQL store: same result as one process, nothing lost to a kill."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.errors import ConfigError
from kbsync.extract.registry import extractor_for
from kbsync.model import SourceItem
from kbsync.store.postgres import PostgresStore
from kbsync.sync.observe import derivation
from kbsync.sync.work import job_data
from tests.conftest import Backend

DOCUMENTS = int(os.environ.get("KBSYNC_TEST_WORKER_DOCUMENTS", "2000"))
WORDS = ("harbour light keeper stairs wick night storm ship lamp rock tide gull rope sail "
         "anchor beacon fog reef chart compass lantern mast deck hull wave shore cliff").split()
# A long notice in one document of ten: long enough for whole chunks of its own (boilerplate).
NOTICE = " ".join(random.Random(7).choice(
    "orders authority signals watches keeping reading standing subject logbook after dark "
    "notice copy master pilot berth dues tonnage clearance".split()) for _ in range(600)) + "."


def _corpus(folder: Path, count: int) -> None:
    """Generated documents: unique text, a shared notice (boilerplate) and exact duplicates."""
    rng = random.Random(20)
    folder.mkdir()
    for i in range(count):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 140))) + "."
                      for _ in range(rng.randint(1, 3))]
        if i % 10 == 0:
            paragraphs.append(NOTICE)
        body = "\n\n".join([f"Log {i}.", *paragraphs])
        if i % 100 == 99:  # a copy of an earlier document
            body = (folder / f"log-{i - 1:05d}.txt").read_text()
        (folder / f"log-{i:05d}.txt").write_text(body)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("workers") / "docs"
    _corpus(folder, DOCUMENTS)
    return folder


def _kb(tmp_path: Path, docs: Path | str, backend: Backend) -> Path:
    """A knowledge base on ``docs`` in a fresh PostgreSQL schema (small vectors: a fast test)."""
    init_config(tmp_path, [str(docs)])
    backend.configure(tmp_path)
    file = tmp_path / "kbsync.toml"
    text = file.read_text().replace("dimension = 1024", "dimension = 32")
    # The vector index is built above one vector: the parallel sync's end builds it.
    file.write_text(text.replace("[store]\n", "[store]\nann_above = 1\n"))
    return tmp_path


def dump(store: PostgresStore) -> dict[str, list[tuple[Any, ...]]]:
    """The store's content, independent of row ids, timestamps and insertion order."""
    queries = {
        "documents": "SELECT source, key, locator, media_type, size, mtime_ns, inode, etag, "
                     "last_modified, bytes_hash, text_hash, derivation, title, metadata, status, "
                     "generation, missing FROM documents",
        "chunks": "SELECT d.source, d.key, c.generation, c.idx, c.digest, c.section, c.heading, "
                  "c.start, c.\"end\", c.tokens, c.boundary FROM chunks c "
                  "JOIN documents d ON d.id = c.doc_id",
        "texts": "SELECT d.source, d.key, t.text, t.previous FROM texts t "
                 "JOIN documents d ON d.id = t.doc_id",
        "chunk_texts": "SELECT digest, text FROM chunk_texts",
        "embeddings": "SELECT digest, embedder, dimension, vector::text FROM embeddings",
        "boilerplate": "SELECT source, digest FROM boilerplate",
        "meta": "SELECT name, value FROM meta",
        "work": "SELECT run FROM work",
    }
    return {name: sorted(store._conn.execute(sql).fetchall(), key=repr)
            for name, sql in queries.items()}


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


@pytest.fixture(scope="module")
def one_worker(corpus: Path, pg: Backend,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Any, ...]]]:
    """The store as one worker (this process, through the queue) leaves it."""
    kb = _kb(tmp_path_factory.mktemp("one"), corpus, pg)
    with KnowledgeBase.open(kb) as engine:
        report = engine.sync(workers=1)
        assert report.total("new") == DOCUMENTS
        assert engine.verify().problems == ()
        assert isinstance(engine.store, PostgresStore)
        return dump(engine.store)


def test_four_worker_processes_build_exactly_the_store_one_worker_builds(
    corpus: Path, pg: Backend, tmp_path: Path, one_worker: dict[str, list[tuple[Any, ...]]],
) -> None:
    kb = _kb(tmp_path, corpus, pg)
    with KnowledgeBase.open(kb) as engine:
        report = engine.sync(workers=4)
        assert report.total("new") == DOCUMENTS
        assert not report.failed
        assert not report.sources[0].warnings
        assert report.sources[0].boilerplate_chunks > 0
        assert isinstance(engine.store, PostgresStore)
        assert dump(engine.store) == one_worker
        # The vector index, deferred during the first load, was built at its end.
        assert engine.store._conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname LIKE 'embeddings_hnsw_%'").fetchall() == [("embeddings_hnsw_32",)]
        again = engine.sync(workers=4)
        assert again.total("unchanged") == DOCUMENTS
        assert again.sources[0].bytes_read == 0
        assert dump(engine.store) == one_worker


def test_a_killed_worker_loses_nothing(
    corpus: Path, pg: Backend, tmp_path: Path, one_worker: dict[str, list[tuple[Any, ...]]],
) -> None:
    kb = _kb(tmp_path, corpus, pg)
    marker = tmp_path / "claimed"
    # A worker that stops for good after reading its first batch, before it commits.
    doomed = ("import sys, time\n"
              "from kbsync.app.knowledge_base import KnowledgeBase\n"
              "from kbsync.store.postgres import PostgresStore\n"
              "def stuck(store, run, source, rows, *args):\n"
              "    open(sys.argv[2], 'w').write(rows[0][0])\n"
              "    time.sleep(3600)\n"
              "PostgresStore.observed_batch = stuck\n"
              "with KnowledgeBase.open(sys.argv[1]) as engine:\n"
              "    engine.work(run=sys.argv[3])\n")
    killed: list[str] = []

    def spawn(engine: KnowledgeBase) -> Callable[[str, int], Callable[[], list[int]]]:
        others = engine._spawn

        def start(run: str, count: int) -> Callable[[], list[int]]:
            victim = subprocess.Popen([sys.executable, "-c", doomed, str(kb), str(marker), run])
            while not marker.exists() or not marker.read_text():
                assert victim.poll() is None, "the worker to be killed ended on its own"
                time.sleep(0.05)
            assert isinstance(engine.store, PostgresStore)
            held = engine.store.pending(run)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed.append(marker.read_text())
            # Its batch was read but not committed: the queue still counts it.
            assert engine.store.pending(run) == held
            return others(run, count - 1)
        return start

    with KnowledgeBase.open(kb) as engine:
        engine._spawn = spawn(engine)  # type: ignore[method-assign]
        report = engine.sync(workers=3)
        assert killed
        assert report.total("new") == DOCUMENTS
        assert engine.store.document(killed[0]) is not None
        assert engine.verify().problems == ()
        assert isinstance(engine.store, PostgresStore)
        assert dump(engine.store) == one_worker


def test_a_rename_seen_by_a_worker_is_a_move_and_embeds_nothing(
    pg: Backend, tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 12)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=2)
        (docs / "log-00003.txt").rename(docs / "renamed.txt")
        (docs / "log-00004.txt").unlink()
        report = engine.sync(workers=2)
        assert report.total("moved") == 1
        assert report.total("deleted") == 1
        assert report.sources[0].embeddings_computed == 0
        assert engine.store.document("renamed.txt") is not None
        assert engine.store.document("log-00004.txt") is None
        assert engine.verify().problems == ()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")
def test_a_rename_with_edits_that_git_names_is_a_move_for_workers(
    pg: Backend, tmp_path: Path,
) -> None:
    from tests.integration.test_git_source import Repo

    repo = Repo(tmp_path / "repo")
    _corpus(repo.path / "docs", 8)
    repo.commit()
    (tmp_path / "kb").mkdir()
    kb = _kb(tmp_path / "kb", f"git+{repo.path}", pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=2)
        repo.git("mv", "docs/log-00003.txt", "docs/renamed.txt")
        edited = (repo.path / "docs/renamed.txt").read_text() + "\n\nA new closing line."
        repo.commit({"docs/renamed.txt": edited})
        report = engine.sync(workers=2)
        assert [(c.key, c.action, c.moved_from) for c in report.sources[0].changes] == [
            ("docs/renamed.txt", "moved", "docs/log-00003.txt")]
        assert 0 < report.sources[0].embeddings_computed == report.sources[0].chunks["added"]
        assert engine.store.document("docs/log-00003.txt") is None
        assert engine.verify().problems == ()


def test_a_file_touched_or_rewritten_with_the_same_text_is_unchanged_for_workers(
    pg: Backend, tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 6)
    # Written long before the syncs, as a touch is below: a stat as new as the sync that
    # takes it is racy, and the next sync reads the file again rather than trust it.
    an_hour_ago = time.time_ns() - 3600 * 10**9
    for path in docs.iterdir():
        os.utime(path, ns=(an_hour_ago, an_hour_ago))
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=2)
        touched, respaced = docs / "log-00001.txt", docs / "log-00002.txt"
        later = an_hour_ago + 5_000_000_000
        os.utime(touched, ns=(later, later))
        title, body = respaced.read_text().split("\n\n", 1)
        respaced.write_text(title + "\n\n" + body.replace(" ", "  ", 3))  # the title kept
        os.utime(respaced, ns=(later, later))
        report = engine.sync(workers=2)
        assert [(c.key, c.action) for c in report.sources[0].changes] == []
        assert report.total("metadata-only") == 0
        assert report.total("unchanged") == 6
        assert report.sources[0].changes == ()
        assert engine.sync(workers=2).sources[0].bytes_read == 0  # both stats were refreshed


def test_an_edit_applied_by_a_worker_has_its_change_report(pg: Backend, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 4)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=2)
        edited = docs / "log-00001.txt"
        text = edited.read_text()
        edited.write_text(text + " A new closing sentence.")
        report = engine.sync(workers=2)
    (change,) = report.sources[0].changes
    assert (change.key, change.action) == ("log-00001.txt", "modified")
    assert change.change is not None
    assert 0.9 < change.change.similarity < 1.0
    (region,) = change.change.regions
    assert (text + " A new closing sentence.")[region.offset:region.end] == (
        "A new closing sentence.")


def test_workers_keep_the_mass_deletion_guard(pg: Backend, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 6)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=1)
        for path in sorted(docs.iterdir())[:4]:
            path.unlink()
        blocked = engine.sync(workers=1)
        assert blocked.sources[0].deletions_blocked
        assert engine.status().documents == 6
        assert engine.sync(workers=1, allow_mass_delete=True).total("deleted") == 4


def test_workers_on_a_sqlite_store_are_refused_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    init_config(tmp_path, ["docs"])
    with KnowledgeBase.open(tmp_path) as engine, pytest.raises(ConfigError,
                                                                 match="PostgreSQL store"):
        engine.sync(workers=2)
    out = subprocess.run([sys.executable, "-m", "kbsync", "sync", "--workers", "2", "-c",
                          str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 1
    assert "needs a PostgreSQL store" in out.stderr


def test_a_parallel_sync_on_the_command_line_prints_its_report_and_no_worker_chatter(
        pg: Backend, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 6)
    kb = _kb(tmp_path, docs, pg)
    out = subprocess.run([sys.executable, "-m", "kbsync", "sync", "--workers", "2", "--json",
                          "-c", str(kb)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["documents"]["new"] == 6
    assert "documents processed" not in out.stderr


def test_a_worker_with_another_configuration_is_refused(pg: Backend, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 3)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        queue = PostgresStore(pg.url, schema=engine.config.store.settings.schema)
        queue.enqueue("a-run", "docs", [("log-00000.txt", {
            "locator": str(docs / "log-00000.txt"), "media_type": "text/plain", "stat": None,
            "validators": None, "not_modified": False, "derivation": "another chunker",
            "embedder": engine.embedder.identity})])
        with pytest.raises(ConfigError, match="differ"):
            engine.work(run="a-run")
        assert queue.pending("a-run") == 1  # the claim went back to the queue
        assert engine.status().documents == 0
        queue.close()


def test_a_worker_started_on_its_own_reads_every_run_but_applies_nothing_undecided(
    pg: Backend, tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 4)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        queue = PostgresStore(pg.url, schema=engine.config.store.settings.schema)
        extractor = extractor_for("text/plain")
        assert extractor is not None
        items = [(path.name, job_data(SourceItem(path.name, str(path), "text/plain"),
                                        derivation(engine.config.chunker, extractor.identity),
                                        engine.embedder.identity))
                 for path in sorted(docs.iterdir())]
        queue.enqueue("run-a", "docs", items[:2])
        queue.enqueue("run-b", "docs", items[2:])
        assert queue.open_runs() == ["run-a", "run-b"]
        out = subprocess.run([sys.executable, "-m", "kbsync", "worker", "-c", str(kb)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "4 documents processed" in out.stderr
        # Read, each waiting for a coordinator to decide on its source; none is alive.
        assert queue.open_runs() == []
        assert queue.waiting("run-a") == {"observed": 2}
        queue.close()
    with KnowledgeBase.open(kb) as engine:
        assert engine.status().documents == 0
        assert engine.sync(workers=2).total("new") == 4
        assert engine.verify().problems == ()


def test_the_queue_of_a_run_whose_coordinator_died_is_forgotten_by_the_next_sync(
    pg: Backend, tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 3)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync(workers=1)
        (docs / "log-00001.txt").unlink()
        queue = PostgresStore(pg.url, schema=engine.config.store.settings.schema)
        # What a coordinator killed after listing leaves: a document to read (deleted
        # since) and one vanished, which a worker must not take for a move's origin.
        extractor = extractor_for("text/plain")
        assert extractor is not None
        made_with = derivation(engine.config.chunker, extractor.identity)
        stale = [(p, job_data(SourceItem(p, str(docs / p), "text/plain"), made_with,
                                engine.embedder.identity)) for p in ("log-00001.txt",)]
        queue.enqueue("dead-run", "docs", stale)
        queue.enqueue("dead-run", "docs", [("log-00002.txt", {})], state="vanished")
        report = engine.sync(workers=2)
        assert report.total("deleted") == 1
        # No run is left for a worker to serve, and nothing of the dead one stays.
        assert queue.open_runs() == []
        assert queue._conn.execute("SELECT count(*) FROM work").fetchone() == (0,)
        queue.close()
        assert engine.verify().problems == ()


def test_workers_leave_the_meta_a_single_process_sync_leaves(pg: Backend, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 6)
    meta = []
    for name, workers in (("single", 0), ("parallel", 2)):
        (tmp_path / name).mkdir()
        kb = _kb(tmp_path / name, docs, pg)
        with KnowledgeBase.open(kb) as engine:
            engine.sync(workers=workers)
            assert isinstance(engine.store, PostgresStore)
            meta.append(dump(engine.store)["meta"])
    # Among them the record that every chunk has its vector, which later syncs trust.
    assert meta[0] == meta[1]
    assert any(name.startswith("embedded ") for name, _ in meta[1])


def test_a_single_process_sync_also_forgets_the_queue_of_a_killed_parallel_sync(
    pg: Backend, tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    _corpus(docs, 2)
    kb = _kb(tmp_path, docs, pg)
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        queue = PostgresStore(pg.url, schema=engine.config.store.settings.schema)
        queue.enqueue("dead-run", "docs", [("log-00000.txt", {})])
        engine.sync()
        assert queue.open_runs() == []
        queue.close()
