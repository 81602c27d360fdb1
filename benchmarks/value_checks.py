"""What checking a store costs beside a sync: SQLite's quick_check and verify, on a store of
10,000 generated documents, against the no-op sync and the 1 % edit sync they would delay.

The corpus is ``benchmarks/sync.py``'s (about 5 KB of Markdown a file, cached under
``benchmarks/.data/``), synced once with the configuration ``kbsync init`` writes (SQLite,
the offline hashing embedder). Then, each ``--runs`` times (the median is printed):

- ``PRAGMA quick_check`` on the store file;
- a no-op sync, and a sync after a 1 % edit (the edit is undone for the next run);
- a full revalidation, ``sync --verify`` (every file read; quick_check runs first);
- ``kbsync verify`` (SQLite's checks of the file, every invariant, and every stored value:
  chunk texts against their digests and keys, kept texts against their checksums,
  vectors finite and of the embedder's norm), and the checks of the stored values alone.

    python benchmarks/value_checks.py [--files 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.embed import norm_of
from kbsync.engine import init_config
from sync import DATA_DIR, apply_edits, build_corpus, plan_edits


def _seconds(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _quick_check(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        db.close()


def _verified(kb: KnowledgeBase) -> None:
    problems = kb.verify().problems
    assert not problems, problems[:3]


def _values(kb: KnowledgeBase) -> None:
    """verify's checks of the stored values alone: what a repair runs to find what to
    discard (on a sound store, nothing)."""
    found = kb.store.discard_damaged(kb.embedder.identity,
                                     kb.config.chunker.text_chunker().identity, None,
                                     norm_of(kb.embedder))
    assert not found, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    corpus, documents = build_corpus(args.files)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DATA_DIR) as folder:
        root = Path(folder)
        shutil.copytree(corpus / "docs", root / "docs")
        init_config(root, ["docs"], embedder={"kind": "hashing", "dimension": 256})
        with KnowledgeBase.open(root) as kb:
            first = _seconds(lambda: kb.sync(yes=True))
            path = Path(kb.config.store_location)
            status = kb.status()
            size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
            print(f"{args.files:,} files: {status.documents:,} documents, {status.chunks:,} "
                  f"chunks, {size / 1e6:.0f} MB store; first sync {first:.1f} s")
            edits = plan_edits(documents, 1.0)
            originals = {key: documents[key] for key in edits}
            times: dict[str, list[float]] = {"quick_check": [], "no-op sync": [],
                                             "1 % edit sync": [], "full sync (--verify)": [],
                                             "verify": [], "value checks": []}
            for _ in range(args.runs):
                times["quick_check"].append(_seconds(lambda: _quick_check(path)))
                times["no-op sync"].append(_seconds(kb.sync))
                apply_edits(root, edits)
                times["1 % edit sync"].append(_seconds(kb.sync))
                apply_edits(root, originals)
                kb.sync()
                times["full sync (--verify)"].append(_seconds(lambda: kb.sync(verify=True)))
                times["verify"].append(_seconds(lambda: _verified(kb)))
                times["value checks"].append(_seconds(lambda: _values(kb)))
        for name, values in times.items():
            print(f"{name:21} median {statistics.median(values):6.2f} s  "
                  f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
