"""Filtered search latency: p50/p95 with a metadata filter matching 1% of 100,000 chunks,
against the same searches unfiltered.

A fresh SQLite store is filled with 100,000 chunks (2,000 documents of 50 chunks,
English-like text from the sample corpus, 384-dimensional unit vectors, as in
``benchmarks/search.py``); each document's metadata names one of 100 teams, so
``team=t07`` matches 20 documents, 1,000 chunks (1%). Then ``--queries`` queries
of each mode run unfiltered and filtered through ``KnowledgeBase.search``; the
first query of each row is reported apart, as a cold start. A last check compares
every filtered vector search with an exhaustive ranking of the matching chunks
(the filter must lose nothing).

    python benchmarks/filters.py [--chunks 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search
from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store.filters import Filters, filters_from
from search import DIMENSION, EXAMPLES, RandomEmbedder

TEAMS = 100
FILTER = {"team": "t07"}


def fill(engine: KnowledgeBase, chunks: int, per_doc: int = 50) -> None:
    """``chunks`` chunks in documents of ``per_doc``, document ``d`` of team ``d % TEAMS``."""
    search.fill(engine, chunks, per_doc,
                metadata=lambda d: json.dumps({"team": f"t{d % TEAMS:02d}", "lang": "en"}))


def _exhaustive(engine: KnowledgeBase, query: str, k: int) -> list[tuple[str, int]]:
    """The best ``k`` chunks of the filter's documents by a brute-force scan of their vectors."""
    refs = list(engine.store.indexed_chunks(filters=engine_filters()))
    vectors = engine.store.vectors(engine.embedder.identity, [r.digest for r in refs])
    q = engine.query_vector(query)
    scored = sorted((-float(vectors[r.digest] @ q), r.key, r.index) for r in refs)
    return [(key, index) for _, key, index in scored[:k]]


def engine_filters() -> Filters:
    return filters_from(FILTER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    words = " ".join(p.read_text() for p in EXAMPLES.glob("*.txt")).split()
    rng = random.Random(1)
    queries = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
               for _ in range(args.queries)]
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        init_config(tmp, [])
        with KnowledgeBase.open(Path(tmp)) as engine:
            engine.embedder = RandomEmbedder()
            started = time.perf_counter()
            fill(engine, args.chunks)
            matching = sum(1 for _ in engine.store.indexed_chunks(filters=engine_filters()))
            console.print(f"filled {args.chunks:,} chunks in {time.perf_counter() - started:.1f} s;"
                          f" the filter {FILTER} matches {matching:,} "
                          f"({100 * matching / args.chunks:.1f}%)")
            table = Table(title=f"Search latency over {args.chunks:,} chunks of {DIMENSION} "
                                "dimensions, k = 10 (ms)")
            for name in ("mode", "filter", "cold first query", "p50", "p95", "max"):
                table.add_column(name, justify="left" if name in ("mode", "filter") else "right")
            for mode in ("vector", "text", "hybrid"):
                for label, filters in (("none", None), ("team=t07 (1%)", FILTER)):
                    timings = []
                    for q in queries:
                        t = time.perf_counter()
                        engine.search(q, k=10, mode=mode, filters=filters)
                        timings.append((time.perf_counter() - t) * 1000)
                    cold, warm = timings[0], np.array(timings[1:])
                    table.add_row(mode, label, f"{cold:.1f}", f"{np.percentile(warm, 50):.1f}",
                                  f"{np.percentile(warm, 95):.1f}", f"{warm.max():.1f}")
            console.print(table)
            checked = queries[:50]
            same = sum(1 for q in checked if _exhaustive(engine, q, 10) == [
                (h.key, h.index) for h in engine.search(q, k=10, mode="vector",
                                                        context_tokens=0, filters=FILTER)])
            console.print(f"filtered vector search == exhaustive scan of the matching chunks: "
                          f"{same} of {len(checked)} queries")


if __name__ == "__main__":
    main()
