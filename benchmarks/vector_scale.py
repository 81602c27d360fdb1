"""Vector search at scale in the embedded store: the exact NumPy scan at 100,000 and
1,000,000 chunks, with and without a filter matching 1%, beside float16 storage and an
HNSW index (usearch) with an exact re-score of its candidates.

What is measured
    N random 384-dimensional unit vectors (float32), k = 10, ``--queries`` random unit
    queries; p50 and p95 of one query in milliseconds, on this machine, in one process:

    ``exact``              what the SQLite store's vector search computes over its cached
                           matrix (``SearchTables.search_vector``): ``matrix @ query``, then
                           the best k by ``argpartition`` and a sort of those k;
    ``exact, 1% filter``   the same over the rows of the matching 1% (chosen at random,
                           gathered from the matrix as ``_filtered_rows`` selects them);
    ``float16 exact``      the matrix stored in float16 (half the memory), scanned in
                           blocks of 65,536 rows converted to float32;
    ``hnsw + re-score``    usearch's HNSW index (``connectivity`` 16, ``expansion_search``
                           64, its vectors in float16) asked for 4k candidates, which are
                           scored exactly against the float32 rows and the best k kept;
                           its recall@10 against ``exact`` and its build time are shown.

    Memory: bytes of the float32 matrix, the float16 matrix and the HNSW index.

    python benchmarks/vector_scale.py                       # 100,000 and 1,000,000
    python benchmarks/vector_scale.py --chunks 100000 --float16 --hnsw

    Random unit vectors are the hardest case for HNSW (every distance nearly alike): its
    recall here is a floor, not what real embeddings (clustered by topic) get.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

DIMENSION = 384
K = 10
BLOCK = 65_536

Matrix = npt.NDArray[np.float32]


def _unit(rows: int, rng: np.random.Generator) -> Matrix:
    out = np.empty((rows, DIMENSION), dtype=np.float32)
    for start in range(0, rows, BLOCK):
        block = rng.standard_normal((min(BLOCK, rows - start), DIMENSION), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


def clustered(rows: int, rng: np.random.Generator, *, spread: float = 0.55,
              noise: float = 0.95, shared: float = 0.45) -> Matrix:
    """Unit vectors with the neighbour structure of text embeddings: a direction every
    vector shares (one model, one language), topics, documents within a topic (about 20
    chunks each), and each chunk near its document.

    The weights were fitted to 6,317 chunks of the django and fastapi documentation embedded
    with the local model (all-MiniLM-L6-v2): mean cosine of two random chunks, and of a
    held-out chunk with its 1st, 10th and 100th nearest (see the README's table)."""
    topics = max(1, rows // 2_000)
    documents = max(1, rows // 20)
    common = _unit(1, rng)[0]
    topic_at = _unit(topics, rng)
    document_topic = rng.integers(0, topics, documents)
    centres = rng.standard_normal((documents, DIMENSION), dtype=np.float32) / np.sqrt(DIMENSION)
    out = np.empty((rows, DIMENSION), dtype=np.float32)
    for start in range(0, rows, BLOCK):
        size = min(BLOCK, rows - start)
        document = rng.integers(0, documents, size)
        block = (shared * common + topic_at[document_topic[document]]
                 + spread * centres[document]
                 + noise * rng.standard_normal((size, DIMENSION), dtype=np.float32)
                 / np.sqrt(DIMENSION))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + size] = block
    return out


def _best(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    if k < len(scores):
        best = np.argpartition(-scores, k)[:k]
        return best[np.argsort(-scores[best], kind="stable")]
    return np.argsort(-scores, kind="stable")


def exact(matrix: Matrix, query: Matrix) -> npt.NDArray[np.intp]:
    return _best(matrix @ query, K)


def filtered(matrix: Matrix, rows: npt.NDArray[np.intp], query: Matrix) -> npt.NDArray[np.intp]:
    chosen = matrix[rows]
    return rows[_best(chosen @ query, K)]


def half_exact(half: npt.NDArray[np.float16], query: Matrix) -> npt.NDArray[np.intp]:
    scores = np.empty(len(half), dtype=np.float32)
    for start in range(0, len(half), BLOCK):
        scores[start : start + BLOCK] = half[start : start + BLOCK].astype(np.float32) @ query
    return _best(scores, K)


def _timed(run: Callable[[Matrix], object], queries: Matrix) -> tuple[float, float]:
    times = []
    for q in queries:
        start = time.perf_counter()
        run(q)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def measure(chunks: int, queries: int, *, half_too: bool, hnsw_too: bool,
            seed: int = 7) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    matrix = _unit(chunks, rng)
    asked = _unit(queries, rng)
    rows = np.sort(rng.choice(chunks, size=max(1, chunks // 100), replace=False))
    out: list[dict[str, object]] = []

    def row(name: str, timing: tuple[float, float], **more: object) -> None:
        out.append({"chunks": chunks, "search": name, "p50_ms": round(timing[0], 2),
                    "p95_ms": round(timing[1], 2), **more})

    row("exact", _timed(lambda q: exact(matrix, q), asked), memory_mb=matrix.nbytes >> 20)
    row("exact, 1% filter", _timed(lambda q: filtered(matrix, rows, q), asked))
    if half_too:
        half = matrix.astype(np.float16)
        row("float16 exact", _timed(lambda q: half_exact(half, q), asked[:10]),
            memory_mb=half.nbytes >> 20)
        del half
    if not hnsw_too:
        return out
    try:
        from usearch.index import Index
    except ImportError:
        return out
    index = Index(ndim=DIMENSION, metric="ip", dtype="f16", connectivity=16,
                  expansion_add=128, expansion_search=64)
    start = time.perf_counter()
    index.add(np.arange(chunks), matrix, log=False)
    built = time.perf_counter() - start
    truth = [set(exact(matrix, q).tolist()) for q in asked]

    def hnsw(q: Matrix) -> npt.NDArray[np.intp]:
        found = index.search(q, 4 * K).keys.astype(np.intp)
        return found[_best(matrix[found] @ q, K)]

    recall = statistics.fmean(len(set(hnsw(q).tolist()) & t) / K
                              for q, t in zip(asked, truth, strict=True))
    row("hnsw + re-score", _timed(hnsw, asked), memory_mb=index.memory_usage >> 20,
        build_s=round(built, 1), recall_10=round(recall, 3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, action="append")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--float16", action="store_true", help="the float16 row (10 queries)")
    parser.add_argument("--hnsw", action="store_true",
                        help="the HNSW row (its build takes minutes per 100,000 vectors)")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for chunks in args.chunks or [100_000, 1_000_000]:
        rows += measure(chunks, args.queries, half_too=args.float16, hnsw_too=args.hnsw)
    print(f"{'chunks':>10}  {'search':<18} {'p50 ms':>8} {'p95 ms':>8}  more")
    for r in rows:
        more = ", ".join(f"{k} {v}" for k, v in r.items()
                         if k not in ("chunks", "search", "p50_ms", "p95_ms"))
        print(f"{r['chunks']:>10,}  {r['search']:<18} {r['p50_ms']:>8} {r['p95_ms']:>8}  {more}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
