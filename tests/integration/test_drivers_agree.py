"""Every driver gives the same store and the same report: random edit scripts over a small
folder, synced after each step by one process on SQLite, one process on PostgreSQL, and the
PostgreSQL driver with one and with two workers (claiming a few documents at a time, so that
both take batches)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kbsync.sync.work
from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.conftest import Backend

WORDS = ("harbour light keeper stairs wick night storm ship lamp rock tide gull rope sail "
         "anchor beacon fog reef chart compass lantern mast deck hull wave shore cliff "
         "north south bell buoy current drift ebb flood keel ledger mooring pier").split()
# Long enough for whole chunks of its own: boilerplate once in enough documents.
NOTICE = " ".join(random.Random(7).choice(
    "orders authority signals watches keeping reading standing subject logbook after dark "
    "notice copy master pilot berth dues tonnage clearance".split()) for _ in range(400)) + "."
CLAIM = 2  # documents a worker claims at once here: every run has several batches
DRIVERS = ("sqlite", "postgres", "workers-1", "workers-2")
_BASE_NS = time.time_ns() - 86_400 * 10**9  # every stat well past the racy window


class Folder:
    """A folder of documents that an edit script changes, each write with an mtime of its
    own, a day old: no driver sees a racy stat, whenever it lists."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        self.path, self.rng = path, rng
        self.clock = 0
        self.made = 0
        path.mkdir()
        for _ in range(10):
            self.add()

    def _stamp(self, path: Path) -> None:
        self.clock += 1
        at = _BASE_NS + self.clock * 10**9
        os.utime(path, ns=(at, at))

    def _text(self, markdown: bool) -> str:
        rng = self.rng
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 110))) + "."
                      for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.4:
            paragraphs.append(NOTICE)
        body = "\n\n".join(paragraphs)
        if markdown:
            return (f"---\ntitle: Log {self.made}\nstatus: {rng.choice(['draft', 'final'])}\n"
                    f"---\n\n# Log {self.made}\n\n{body}\n")
        return f"Log {self.made}.\n\n{body}\n"

    def _write(self, path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        self._stamp(path)

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir() if p.is_file())

    def add(self) -> str:
        self.made += 1
        markdown = self.rng.random() < 0.5
        path = self.path / f"log-{self.made:03d}.{'md' if markdown else 'txt'}"
        self._write(path, self._text(markdown))
        return f"add {path.name}"

    def edit(self) -> str:
        path = self.rng.choice(self.files())
        words = path.read_text(encoding="utf-8").split(" ")
        for _ in range(3):
            i = self.rng.randrange(len(words))
            words[i] = self.rng.choice(WORDS)
        self._write(path, " ".join(words))
        return f"edit {path.name}"

    def rewrite(self) -> str:
        path = self.rng.choice(self.files())
        self._write(path, self._text(path.suffix == ".md"))
        return f"rewrite {path.name}"

    def move(self) -> str:
        path = self.rng.choice(self.files())
        self.made += 1
        target = path.with_name(f"moved-{self.made:03d}{path.suffix}")
        path.rename(target)
        return f"move {path.name} {target.name}"

    def delete(self) -> str:
        path = self.rng.choice(self.files())
        path.unlink()
        return f"delete {path.name}"

    def touch(self) -> str:
        path = self.rng.choice(self.files())
        self._stamp(path)
        return f"touch {path.name}"

    def retitle(self) -> str:
        marked = [p for p in self.files() if p.suffix == ".md"]
        if not marked:
            return self.add()
        path = self.rng.choice(marked)
        text = path.read_text(encoding="utf-8")
        flipped = text.replace("status: draft", "status: was-draft", 1) \
            if "status: draft" in text else text.replace("status: ", "status: re-", 1)
        self._write(path, flipped)
        return f"retitle {path.name}"

    def copy(self) -> str:
        path = self.rng.choice(self.files())
        self.made += 1
        target = path.with_name(f"copy-{self.made:03d}{path.suffix}")
        self._write(target, path.read_text(encoding="utf-8"))
        return f"copy {path.name} {target.name}"

    def step(self, edits: int) -> list[str]:
        """A few random edits (the folder never empties: a mass deletion is its own test)."""
        ops: list[Callable[[], str]] = [self.add, self.edit, self.rewrite, self.move,
                                        self.delete, self.touch, self.retitle, self.copy]
        done = []
        for _ in range(edits):
            op = self.rng.choice(ops)
            if op == self.delete and len(self.files()) < 8:
                op = self.add
            done.append(op())
        return done


def _rows(store: SqliteStore | PostgresStore, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(store, SqliteStore):
        db = sqlite3.connect(store.path)
        try:
            return [tuple(r) for r in db.execute(sql)]
        finally:
            db.close()
    return [tuple(r) for r in store._conn.execute(sql)]


def logical_dump(engine: KnowledgeBase) -> dict[str, Any]:
    """What a store means, whichever kind it is: documents, each one's chunk digests and
    texts, vectors by digest, boilerplate, meta, erasures; no ids, times or roots."""
    store = engine.store
    assert isinstance(store, SqliteStore | PostgresStore)
    docs = {}
    for source in sorted(store.source_names()):
        for key, d in store.manifest(source).items():
            text = store.document(key, source)
            assert text is not None
            docs[(source, key)] = (d.stat, d.bytes_hash, d.text_hash, d.derivation, d.title,
                                   d.metadata, d.generation, d.missing, text.text,
                                   text.previous)
    digests = {(source, d.key): d.chunk_digests for source in sorted(store.source_names())
               for d in store.with_digests(source, store.manifest(source).values())}
    cached = {d for (d,) in _rows(store, "SELECT digest FROM embeddings")}
    vectors = store.vectors(engine.embedder.identity, cached)
    return {
        "documents": docs,
        "chunks": digests,
        "vectors": {d: np.round(v, 5).tobytes().hex() for d, v in sorted(vectors.items())},
        "boilerplate": {s: sorted(store.boilerplate(s)) for s in sorted(store.source_names())},
        "meta": sorted(r for r in _rows(store, "SELECT name, value FROM meta")
                       if not r[0].startswith(("root ", "schema_version", "index_deferred"))),
        "erasures": [p for p, _ in store.erasures()],
    }


def report_json(result: Any) -> dict[str, Any]:
    """A run's report without its times."""
    data = json.loads(json.dumps(result.to_dict()))
    for name in ("started", "finished", "seconds"):
        data.pop(name, None)
    return dict(data)


def _spawn_claiming(engine: KnowledgeBase) -> Callable[[str, int], Callable[[], list[int]]]:
    """Worker processes that claim :data:`CLAIM` documents at a time, as this process does."""
    code = ("import sys, kbsync.sync.work as work\n"
            f"work.CLAIM_BATCH = {CLAIM}\n"
            "from kbsync.app.knowledge_base import KnowledgeBase\n"
            "with KnowledgeBase.open(sys.argv[1]) as engine:\n"
            "    engine.work(run=sys.argv[2])\n")

    def start(run: str, count: int) -> Callable[[], list[int]]:
        processes = [subprocess.Popen([sys.executable, "-c", code, str(engine.config.root),
                                       run], stdin=subprocess.DEVNULL) for _ in range(count)]
        return lambda: [p.wait() for p in processes]

    return start


@pytest.fixture
def drivers(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A knowledge base of the folder ``tmp_path/docs`` for each driver (small vectors)."""
    monkeypatch.setattr(kbsync.sync.work, "CLAIM_BATCH", CLAIM)
    backend = Backend("postgres", postgres_url)
    try:
        for name in DRIVERS:
            root = tmp_path / name
            root.mkdir()
            init_config(root, [str(tmp_path / "docs")])
            if name != "sqlite":
                backend.configure(root)
            file = root / "kbsync.toml"
            file.write_text(file.read_text().replace("dimension = 1024", "dimension = 32"))
        yield
    finally:
        backend.drop()


def _sync(root: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with KnowledgeBase.open(root) as engine:
        if name.startswith("workers-"):
            engine._spawn = _spawn_claiming(engine)  # type: ignore[method-assign]
            result = engine.sync(workers=int(name.split("-")[1]))
        else:
            result = engine.sync()
        assert engine.verify().problems == ()
        return report_json(result), logical_dump(engine)


def _replay(tmp_path: Path, seed: int, steps: int) -> None:
    folder = Folder(tmp_path / "docs", random.Random(seed))
    script = ["start"]
    for step in range(steps + 1):
        if step:
            script.append("; ".join(folder.step(random.Random(seed * 100 + step).randint(1, 3))))
        seen = {name: _sync(tmp_path / name, name) for name in DRIVERS}
        reference_report, reference_dump = seen["sqlite"]
        for name in DRIVERS[1:]:
            report, dump = seen[name]
            where = f"seed {seed}, after {' | '.join(script)}: {name} differs from sqlite"
            assert dump == reference_dump, f"{where}: {_differences(dump, reference_dump)}"
            assert report == reference_report, f"{where}: {_differences(report, reference_report)}"


def _differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Where two JSON-like values differ, as paths with both values (the first ten)."""
    if isinstance(got, dict) and isinstance(want, dict):
        found = [d for key in sorted(set(got) | set(want), key=str)
                 for d in _differences(got.get(key), want.get(key), f"{path}.{key}")]
    elif isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        found = [d for i, (a, b) in enumerate(zip(got, want, strict=True))
                 for d in _differences(a, b, f"{path}[{i}]")]
    else:
        found = [] if got == want else [f"{path or '.'}: {got!r} != {want!r}"]
    return found[:10]


@pytest.mark.usefixtures("drivers")
def test_every_driver_gives_the_same_store_and_report_after_each_step_of_an_edit_script(
        tmp_path: Path) -> None:
    _replay(tmp_path, seed=3, steps=5)


@pytest.mark.slow
@pytest.mark.usefixtures("drivers")
@pytest.mark.parametrize("seed", range(10, 16))
def test_every_driver_agrees_over_longer_edit_scripts(tmp_path: Path, seed: int) -> None:
    _replay(tmp_path, seed=seed, steps=12)
