"""Search latency: p50/p95 of vector, text and hybrid queries over 100,000 stored chunks.

A fresh SQLite store is filled with 100,000 chunks (2,000 documents of 50 chunks,
English-like text from the sample corpus) and 384-dimensional unit vectors,
then 200 queries of each mode run through the engine's search path (the first
query of a mode loads the vectors and is reported apart, as a cold start).

    python benchmarks/search.py [--chunks 100000] [--queries 200]

Target: p50 <= 50 ms for vector and hybrid search.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.core.identity import digest, embedding_text_key
from kbsync.core.plan import Action, ChunkDraft, ChunkOps, DocumentPlan, DocumentVersion
from kbsync.embed import Vectors
from kbsync.engine import init_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "corpus"
DIMENSION = 384


class RandomEmbedder:
    """Unit vectors seeded by the text: the cost of search, not of a model."""

    identity = "bench:random:384"
    dimension = DIMENSION
    max_input_tokens = None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(DIMENSION)
                for t in texts]
        out = np.asarray(rows, dtype=np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def fill(engine: KnowledgeBase, chunks: int, per_doc: int = 50,
         metadata: Callable[[int], str] = lambda d: "{}") -> None:
    """``chunks`` chunks in documents of ``per_doc``; ``metadata(d)`` is document ``d``'s."""
    words = " ".join(p.read_text() for p in EXAMPLES.glob("*.txt")).split()
    rng = random.Random(0)
    embedder = engine.embedder
    for d in range(chunks // per_doc):
        drafts = []
        for i in range(per_doc):
            text = " ".join(rng.choice(words) for _ in range(60))
            drafts.append(ChunkDraft(digest("bench", d, i, text), text, 0, f"Section {i // 10}",
                                     i * 400, i * 400 + len(text), 80, "primary",
                                     embedding_text_key(text)))
        version = DocumentVersion(f"doc-{d}.md", f"doc-{d}.md", "text/markdown", None, "b", "t",
                                  "d", f"Document {d}", metadata(d),
                                  " ".join(c.text for c in drafts), tuple(drafts))
        vectors = dict(zip([c.digest for c in drafts],
                           embedder.embed([c.text for c in drafts]), strict=True))
        plan = DocumentPlan(version.key, Action.NEW, version=version,
                            ops=ChunkOps(added=per_doc,
                                         added_digests=tuple(c.digest for c in drafts)))
        engine.store.apply("bench", plan, vectors, embedder.identity, "now")


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
            engine.embedder = RandomEmbedder()  # type: ignore[assignment]
            started = time.perf_counter()
            fill(engine, args.chunks)
            console.print(f"filled {args.chunks:,} chunks in {time.perf_counter() - started:.1f} s")
            table = Table(title=f"Search latency over {args.chunks:,} chunks of {DIMENSION} "
                                "dimensions (ms)")
            for name in ("mode", "cold first query", "p50", "p95", "max"):
                table.add_column(name, justify="left" if name == "mode" else "right")
            results = {}
            for mode in ("vector", "text", "hybrid"):
                timings = []
                for q in queries:
                    t = time.perf_counter()
                    engine.search(q, k=10, mode=mode)  # type: ignore[arg-type]
                    timings.append((time.perf_counter() - t) * 1000)
                cold, warm = timings[0], np.array(timings[1:])
                p50, p95 = np.percentile(warm, 50), np.percentile(warm, 95)
                results[mode] = p50
                table.add_row(mode, f"{cold:.1f}", f"{p50:.1f}", f"{p95:.1f}", f"{warm.max():.1f}")
            console.print(table)
            for mode in ("vector", "hybrid"):
                verdict = "PASS" if results[mode] <= 50 else "MISS"
                console.print(f"{mode} p50 {results[mode]:.1f} ms (target <= 50 ms): {verdict}")


if __name__ == "__main__":
    main()
