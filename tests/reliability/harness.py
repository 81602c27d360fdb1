"""The crash scenarios, their corpus, forked crashing runs and the logical dump of a store.

The dump is what a knowledge base means (documents, texts, chunks, full-text rows,
vectors, cache keys), free of row ids, timestamps, inode numbers and absolute
paths, so two stores built through different histories can be compared for equality.
With an external vector store, its points (ids and payloads) are compared as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbsync import crashpoints
from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.model import RootIdentity
from kbsync.store import Meta
from kbsync.store.sqlite import SqliteStore
from kbsync.sync.listing import record_root, recorded_root

__all__ = [
    "LANCEDB",
    "RESULTS",
    "SCENARIOS",
    "Scenario",
    "Step",
    "clone",
    "crash_in_child",
    "dump",
    "killed",
    "make_kb",
    "own_root",
    "record_scenario",
    "recover",
    "save_result",
    "settle",
    "sink_points",
    "text_of",
]

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / ".data" / "reliability"
WORDS = ("harbour light keeper stairs wick night storm ship lamp rock tide rope gull fog "
         "bell chart oar sail mast deck pier crane cargo anchor reef buoy beacon lantern "
         "signal current").split()
CHUNKER = 'strategy = "tttd"\nbackup_bits = 3\nmax_tokens = 96\nmin_tokens = 24\nprimary_bits = 5'


def text_of(seed: int, words: int = 160) -> str:
    """A deterministic document of about ``words`` words in sentences and paragraphs."""
    rng = random.Random(seed)
    paragraphs = []
    while words > 0:
        sentences = []
        for _ in range(rng.randint(2, 5)):
            n = rng.randint(6, 14)
            words -= n
            sentences.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
        paragraphs.append(" ".join(sentences))
    return f"Document {seed}\n\n" + "\n\n".join(paragraphs) + "\n"


def settle(path: Path) -> None:
    """Give a file just written a modification time an hour before now.

    A stat as new as the sync that takes it is racy (``SourceStat.racy``): the next sync
    reads the file again and records the stat as trusted, a write whose timing depends
    on the machine's speed. The scenarios check that one more sync writes nothing but its
    run report, so they meet their files settled, as a sync usually does. A later write
    settles at a later time: the stat gate still sees every change.
    """
    when = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(when, when))


def make_kb(root: Path, documents: int, *, dimension: int = 64, words: int = 160,
            vectors: str | None = None) -> Path:
    """A knowledge base in ``root`` over ``root/docs`` with ``documents`` generated files.

    ``vectors`` is the body of a ``[vectors]`` table (an external vector store).
    """
    docs = root / "docs"
    docs.mkdir(parents=True)
    for i in range(documents):
        (docs / f"doc-{i:03d}.txt").write_text(text_of(i, words), encoding="utf-8")
        settle(docs / f"doc-{i:03d}.txt")
    init_config(root, ["docs"])
    config = root / "kbsync.toml"
    body = config.read_text(encoding="utf-8")
    start = body.index("strategy = ")
    end = body.index("\n\n", start)
    body = body[:start] + CHUNKER + body[end:]
    body = body.replace("dimension = 1024", f"dimension = {dimension}")
    if vectors is not None:
        body += "\n[vectors]\n" + vectors
    config.write_text(body, encoding="utf-8")
    return root


def _sync(root: Path) -> None:
    with KnowledgeBase.open(root) as kb:
        kb.sync(allow_mass_delete=True)


def _rechunk(root: Path) -> None:
    """A chunker setting changed: the same texts, other chunks."""
    config = root / "kbsync.toml"
    body = config.read_text(encoding="utf-8")
    config.write_text(body.replace("max_tokens = 96", "max_tokens = 112"), encoding="utf-8")


def _doc(root: Path, i: int) -> Path:
    return root / "docs" / f"doc-{i:03d}.txt"


@dataclass(frozen=True)
class Scenario:
    """Steps of (change the files, then one kbsync operation).

    Index ``documents`` documents; then edit, delete, add and rename some and
    sync; then change the chunker's ``max_tokens`` and sync (every document is
    re-chunked in place); then erase 1 (its file removed and the document erased,
    which also runs gc). Documents are taken in order: the edited ones first, then the
    deleted, the renamed and the erased one; added ones get new numbers.
    ``vectors`` configures an external vector store (a ``[vectors]`` table body).
    """

    documents: int = 30
    edits: int = 10
    deletes: int = 5
    adds: int = 5
    renames: int = 2
    vectors: str | None = None

    @property
    def isolated(self) -> bool:
        """Whether every use of the knowledge base must run in a forked child.

        A vector store's client may start threads (LanceDB's does when imported);
        a process that forks after starting them can give children stuck on a
        lock held by a thread that was not copied. So the process that forks
        never opens the vector store.
        """
        return self.vectors is not None

    @property
    def steps(self) -> tuple[tuple[str, Callable[[Path], None], Callable[[Path], None]], ...]:
        return (
            (f"index {self.documents}", self._index, _sync),
            (f"edit {self.edits}, delete {self.deletes}, add {self.adds}, "
             f"rename {self.renames}", self._churn, _sync),
            ("re-chunk", _rechunk, _sync),
            ("erase 1", self._forget, self._erase),
        )

    def prepare(self, root: Path) -> None:
        make_kb(root, self.documents, vectors=self.vectors)

    def _index(self, root: Path) -> None:
        """The documents are written by :meth:`prepare`, before any crash point."""

    def _churn(self, root: Path) -> None:
        edited = range(self.edits)
        deleted = range(self.edits, self.edits + self.deletes)
        renamed = range(deleted.stop, deleted.stop + self.renames)
        for i in edited:  # one sentence inserted mid-document
            path = _doc(root, i)
            body = path.read_text(encoding="utf-8")
            at = body.index(". ", len(body) // 2) + 1
            # Saved as editors do, into a new file renamed over the old one: a clone's
            # hard link keeps the old version.
            temp = path.with_name(path.name + ".new")
            temp.write_text(body[:at] + f" A new sentence about shift {i} at the pier."
                            + body[at:], encoding="utf-8")
            settle(temp)
            temp.replace(path)
        for i in deleted:
            _doc(root, i).unlink()
        for i in range(self.documents, self.documents + self.adds):
            _doc(root, i).write_text(text_of(i), encoding="utf-8")
            settle(_doc(root, i))
        for i in renamed:
            _doc(root, i).rename(root / "docs" / f"renamed-{i:03d}.txt")

    @property
    def _erased(self) -> int:
        return self.edits + self.deletes + self.renames

    def _forget(self, root: Path) -> None:
        _doc(root, self._erased).unlink()

    def _erase(self, root: Path) -> None:
        with KnowledgeBase.open(root) as kb:
            kb.erase(_doc(root, self._erased).name)


LANCEDB = 'kind = "lancedb"\npath = ".kbsync/lance"\n'
SCENARIOS = {
    # The store alone: index 30; edit 10, delete 5, add 5, rename 2; re-chunk; erase 1.
    "store": Scenario(),
    # With an external vector store, smaller: each crash point costs more.
    "lancedb": Scenario(documents=8, edits=3, deletes=1, adds=1, renames=1, vectors=LANCEDB),
}


@dataclass(frozen=True)
class Step:
    """One recorded step of the scenario: the state before it, what it does, what it leaves.

    ``sink`` is the vector store's points afterwards (``None`` without one);
    ``isolated`` says that the knowledge base is only used in forked children.
    """

    name: str
    before: Path
    operation: Callable[[Path], None]
    points: list[str]
    expected: dict[str, Any]
    sink: dict[str, Any] | None = None
    isolated: bool = False


def sink_points(kb: KnowledgeBase) -> dict[str, Any] | None:
    """The vector store's points, id -> payload (``None`` without a vector store)."""
    if kb.sink is None:
        return None
    return {p.id: None if p.payload is None else p.payload.as_dict() for p in kb.sink.scan()}


def _run(work: Callable[[], Any], isolated: bool, folder: Path) -> Any:
    """``work()``, in a forked child when ``isolated``; its JSON-encodable result.

    The result comes back through a file, so it reads the same either way.
    """
    if not isolated:
        return json.loads(json.dumps(work()))
    out = folder / "result.json"
    status = crash_in_child(lambda: out.write_text(json.dumps(work()), encoding="utf-8"))
    if status != 0:
        raise RuntimeError(f"a child running the knowledge base failed (wait status {status})")
    result = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    return result


def _record_step(root: Path, operation: Callable[[Path], None], record: Path) -> Any:
    crashpoints.arm(record=str(record))
    try:
        operation(root)
    finally:
        crashpoints.disarm()
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        return sink_points(kb)


def record_scenario(folder: Path, scenario: Scenario | None = None) -> list[Step]:
    """Run the scenario once, uncrashed, recording each step's crash points and result."""
    scenario = scenario or SCENARIOS["store"]
    ref = folder / "reference"
    scenario.prepare(ref)
    steps = []
    for i, (name, change, operation) in enumerate(scenario.steps):
        change(ref)
        before = folder / f"before-step-{i}"
        clone(ref, before)
        record = folder / f"points-{i}.txt"
        sink = _run(lambda op=operation, r=record: _record_step(ref, op, r),
                    scenario.isolated, folder)
        steps.append(Step(name, before, operation, record.read_text(encoding="utf-8").split(),
                          dump(ref / ".kbsync" / "kbsync.db"), sink, scenario.isolated))
    return steps


def _recovery(root: Path, step: Step, record: Path) -> dict[str, Any]:
    step.operation(root)  # a rerun of the sync or of the erase that was interrupted
    with KnowledgeBase.open(root) as kb:
        problems = list(kb.verify().problems)
        before = kb.store.total_changes
        crashpoints.arm(record=str(record))
        try:
            kb.sync(wait=False)  # wait=False: a lock left behind would fail here
        finally:
            crashpoints.disarm()
        return {"problems": problems, "writes": kb.store.total_changes - before,
                "sink": sink_points(kb)}


def recover(root: Path, step: Step) -> list[str]:
    """Redo an interrupted step, then check the store (and vector store); the problems found."""
    record = root.parent / f"{root.name}-last-sync.txt"
    record.unlink(missing_ok=True)
    found = _run(lambda: _recovery(root, step, record), step.isolated, root.parent)
    problems: list[str] = found["problems"]
    if found["writes"] != 1:  # its run report only
        problems.append(f"one more sync wrote {found['writes']} rows, not just its run report")
    # Every call to a vector store is preceded by a crash point named sink.*.
    names = record.read_text(encoding="utf-8").split() if record.exists() else []
    record.unlink(missing_ok=True)
    calls = [n for n in names if n.startswith("sink.")]
    if calls:
        problems.append(f"one more sync called the vector store: {', '.join(calls)}")
    if dump(root / ".kbsync" / "kbsync.db") != step.expected:
        problems.append("the logical dump differs from the uncrashed run's")
    if found["sink"] != step.sink:
        problems.append("the vector store's points differ from the uncrashed run's")
    return problems


def clone(src: Path, dst: Path) -> None:
    """A copy of a knowledge base whose source files are hard links: same inode, same mtime.

    So the copy's stat gate decides exactly as the original's did, and a run on the
    copy reaches the same crash points. (kbsync never writes its source files.) The
    folder above them cannot be linked: the copy's store records the copy's folder as
    the root its last listing found, as the original's records the original's.
    """
    def link_or_copy(a: str, b: str) -> None:
        if Path(a).is_relative_to(src / "docs"):
            os.link(a, b)
        else:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link_or_copy)
    store_path = dst / ".kbsync" / "kbsync.db"
    if store_path.exists():
        store = SqliteStore(store_path)
        try:
            own_root(store, dst)
        finally:
            store.close()


def own_root(store: Meta, root: Path) -> None:
    """Record ``root``'s folder of documents as the one its store's last listing found, if
    that store recorded one (a copy of a knowledge base took the original's)."""
    if recorded_root(store, "docs") is not None:
        st = (root / "docs").stat()
        record_root(store, "docs", RootIdentity(st.st_dev, st.st_ino))


def crash_in_child(work: Callable[[], None], *, crash_at: int = 0, record: str | None = None,
                   ) -> int:
    """Run ``work`` in a forked child with the crash points armed; its wait status.

    The child never returns into the test runner: it ends by SIGKILL at a crash
    point, or by ``os._exit`` (0 when ``work`` finished, 2 on an exception).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 2
        try:
            crashpoints.arm(crash_at=crash_at, record=record)
            work()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


def killed(status: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def dump(db_path: Path) -> dict[str, Any]:
    """The logical content of a store (see the module docstring)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        key_of = {r[0]: (r[1], r[2]) for r in db.execute("SELECT id, source, key FROM documents")}
        chunk_of = {r[0]: (*key_of[r[1]], r[2], r[3]) for r in db.execute(
            "SELECT id, doc_id, generation, idx FROM chunks")}
        return {
            "documents": sorted(db.execute(
                "SELECT source, key, media_type, size, bytes_hash, text_hash, derivation, title, "
                "metadata, status, generation, missing FROM documents")),
            "texts": sorted((*key_of[d], g, t) for d, g, t in db.execute(
                "SELECT doc_id, generation, text FROM versions")),
            "chunks": sorted((*key_of[d], *rest) for d, *rest in db.execute(
                'SELECT doc_id, generation, idx, digest, section, heading, start, "end", tokens, '
                "boundary FROM chunks")),
            "chunk_texts": sorted(db.execute("SELECT digest, text FROM chunk_texts")),
            "full_text": sorted((*chunk_of[r], t) for r, t in db.execute(
                "SELECT rowid, text FROM chunk_fts")),
            "vectors": sorted((d, e, n, hashlib.sha256(v).hexdigest()) for d, e, n, v in
                              db.execute("SELECT digest, embedder, dimension, vector "
                                         "FROM embeddings")),
            "boilerplate": sorted(db.execute("SELECT source, digest FROM boilerplate")),
            "digest_counts": sorted(db.execute(
                "SELECT source, grp, digest, documents FROM digest_counts")),
        }
    finally:
        db.close()


def save_result(name: str, result: dict[str, Any]) -> Path:
    """Write a measured figure where docs/reliability.md can quote it from."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return path
