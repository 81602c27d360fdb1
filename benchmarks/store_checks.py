"""How long verify's checks of the store file take: SQLite's quick_check and
integrity_check, and FTS5's integrity check, on a store of about 100 MB.

A real store is made by syncing 300 generated documents, then grown with
cached vectors (384 dimensions) and chunk texts to the size asked for, the
bulk of a large store. Each check runs twice (cold, then warm page cache).

    python benchmarks/store_checks.py [--megabytes 100]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np

from kbsync.app.knowledge_base import KnowledgeBase

WORDS = "harbour light keeper stairs wick night storm ship lamp rock tide rope gull fog".split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=100.0)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "docs").mkdir()
        for i in range(300):
            text = ". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(20))
            (root / "docs" / f"doc-{i:03d}.txt").write_text(text, encoding="utf-8")
        with KnowledgeBase.create(root, ["docs"]) as kb:
            kb.sync(yes=True)
        path = root / ".kbsync" / "kbsync.db"
        db = sqlite3.connect(path, isolation_level=None)
        vectors = np.random.default_rng(0)
        batch = 0
        while path.stat().st_size < args.megabytes * 1e6:
            digests = [hashlib.blake2b(f"{batch}-{i}".encode()).hexdigest() for i in range(5000)]
            db.execute("BEGIN")
            db.executemany("INSERT INTO embeddings VALUES (?, 'padding', 384, ?)",
                           ((d, vectors.random(384, dtype=np.float32).tobytes())
                            for d in digests))
            db.executemany("INSERT INTO chunk_texts VALUES (?, ?)",
                           ((d, " ".join(rng.choice(WORDS) for _ in range(40)))
                            for d in digests))
            db.execute("COMMIT")
            batch += 1
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        print(f"store: {path.stat().st_size / 1e6:.1f} MB")
        for name, sql in (("quick_check", "PRAGMA quick_check"),
                          ("integrity_check", "PRAGMA integrity_check"),
                          ("fts5 integrity-check",
                           "INSERT INTO chunk_fts (chunk_fts) VALUES ('integrity-check')")):
            times = []
            for _ in range(2):
                started = time.perf_counter()
                db.execute(sql).fetchall()
                times.append(time.perf_counter() - started)
            print(f"{name:22} first {times[0]:.2f} s, again {times[1]:.2f} s")
        db.close()


if __name__ == "__main__":
    main()
