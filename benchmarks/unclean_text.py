"""Unclean-text benchmark: normalizing and chunking text that is not NFC, beside clean text.

Real documentation, as is (NFC, the fast path), decomposed (NFD, as some editors and
file systems save accented text: the same words once composed), and decomposed with a
NUL in every hundredth word (which only cleaning word by word removes). Each variant is
normalized and chunked with the ``kbsync init`` chunker; the table prints the best of
three runs in MB/s of input and the slowdown against the clean text.

Run it from the repository root::

    python benchmarks/unclean_text.py
    python benchmarks/unclean_text.py --history django-docs-history.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kbsync.core.normalize import normalize
from kbsync.engine import DEFAULT_CHUNKER

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPORA = REPO_ROOT.parent / "shared" / "corpora"
console = Console()


def corpus_text(history: str) -> str:
    """The text files of the history's first snapshot joined (or the sample corpus)."""
    path = CORPORA / history
    if path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return "\n\n".join(json.loads(next(lines))["files"].values())
    console.print(f"note: {path.name} not found: examples/corpus instead")
    corpus = REPO_ROOT / "examples" / "corpus"
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(corpus.rglob("*"))
                       if p.is_file())


def with_nuls(text: str) -> str:
    """``text`` with a NUL inside every hundredth word."""
    words = text.split(" ")
    return " ".join(w[:1] + "\x00" + w[1:] if n % 100 == 0 and w.strip() else w
                    for n, w in enumerate(words))


def best_seconds(work: Callable[[], object], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", default="fastapi-docs-history.jsonl.gz")
    args = parser.parse_args()
    clean = unicodedata.normalize("NFC", corpus_text(args.history))
    decomposed = unicodedata.normalize("NFD", clean)
    variants = {"clean (NFC)": clean, "decomposed (NFD)": decomposed,
                "NFD and NULs": with_nuls(decomposed)}
    table = Table(title=f"Normalizing and chunking {len(clean):,} characters",
                  title_justify="left")
    for name in ("text", "characters", "normalize MB/s", "× clean", "chunk MB/s", "× clean"):
        table.add_column(name, justify="left" if name == "text" else "right")
    base: tuple[float, float] | None = None
    for name, text in variants.items():
        megabytes = len(text.encode("utf-8", "surrogatepass")) / 1e6
        normalizing = best_seconds(lambda t=text: normalize(t))
        chunking = best_seconds(lambda t=text: DEFAULT_CHUNKER.chunks(t))
        base = base or (normalizing, chunking)
        table.add_row(name, f"{len(text):,}", f"{megabytes / normalizing:,.1f}",
                      f"{normalizing / base[0]:.1f}", f"{megabytes / chunking:,.1f}",
                      f"{chunking / base[1]:.1f}")
    console.print(table)


if __name__ == "__main__":
    main()
