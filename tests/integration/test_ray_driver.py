"""The Ray driver gives the store and the report of a sync in one process, and a run that
loses a worker is finished by the next.

Every test runs on Ray started once for the session (``ray_local``: two CPUs and one
declared GPU with no device behind it). Two knowledge bases share one folder of documents:
one is synced in one process (:func:`kbsync.sync.sync_sources`), the other on Ray
(:func:`kbsync.sync.sync_ray`), both with small batches so that a sync plans, embeds and
applies many, and after every step of a seeded random edit script (adds, edits, rewrites,
moves, deletions, metadata changes) their logical dumps and their reports must be equal.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.engine import init_config
from kbsync.engine.recipe import ConfigRecipe
from kbsync.errors import ClusterError, ConfigError
from kbsync.report import SyncResult
from kbsync.store.postgres import PostgresStore
from kbsync.sync import (
    BatchLimits,
    Progress,
    RayCluster,
    SyncOptions,
    sync_ray,
    sync_sources,
)
from kbsync.testing import ProgressRecorder
from tests.conftest import Backend

ray = pytest.importorskip("ray")

WORDS = ("harbour light keeper stairs wick night storm ship lamp rock tide gull rope sail "
         "anchor beacon fog reef chart compass lantern mast deck hull wave shore cliff "
         "signal watch log pilot berth").split()
# Long enough for chunks of its own in most documents: boilerplate.
FOOTER = " ".join(random.Random(3).choice(WORDS) for _ in range(260)) + "."
BATCHES = BatchLimits(documents=6, first=2)
_EPOCH_NS = 1_600_000_000 * 10**9  # long past: no stat is racy, so both syncs see the same


class Corpus:
    """A folder of Markdown documents changed by a seeded random edit script; every write
    gets a modification time of its own, long past."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.folder = folder
        self.rng = random.Random(seed)
        self._clock = _EPOCH_NS
        self._names = 0
        folder.mkdir()

    def files(self) -> list[Path]:
        return sorted(p for p in self.folder.rglob("*.md"))

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self._clock += 10**9
        os.utime(path, ns=(self._clock, self._clock))

    def text(self, title: str | None = None) -> str:
        rng = self.rng
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 90))) + "."
                      for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.6:
            paragraphs.append(FOOTER)
        title = title or f"Log {rng.randint(1, 10**6)}"
        return f"---\ntitle: {title}\n---\n\n# {title}\n\n" + "\n\n".join(paragraphs) + "\n"

    def add(self) -> None:
        self._names += 1
        files = self.files()
        folder = self.folder / self.rng.choice(["", "a", "b/c"])
        path = folder / f"doc-{self._names:03d}.md"
        if files and self.rng.random() < 0.2:  # an exact copy: chunks two documents share
            self.write(path, self.rng.choice(files).read_text(encoding="utf-8"))
        else:
            self.write(path, self.text())

    def edit(self, path: Path) -> None:
        head, _, body = path.read_text(encoding="utf-8").rpartition("\n\n")
        words = body.split()
        words[self.rng.randrange(len(words))] = self.rng.choice(WORDS)
        self.write(path, f"{head}\n\n{' '.join(words)} {self.rng.choice(WORDS)}.\n")

    def rewrite(self, path: Path) -> None:
        self.write(path, self.text())

    def move(self, path: Path) -> None:
        self._names += 1
        target = self.folder / self.rng.choice(["", "moved"]) / f"moved-{self._names:03d}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)  # the same inode and modification time

    def delete(self, path: Path) -> None:
        path.unlink()

    def retitle(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        self.write(path, re.sub(r"^title: .*$", f"title: Retitled {self.rng.randint(1, 999)}",
                                text, count=1, flags=re.M))

    def step(self, changes: int) -> None:
        """``changes`` random edits of every kind."""
        for _ in range(changes):
            files = self.files()
            kind = self.rng.choice(["add", "edit", "rewrite", "move", "delete", "retitle"])
            if kind == "add" or len(files) < 4:
                self.add()
            else:
                getattr(self, kind)(self.rng.choice(files))


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


@dataclass
class Pair:
    """Two knowledge bases of one folder: one synced in one process, one on Ray."""

    single: KnowledgeBase
    on_ray: KnowledgeBase
    backend: Backend

    def sync_single(self, **options: Any) -> SyncResult:
        kb = self.single
        return sync_sources(kb.sources, kb.store, kb.embedder, kb._extractor_for,
                            kb.config.chunker, _options(kb, **options), index=kb.vector_index)

    def sync_ray(self, cluster: RayCluster | None = None, progress: Progress | None = None,
                 **options: Any) -> SyncResult:
        kb = self.on_ray
        return sync_ray(kb.sources, kb.store, kb.embedder, kb._extractor_for, kb.config.chunker,
                        _options(kb, **options), recipe=ConfigRecipe(kb.config),
                        cluster=cluster, progress=progress)

    def assert_same(self, single: SyncResult, on_ray: SyncResult) -> None:
        assert comparable(on_ray) == comparable(single)
        assert dump(self.on_ray, self.backend) == dump(self.single, self.backend)


def _options(kb: KnowledgeBase, **given: Any) -> SyncOptions:
    return replace(kb._options(allow_mass_delete=True), batch=BATCHES, **given)


def _kb(folder: Path, docs: Path, backend: Backend) -> KnowledgeBase:
    folder.mkdir()
    init_config(folder, [str(docs)], embedder={"kind": "hashing", "dimension": 32})
    backend.configure(folder)
    kb = KnowledgeBase.open(folder)
    kb._create_store()
    return kb


Pairing = Callable[[Backend, int], tuple[Pair, Corpus]]


@pytest.fixture
def pair_of(tmp_path: Path, ray_local: Any) -> Iterator[Pairing]:
    opened: list[Pair] = []

    def make(backend: Backend, seed: int) -> tuple[Pair, Corpus]:
        corpus = Corpus(tmp_path / "docs", seed)
        pair = Pair(_kb(tmp_path / "single", corpus.folder, backend),
                    _kb(tmp_path / "ray", corpus.folder, backend), backend)
        opened.append(pair)
        return pair, corpus

    yield make
    for pair in opened:
        pair.single.close()
        pair.on_ray.close()


def comparable(result: SyncResult) -> dict[str, Any]:
    """A report without what depends on the clock."""
    report = result.to_dict()
    for key in ("started", "finished", "seconds"):
        report.pop(key, None)
    return report


_QUERIES = {
    "documents": "SELECT source, key, locator, media_type, size, mtime_ns, inode, racy, etag, "
                 "last_modified, bytes_hash, text_hash, derivation, title, metadata, status, "
                 "generation, missing FROM documents",
    "chunks": "SELECT d.source, d.key, c.generation, c.idx, c.digest, c.section, c.heading, "
              "c.start, c.\"end\", c.tokens, c.boundary FROM chunks c "
              "JOIN documents d ON d.id = c.doc_id",
    "chunk_texts": "SELECT digest, text FROM chunk_texts",
    "vectors": "SELECT digest, embedder, dimension, {vector} FROM embeddings",
    "boilerplate": "SELECT source, digest FROM boilerplate",
    "meta": "SELECT name, value FROM meta",
    "moves": "SELECT d.key, m.moved_from FROM moves m JOIN documents d ON d.id = m.doc_id",
}
_TEXTS = {
    "sqlite": "SELECT d.key, v.generation, v.text FROM versions v "
              "JOIN documents d ON d.id = v.doc_id",
    "postgres": "SELECT d.key, t.text, t.previous FROM texts t JOIN documents d ON d.id = t.doc_id",
}


def dump(kb: KnowledgeBase, backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    """The store's content, without row ids, timestamps or the order rows were written in:
    documents, chunks, texts, chunk texts, vectors by digest, boilerplate, meta, moves."""
    queries = {**_QUERIES, "texts": _TEXTS[backend.name]}
    vector = "vector" if backend.name == "sqlite" else "vector::text"
    queries["vectors"] = queries["vectors"].format(vector=vector)
    if backend.name == "sqlite":
        db = sqlite3.connect(kb.config.root / ".kbsync" / "kbsync.db")
        try:
            return {name: sorted(db.execute(sql).fetchall(), key=repr)
                    for name, sql in queries.items()}
        finally:
            db.close()
    import psycopg

    schema = kb.config.store.settings.schema
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')
        return {name: sorted(conn.execute(sql).fetchall(), key=repr)
                for name, sql in queries.items()}


def _embedding_devices(seen: list[list[str]]) -> Progress:
    """A progress callback that notes the GPUs Ray gave the run's first embedding actor
    (started for the first batch: it exists once a batch is applied)."""
    def tick(stage: str, done: int, total: int) -> None:
        if stage == "apply" and not seen:
            name = next(n for n in ray.util.list_named_actors() if n.endswith(":embed:0"))
            seen.append(ray.get(ray.get_actor(name).gpus.remote()))

    return tick


def _history(pair: Pair, corpus: Corpus, cluster: RayCluster, *, steps: int, documents: int,
             changes: int) -> list[str]:
    """A first sync of ``documents`` and ``steps`` steps of ``changes`` edits, each synced in
    one process and on Ray; the GPUs of the first sync's embedding actor."""
    for _ in range(documents):
        corpus.add()
    devices: list[list[str]] = []
    pair.assert_same(pair.sync_single(), pair.sync_ray(cluster, _embedding_devices(devices)))
    for _ in range(steps):
        corpus.step(changes)
        pair.assert_same(pair.sync_single(), pair.sync_ray(cluster))
    return devices[0]


def test_a_random_edit_history_gives_the_same_sqlite_store_and_reports_on_ray(
    pair_of: Pairing,
) -> None:
    """On the session's declared GPU: the embedding actor is scheduled on it."""
    pair, corpus = pair_of(Backend("sqlite"), 1)
    assert ray.cluster_resources().get("GPU") == 1  # declared; no device behind it
    gpus = _history(pair, corpus, RayCluster(), steps=3, documents=24, changes=8)
    assert gpus == ["0"]


def test_a_random_edit_history_gives_the_same_postgres_store_and_reports_on_ray(
    pair_of: Pairing, pg: Backend,
) -> None:
    """Two store actors writing at once, and an embedding actor on the CPU."""
    pair, corpus = pair_of(pg, 2)
    gpus = _history(pair, corpus, RayCluster(appliers=2, gpus=False), steps=2, documents=20,
                    changes=6)
    assert gpus == []


def test_a_sync_on_ray_that_takes_vectors_past_ann_above_builds_their_index_at_its_end(
    pair_of: Pairing, pg: Backend,
) -> None:
    pair, corpus = pair_of(pg, 3)
    store = pair.on_ray.store
    assert isinstance(store, PostgresStore)
    for _ in range(6):
        corpus.add()
    pair.sync_ray()
    assert store.status().vector_search[0].endswith("exact search (the index is built at the "
                                                    "end of the sync that takes them past "
                                                    "ann_above = 100,000)")
    store.ann_above = 1  # as `ann_above = 1` under [store] would
    corpus.add()
    pair.sync_ray()
    assert store.status().vector_search[0].endswith(": HNSW index")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_longer_random_edit_histories_give_the_same_stores_and_reports_on_ray(
    pair_of: Pairing, pg: Backend, seed: int,
) -> None:
    pair, corpus = pair_of(pg if seed % 2 else Backend("sqlite"), seed)
    _history(pair, corpus, RayCluster(), steps=8, documents=60, changes=15)


def test_a_backfill_on_ray_embeds_on_the_actor_pool_as_one_process_embeds(
    pair_of: Pairing,
) -> None:
    """Boilerplate indexed after all: its chunks, never embedded, are embedded at the end."""
    pair, corpus = pair_of(Backend("sqlite"), 7)
    for _ in range(16):
        corpus.add()
    first = pair.sync_ray()
    pair.assert_same(pair.sync_single(), first)
    assert first.sources[0].boilerplate_chunks > 0
    single = pair.sync_single(index_boilerplate=True)
    on_ray = pair.sync_ray(index_boilerplate=True)
    pair.assert_same(single, on_ray)
    assert on_ray.sources[0].embeddings_backfill == first.sources[0].boilerplate_chunks


def _kill_after_first_batch(pair: Pair, role: str, restart: bool) -> Progress:
    """A progress callback that kills the run's first actor of ``role`` once a batch is
    applied (Ray's ``ray.kill``), as a lost process or node would end it."""
    killed: list[str] = []

    def tick(stage: str, done: int, total: int) -> None:
        if stage != "apply" or killed:
            return
        name = next(n for n in ray.util.list_named_actors() if n.endswith(f":{role}:0"))
        ray.kill(ray.get_actor(name), no_restart=not restart)
        killed.append(name)

    return tick


def test_a_killed_store_actor_ends_the_run_and_the_next_sync_converges(
    pair_of: Pairing,
) -> None:
    pair, corpus = pair_of(Backend("sqlite"), 4)
    for _ in range(30):
        corpus.add()
    single = pair.sync_single()
    with pytest.raises(ClusterError, match="sync again"):
        pair.sync_ray(progress=_kill_after_first_batch(pair, "store", restart=False))
    interrupted = pair.on_ray.store.runs(1)[0].report
    assert interrupted.get("interrupted") is True
    assert 0 < interrupted["sources"][0]["documents_applied"] < 30
    finished = pair.sync_ray()
    assert finished.total("new") < 30  # only what the killed run had not applied
    assert finished.total("new") + finished.total("unchanged") == 30
    assert not finished.failed
    assert dump(pair.on_ray, pair.backend) == dump(pair.single, pair.backend)
    assert single.total("new") == 30


def test_a_killed_embedding_actor_is_restarted_and_the_run_ends_as_one_not_killed(
    pair_of: Pairing,
) -> None:
    pair, corpus = pair_of(Backend("sqlite"), 5)
    for _ in range(30):
        corpus.add()
    pair.assert_same(pair.sync_single(),
                     pair.sync_ray(progress=_kill_after_first_batch(pair, "embed", restart=True)))


def test_sync_engine_ray_on_the_command_line_prints_the_report_of_one_process(
    tmp_path: Path, ray_local: Any,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(20):
        (docs / f"note-{i}.md").write_text(f"# Note {i}\n\n" + " ".join(WORDS[i:] + WORDS[:i]))
    reports = {}
    for engine in ("local", "ray"):
        kb = tmp_path / engine
        kb.mkdir()
        init_config(kb, [str(docs)], embedder={"kind": "hashing", "dimension": 32})
        out = CliRunner().invoke(app, ["sync", "-c", str(kb), "--json", "--engine", engine])
        assert out.exit_code == 0, out.output
        reports[engine] = json.loads(out.stdout)
        for key in ("started", "finished", "seconds"):
            reports[engine].pop(key)
    assert reports["ray"] == reports["local"]
    assert reports["ray"]["documents"]["new"] == 20


def test_a_sync_on_ray_refuses_an_external_vector_store_and_worker_processes(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    config = init_config(tmp_path, [str(docs)], embedder={"kind": "hashing", "dimension": 32})
    with KnowledgeBase.open(tmp_path) as kb, \
            pytest.raises(ConfigError, match="its CPUs from the cluster"):
        kb.sync(ray=RayCluster(), workers=2)
    config.file.write_text(config.file.read_text()
                           + '\n[vectors]\nkind = "lancedb"\npath = ".kbsync/lancedb"\n')
    with KnowledgeBase.open(tmp_path) as kb, \
            pytest.raises(ConfigError, match="--engine ray does not drive an external vector"):
        kb.sync(ray=RayCluster())


def test_a_crawled_site_is_read_where_it_was_crawled_and_not_fetched_again(
    tmp_path: Path, httpserver: HTTPServer, ray_local: Any,
) -> None:
    from tests.integration.test_web_sync import Site

    site = Site()
    httpserver.expect_request("").respond_with_handler(site)
    kb = tmp_path / "kb"
    kb.mkdir()
    init_config(kb, [httpserver.url_for("/")], embedder={"kind": "hashing", "dimension": 32})
    with (kb / "kbsync.toml").open("a") as config:
        config.write("allow_private_addresses = true\ndelay = 0.0\nsoft_404_check = false\n")
    with KnowledgeBase.open(kb) as engine:
        first = engine.sync(ray=RayCluster())
        assert first.total("new") == 3, first.sources[0].failures
        assert site.bodies_sent == 3  # each page once: by the crawl, not again by a worker
        site.pages["/tides"] += " A storm surge once flooded the quay."
        second = engine.sync(ray=RayCluster())
        assert second.total("modified") == 1
        assert second.total("unchanged") == 2
        assert site.bodies_sent == 4


def test_ray_is_joined_only_by_a_sync_with_work_and_its_start_is_a_stage_of_progress(
    pair_of: Pairing,
) -> None:
    pair, corpus = pair_of(Backend("sqlite"), 21)
    for _ in range(5):
        corpus.add()
    first, again = ProgressRecorder(), ProgressRecorder()
    assert pair.sync_ray(progress=first).sources[0].documents_applied == 5
    assert first.runs("start Ray") == [[(0, 1), (1, 1)]]
    assert pair.sync_ray(progress=again).sources[0].documents_applied == 0  # a no-op
    assert "start Ray" not in again.stages()


def test_the_stage_table_on_ray_has_the_rows_of_one_process_in_their_order(
    pair_of: Pairing,
) -> None:
    pair, corpus = pair_of(Backend("sqlite"), 23)
    for _ in range(6):
        corpus.add()
    single, on_ray = pair.sync_single(), pair.sync_ray()
    assert list(single.seconds) == ["list", "read", "plan", "embed", "apply", "index"]
    assert list(on_ray.seconds) == list(single.seconds)
    corpus.step(4)
    assert list(pair.sync_ray().seconds) == list(pair.sync_single().seconds)
