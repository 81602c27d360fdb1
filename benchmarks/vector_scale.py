"""Vector search at scale in the embedded store: the exact NumPy scan at 100,000 and
1,000,000 chunks, with and without a filter matching 1%, beside float16 storage, the
store's approximate index (FAISS IVF, ``kbsync.store.sqlite.ann``) and other ANN libraries,
each with an exact re-score of its candidates.

What is measured
    N 384-dimensional unit vectors (float32), k = 10, ``--queries`` queries of the same
    kind; p50 and p95 of one query in milliseconds, on this machine, in one process.
    ``--vectors clustered`` (the default) draws them as :func:`clustered` says (fitted to
    real chunk embeddings), ``random`` uniformly on the sphere, ``FILE.npy`` reads them
    (its first ``--queries`` rows are the queries):

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

    ``ivf + re-score``     the store's index (``AnnIndexes``: IVF over sqrt(N) lists,
                           8-bit vectors, 32 lists read) asked for 40 candidates that are
                           scored exactly; also with a filter matching half the rows (the
                           store scans a filter matching fewer than its threshold), and
                           the time to bring it in step after 1% of the vectors changed;
    ``--compare``          hnswlib, FAISS HNSW and IVF-Flat, usearch (all threads), each
                           re-scored the same way.

    Memory: bytes of the float32 matrix, the float16 matrix and each index.

    python benchmarks/vector_scale.py                       # 100,000 and 1,000,000
    python benchmarks/vector_scale.py --chunks 100000 --float16 --hnsw --compare

    Random unit vectors are the hardest case for any ANN index (every distance nearly
    alike): recall on them is a floor, not what real embeddings (clustered by topic) get.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

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


def clustered(rows: int, rng: np.random.Generator, *, shared: float = 0.8,
              spread: float = 0.8, noise: float = 1.3, per_topic: int = 2_000) -> Matrix:
    """Unit vectors with the neighbour structure of text embeddings: a direction every
    vector shares (one model, one language), topics (one per 2,000 chunks, at least 4),
    documents within a topic (about 20 chunks each), and each chunk near its document.

    The weights were fitted to 768 chunks drawn at random from the 6,317 chunks (of over
    80 characters, tttd) of the django and fastapi documentation snapshots in the shared
    corpora, embedded with the local model (all-MiniLM-L6-v2), 100 of them held out as
    queries. Real / these, at 768 vectors: mean cosine of two chunks 0.254 / 0.235 (standard
    deviation 0.141 / 0.130); of a query with its 1st nearest 0.612 / 0.617, its 10th
    0.499 / 0.566, its 100th 0.367 / 0.412."""
    topics = max(4, rows // per_topic)
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


def _vectors(kind: str, chunks: int, queries: int,
             rng: np.random.Generator) -> tuple[Matrix, Matrix]:
    if kind.endswith(".npy"):
        read = np.load(kind).astype(np.float32)
        read /= np.linalg.norm(read, axis=1, keepdims=True)
        return np.ascontiguousarray(read[queries:queries + chunks]), read[:queries]
    both = (clustered if kind == "clustered" else _unit)(chunks + queries, rng)
    return both[:chunks], both[chunks:]


def _recall(search: Callable[[Matrix], npt.NDArray[np.intp]], asked: Matrix,
            truth: list[set[int]]) -> float:
    return round(statistics.fmean(len(set(search(q).tolist()) & t) / K
                                  for q, t in zip(asked, truth, strict=True)), 3)


def _rescored(matrix: Matrix, found: npt.NDArray[np.intp], q: Matrix) -> npt.NDArray[np.intp]:
    found = found[found >= 0]
    return found[_best(matrix[found] @ q, K)]


def measure(chunks: int, queries: int, *, half_too: bool, hnsw_too: bool,
            vectors: str = "clustered", compare: bool = False,
            seed: int = 7) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    matrix, asked = _vectors(vectors, chunks, queries, rng)
    chunks = len(matrix)
    rows = np.sort(rng.choice(chunks, size=max(1, chunks // 100), replace=False))
    out: list[dict[str, object]] = []

    def row(name: str, timing: tuple[float, float], **more: object) -> None:
        out.append({"chunks": chunks, "search": name, "p50_ms": round(timing[0], 2),
                    "p95_ms": round(timing[1], 2), **more})
        print(json.dumps(out[-1]), flush=True)

    row("exact", _timed(lambda q: exact(matrix, q), asked), memory_mb=matrix.nbytes >> 20)
    row("exact, 1% filter", _timed(lambda q: filtered(matrix, rows, q), asked))
    if half_too:
        half = matrix.astype(np.float16)
        row("float16 exact", _timed(lambda q: half_exact(half, q), asked[:10]),
            memory_mb=half.nbytes >> 20)
        del half
    truth = [set(exact(matrix, q).tolist()) for q in asked]
    _store_index(matrix, asked, truth, rng, row)
    if compare:
        _compare(matrix, asked, truth, row)
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

    def hnsw(q: Matrix) -> npt.NDArray[np.intp]:
        return _rescored(matrix, index.search(q, 4 * K).keys.astype(np.intp), q)

    row("hnsw + re-score", _timed(hnsw, asked), memory_mb=index.memory_usage >> 20,
        build_s=round(built, 1), recall_10=_recall(hnsw, asked, truth))
    return out


def _store_index(matrix: Matrix, asked: Matrix, truth: list[set[int]],
                 rng: np.random.Generator, row: Callable[..., None]) -> None:
    """The rows of the store's own index (skipped without FAISS)."""
    try:
        import faiss

        from kbsync.store.sqlite.ann import AnnIndexes
    except ImportError:
        return
    chunks = len(matrix)
    ids = list(range(chunks))
    order = np.arange(chunks)
    indexes = AnnIndexes(1)
    start = time.perf_counter()
    indexes.candidates("e", matrix, ids, order, asked[0], 40, wait=True)
    built = time.perf_counter() - start
    index = indexes._built["e"].faiss_index
    memory = int(faiss.serialize_index(index).nbytes) >> 20

    def ivf(q: Matrix) -> npt.NDArray[np.intp]:
        found = indexes.candidates("e", matrix, ids, order, q, 40)
        assert found is not None
        return _rescored(matrix, found.astype(np.intp), q)

    row("ivf + re-score", _timed(ivf, asked), memory_mb=memory, build_s=round(built, 1),
        recall_10=_recall(ivf, asked, truth))
    half = np.flatnonzero(rng.random(chunks) < 0.5)
    half_ids = half.astype(np.int64)
    half_truth = [set(filtered(matrix, half, q).tolist()) for q in asked]

    def ivf_half(q: Matrix) -> npt.NDArray[np.intp]:
        found = indexes.candidates("e", matrix, ids, order, q, 40, half_ids)
        assert found is not None
        return _rescored(matrix, found.astype(np.intp), q)

    row("ivf + re-score, 50% filter", _timed(ivf_half, asked),
        recall_10=_recall(ivf_half, asked, half_truth))
    # 1% of the vectors changed (new ids): the store reads the matrix again, and the index
    # follows it on the next search
    changed = rng.choice(chunks, size=chunks // 100, replace=False)
    moved = matrix.copy()
    moved[changed] = clustered(len(changed), rng)
    new_ids = list(ids)
    for i in changed.tolist():
        new_ids[i] = chunks + i
    new_order = np.argsort(np.asarray(new_ids), kind="stable")
    start = time.perf_counter()
    indexes.candidates("e", moved, new_ids, new_order, asked[0], 40)
    row("ivf, in step after 1% changed", (0.0, 0.0),
        update_s=round(time.perf_counter() - start, 2))


def _compare(matrix: Matrix, asked: Matrix, truth: list[set[int]],
             row: Callable[..., None]) -> None:
    """Other ANN libraries, each with the same exact re-score of 40 candidates."""
    chunks = len(matrix)
    fetch = 4 * K
    built: dict[str, tuple[Any, float, int]] = {}
    try:
        import faiss
    except ImportError:
        faiss = None
    if faiss is not None:
        lists = round(np.sqrt(chunks))
        start = time.perf_counter()
        flat = faiss.index_factory(DIMENSION, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
        flat.train(matrix[np.sort(np.random.default_rng(0).choice(
            chunks, size=min(chunks, 64 * lists), replace=False))])
        flat.add(matrix)
        flat.nprobe = 32
        built["faiss IVF-Flat, 32 lists"] = (
            lambda q: flat.search(q[None], fetch)[1][0], time.perf_counter() - start,
            int(faiss.serialize_index(flat).nbytes))
        start = time.perf_counter()
        graph = faiss.IndexHNSWFlat(DIMENSION, 16, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = 64
        graph.add(matrix)
        graph.hnsw.efSearch = 64
        built["faiss HNSW M16 ef64"] = (
            lambda q: graph.search(q[None], fetch)[1][0], time.perf_counter() - start,
            int(faiss.serialize_index(graph).nbytes))
    try:
        import hnswlib
    except ImportError:
        hnswlib = None
    if hnswlib is not None:
        start = time.perf_counter()
        small = hnswlib.Index(space="ip", dim=DIMENSION)
        small.init_index(max_elements=chunks, ef_construction=64, M=16)
        small.add_items(matrix, np.arange(chunks))
        small.set_ef(64)
        built["hnswlib M16 ef64"] = (
            lambda q: small.knn_query(q, fetch)[0][0], time.perf_counter() - start,
            chunks * (DIMENSION * 4 + 16 * 2 * 4 * 2))
    try:
        from usearch import index as usearch_module
    except ImportError:
        usearch_module = None
    if usearch_module is not None:
        start = time.perf_counter()
        usearch = usearch_module.Index(ndim=DIMENSION, metric="ip", dtype="f16", connectivity=16,
                        expansion_add=64, expansion_search=64)
        usearch.add(np.arange(chunks), matrix, log=False, threads=0)
        built["usearch f16 M16 ef64"] = (
            lambda q: usearch.search(q, fetch).keys, time.perf_counter() - start,
            int(usearch.memory_usage))
    for name, (ask, seconds, memory) in built.items():
        def search(q: Matrix, ask: Callable[[Matrix], Any] = ask) -> npt.NDArray[np.intp]:
            return _rescored(matrix, np.asarray(ask(q)).astype(np.intp), q)

        row(name + " + re-score", _timed(search, asked), memory_mb=memory >> 20,
            build_s=round(seconds, 1), recall_10=_recall(search, asked, truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, action="append")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--float16", action="store_true", help="the float16 row (10 queries)")
    parser.add_argument("--hnsw", action="store_true",
                        help="the HNSW row (its build takes minutes per 100,000 vectors)")
    parser.add_argument("--vectors", default="clustered",
                        help="clustered (the default), random, or a .npy file of vectors")
    parser.add_argument("--compare", action="store_true",
                        help="hnswlib, FAISS HNSW and IVF-Flat, usearch (minutes each)")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for chunks in args.chunks or [100_000, 1_000_000]:
        rows += measure(chunks, args.queries, half_too=args.float16, hnsw_too=args.hnsw,
                        vectors=args.vectors, compare=args.compare)
    print(f"{'chunks':>10}  {'search':<30} {'p50 ms':>8} {'p95 ms':>8}  more")
    for r in rows:
        more = ", ".join(f"{k} {v}" for k, v in r.items()
                         if k not in ("chunks", "search", "p50_ms", "p95_ms"))
        print(f"{r['chunks']:>10,}  {r['search']:<30} {r['p50_ms']:>8} {r['p95_ms']:>8}  {more}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
