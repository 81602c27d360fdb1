"""Replay a real documentation history as git commits and sync a git source after each one.

The history (``<repo>/../shared/corpora/fastapi-docs-2023-history.jsonl.gz`` by default: a
docs folder's snapshot, then one line per upstream commit with its changes) is turned into
commits of a fresh repository made with the ``git`` executable: the snapshot (or the state
after ``--start`` commits) is the first commit, then each later commit of the history is one
commit here, with its date and subject. A knowledge base (SQLite store, offline hashing
embedder) with one ``kind = "git"`` source at the repository's ``main`` syncs after each one.

Check after every sync: the report's actions equal what ``git diff --name-status -M``
says between the two commits, read the way kbsync reports it:

    A path → ``new``; D path → ``deleted``; M path → ``modified`` (``unchanged`` or
    ``metadata-only`` when its extracted text normalizes to the same text: not expected in
    these histories, and counted as a mismatch if it happens); R old new → ``moved``, with
    edits (R<100) or without (R100): the git source names each file's old path, so a
    rename with edits keeps its record and the vectors of the chunks it kept.

Printed: one row per commit that changed something (git's counts, kbsync's, whether they
match, bytes read and the sync's seconds), then totals. Exit status 1 on any mismatch.

    python benchmarks/git_replay.py                    # commits 1..65 (renames at 60)
    python benchmarks/git_replay.py --start 50 --stop 62
    python benchmarks/git_replay.py --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbsync import KnowledgeBase
from kbsync.sources.git import GitSettings, GitSource

__all__ = ["CORPORA", "Step", "expected_actions", "main", "replay_git"]

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
HISTORY = "fastapi-docs-2023-history.jsonl.gz"

_ENV = {"GIT_AUTHOR_NAME": "replay", "GIT_AUTHOR_EMAIL": "replay@example.org",
        "GIT_COMMITTER_NAME": "replay", "GIT_COMMITTER_EMAIL": "replay@example.org",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


@dataclass
class Step:
    """One synced commit: what git says changed, what the sync reported, and its cost."""

    index: int
    commit: str
    git: dict[str, int]
    kbsync: dict[str, int]
    renames: int
    exact_renames: int
    matched: bool
    bytes_read: int
    seconds: float
    mismatches: list[str] = field(default_factory=list)


def _history(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **_ENV}
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True)
    return done.stdout.decode("utf-8", "surrogateescape")


def _write(repo: Path, path: str, content: str | None) -> None:
    target = repo / path
    if content is None:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content.encode("utf-8"))


def _commit(repo: Path, subject: str, date: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", subject or "change",
         date=date)
    return _git(repo, "rev-parse", "HEAD").strip()


def expected_actions(repo: Path, old: str, new: str) -> tuple[set[tuple[str, ...]], int, int]:
    """kbsync's actions as git's ``--name-status -M`` names them; git's renames, exact ones."""
    fields = _git(repo, "diff", "--name-status", "-M", "-z", old, new).split("\0")
    out: set[tuple[str, ...]] = set()
    renames = exact = 0
    words = {"A": "new", "D": "deleted", "M": "modified", "T": "modified"}
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status[0] in "RC":
            before, after = fields[i + 1], fields[i + 2]
            renames += 1
            exact += status == "R100"
            out.add(("moved", after, before))
            i += 3
        else:
            out.add((words[status[0]], fields[i + 1]))
            i += 2
    return out, renames, exact


def _reported(report: dict[str, Any]) -> set[tuple[str, ...]]:
    return {(c["action"], c["key"], c["from"]) if c["action"] == "moved"
            else (c["action"], c["key"]) for c in report["changes"]}


def _tally(actions: set[tuple[str, ...]]) -> dict[str, int]:
    return dict(sorted(Counter(a[0] for a in actions).items()))


def replay_git(history: Path, workdir: Path, start: int = 0, stop: int = 65) -> list[Step]:
    """Commit the history's state after ``start`` commits, sync, then commit and sync each of
    commits ``start + 1 .. stop``; one :class:`Step` per sync after the first."""
    repo = workdir / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "-b", "main")
    kb_dir = workdir / "kb"
    KnowledgeBase.create(kb_dir, embedder={"kind": "hashing"}).close()
    events = _history(history)
    snapshot = next(events)
    files: dict[str, str] = dict(snapshot["files"])
    date = snapshot["date"]
    subject = "snapshot"
    steps: list[Step] = []
    with KnowledgeBase.open(kb_dir) as kb:
        source = GitSource(GitSettings(str(repo), ref="main"), name="docs",
                           state_dir=kb_dir / ".kbsync")
        kb.sources = [source]
        for _ in range(start):
            event = next(events, None)
            if event is None:
                break
            for change in event["changes"]:
                if change["op"] in ("rename", "delete"):
                    files.pop(change.get("old_path") or change["path"], None)
                if change["op"] != "delete":
                    files[change["path"]] = change["content"]
            date, subject = event["date"], event["subject"]
        for path, text in files.items():
            _write(repo, path, text)
        previous = _commit(repo, subject, date)
        kb.sync(accept_replacements=True)
        for index, event in enumerate(events, start + 1):
            if index > stop:
                break
            for change in event["changes"]:
                if change["op"] in ("rename", "delete"):
                    _write(repo, change.get("old_path") or change["path"], None)
                if change["op"] != "delete":
                    _write(repo, change["path"], change["content"])
            commit = _commit(repo, event["subject"], event["date"])
            began = time.perf_counter()
            report = kb.sync(accept_replacements=True).sources[0].to_dict()
            seconds = time.perf_counter() - began
            expected, renames, exact = expected_actions(repo, previous, commit)
            got = _reported(report)
            problems = [f"expected {a}" for a in sorted(expected - got)]
            problems += [f"reported {a}" for a in sorted(got - expected)]
            problems += [f"failure {f['message']}" for f in report["failures"]]
            steps.append(Step(index, commit, _tally(expected), _tally(got), renames, exact,
                              not problems, report["bytes_read"], seconds, problems))
            previous = commit
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", type=Path, default=CORPORA / HISTORY)
    ap.add_argument("--start", type=int, default=0, help="commits before the first sync")
    ap.add_argument("--stop", type=int, default=65, help="the last commit synced")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.history.is_file():
        print(f"{args.history.name} not found under <repo>/../shared/corpora", file=sys.stderr)
        return 2
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbsync-git-replay-") as tmp:
        steps = replay_git(args.history, Path(tmp), args.start, args.stop)
    total = time.perf_counter() - began
    if args.json:
        print(json.dumps([asdict(s) for s in steps], indent=1))
    else:
        print(f"{'commit':>6}  {'git (name-status -M)':<36} {'kbsync report':<36} "
              f"{'ok':<3} {'bytes read':>10} {'sync s':>7}")
        for s in steps:
            if s.git or s.kbsync:
                g = ", ".join(f"{k} {v}" for k, v in s.git.items())
                k = ", ".join(f"{k} {v}" for k, v in s.kbsync.items())
                print(f"{s.index:>6}  {g:<36} {k:<36} {'yes' if s.matched else 'NO':<3} "
                      f"{s.bytes_read:>10,} {s.seconds:>7.3f}")
                for p in s.mismatches:
                    print(f"        {p}")
        syncs = [s.seconds for s in steps]
        print(f"{len(steps)} syncs after the first; {sum(s.matched for s in steps)} match git; "
              f"git renames {sum(s.renames for s in steps)} "
              f"({sum(s.exact_renames for s in steps)} exact), reported moves "
              f"{sum(s.kbsync.get('moved', 0) for s in steps)}; "
              f"bytes read {sum(s.bytes_read for s in steps):,}; "
              f"sync median {sorted(syncs)[len(syncs) // 2]:.3f} s, "
              f"max {max(syncs):.3f} s; total {total:.1f} s" if syncs else "no syncs")
    return 0 if all(s.matched for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
