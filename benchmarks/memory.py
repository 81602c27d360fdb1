
"""Memory benchmark: peak resident memory of a first sync of one big text file.

What is measured
    For each size in ``--mb`` (10, 50 and 200 by default), a folder holding one plain-text
    file of that many megabytes (prose-like text: words drawn with a fixed seed from the
    vocabulary of ``examples/corpus``, in sentences and paragraphs, so it is the same on
    every run) is synced into a fresh SQLite store with the offline hashing embedder and
    the default chunker, in a fresh Python process. The figure is that process's peak
    resident set size (``VmHWM`` of ``/proc/self/status``, else ``ru_maxrss``), printed
    beside the target: 200 MB plus four times the file. ``base MB`` is the same process's
    peak after importing kbsync and before syncing (interpreter, NumPy, SQLite). Then a
    sentence is inserted in the middle of the file and another fresh process syncs the
    edit into the same store (``edit MB``: re-chunking, comparing the two versions,
    replacing the stored text).

Run it from the repository root::

    python benchmarks/memory.py                 # 10, 50 and 200 MB
    python benchmarks/memory.py --mb 10 --mb 50 --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import vocabulary

ROOT = Path(__file__).resolve().parent.parent
SIZES = (10, 50, 200)
_MB = 1_000_000


def write_prose(path: Path, size: int, seed: int = 14) -> None:
    """Write about ``size`` bytes of sentences and paragraphs, a few hundred KB at a time."""
    words = vocabulary()
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as f:
        f.write("A long document\n\n")
        while written < size:
            paragraphs = []
            for _ in range(200):
                sentences = []
                for _ in range(rng.randint(3, 7)):
                    sentence = " ".join(rng.choices(words, k=rng.randint(6, 18)))
                    sentences.append(sentence[0].upper() + sentence[1:] + ".")
                paragraphs.append(" ".join(sentences))
            block = "\n\n".join(paragraphs) + "\n\n"
            f.write(block)
            written += len(block)


def peak_rss() -> int:
    """Peak resident set size of this process in bytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def child(folder: Path, store_path: Path) -> None:
    """Sync ``folder`` once into a fresh store; print the figures as one JSON line."""
    from kbsync.embed.hashing import HashingEmbedder
    from kbsync.engine import DEFAULT_CHUNKER
    from kbsync.extract.registry import extractor_for
    from kbsync.sources.files import FilesystemSource
    from kbsync.store.sqlite import SqliteStore
    from kbsync.sync import SyncOptions, sync_sources

    base = peak_rss()
    size = sum(p.stat().st_size for p in folder.iterdir())
    store = SqliteStore(store_path)
    start = time.perf_counter()
    try:
        result = sync_sources([FilesystemSource(folder, name="big", max_bytes=size + 1)], store,
                              HashingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                              options=SyncOptions(scratch_dir=store_path.parent))
    finally:
        store.close()
    seconds = time.perf_counter() - start
    source = result.sources[0]
    print(json.dumps({"size": size, "base": base, "peak": peak_rss(), "seconds": seconds,
                      "chunks": source.chunks.get("added", 0),
                      "embedded": source.embeddings_computed,
                      "failures": [list(f) for f in source.failures]}))


def _sync_child(folder: Path, store: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, __file__, "--child", str(folder), str(store)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the sync of {folder} failed:\n{done.stderr}")
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def measure(size_mb: int, work: Path) -> dict[str, object]:
    folder = work / f"docs-{size_mb}"
    folder.mkdir()
    path = folder / "big.txt"
    write_prose(path, size_mb * _MB)
    store = work / f"kb-{size_mb}.db"
    figures = _sync_child(folder, store)
    data = path.read_bytes()
    middle = data.index(b". ", len(data) // 2) + 2
    path.write_bytes(data[:middle] + b"One sentence inserted in the middle. " + data[middle:])
    del data
    figures["edit"] = _sync_child(folder, store)["peak"]
    path.unlink()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, action="append", help="file sizes in MB")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="kbsync-memory-") as tmp:
        for size_mb in args.mb or SIZES:
            f = measure(size_mb, Path(tmp))
            size, peak = int(str(f["size"])), int(str(f["peak"]))
            target = 200 * _MB + 4 * size
            edit = int(str(f["edit"]))
            rows.append((f"{size / _MB:.0f}", f"{int(str(f['base'])) / _MB:.0f}",
                         f"{peak / _MB:.0f}", f"{edit / _MB:.0f}", f"{target / _MB:.0f}",
                         "yes" if max(peak, edit) <= target else "NO", f"{f['chunks']:,}",
                         f"{float(str(f['seconds'])):.1f}"))
            if f["failures"]:
                print(f"failures at {size_mb} MB: {f['failures']}", file=sys.stderr)
    header = ("file MB", "base MB", "peak MB", "edit MB", "target MB", "within", "chunks",
              "sync s")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
        for row in rows:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
