"""How long commands take to start: ``kbsync status`` and a no-op ``kbsync sync`` of a small
folder against a bare ``python -c pass``, best of a few runs each, as a ratio.

    python benchmarks/startup.py [--runs 5]

The goal is ``kbsync status`` cold within 10x a bare interpreter. What a command imports is
listed by ``python -X importtime -c "import kbsync.cli"``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "corpus"


def best_of(command: list[str], runs: int) -> float:
    """The shortest wall time of ``runs`` runs of ``command`` (output discarded)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    kbsync = [sys.executable, "-m", "kbsync"]
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        (home / "docs").mkdir()
        for path in sorted(CORPUS.glob("*.md"))[:20]:
            shutil.copy(path, home / "docs" / path.name)
        subprocess.run([*kbsync, "init", "docs", "--folder", str(home), "--embedder",
                        "hashing"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([*kbsync, "sync", "-q", "-c", str(home)], check=True)
        bare = best_of([sys.executable, "-c", "pass"], runs)
        rows = [("python -c pass", bare),
                ("python -c 'import kbsync.cli'", best_of(
                    [sys.executable, "-c", "import kbsync.cli"], runs)),
                ("kbsync --help", best_of([*kbsync, "--help"], runs)),
                ("kbsync status", best_of([*kbsync, "status", "-c", str(home)], runs)),
                ("kbsync sync (no-op)", best_of([*kbsync, "sync", "-q", "-c", str(home)], runs))]
    for name, seconds in rows:
        print(f"{name:32} {seconds:7.3f} s  {seconds / bare:6.1f}x")


if __name__ == "__main__":
    main()
