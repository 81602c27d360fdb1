"""Embedding backends benchmark: the local model on torch against its onnx-int8 export.

What is measured
    Speed: the chunks of ``benchmarks/embed.py`` (FastAPI's docs cut with kbsync's default
    chunker, the first ``--chunks``) embedded as a sync embeds them (ordered by token count,
    batches of 64 handed to ``LocalEmbedder.embed``, ``batch_size`` 16), once per backend
    after a warm-up batch (which, for onnx-int8, exports the model unless it is cached: that
    time is printed apart). chunks/s and model tokens/s; agreement of the two backends'
    vectors of those chunks: mean and minimum cosine.

    Retrieval: the 50 long documents of ``<repo>/../shared/corpora/qa-squad11-train.json.gz``
    cut with kbsync's default chunker (``DEFAULT_CHUNKER``), every chunk embedded with each
    backend; each of the 500 questions is embedded and searched by exact cosine over all
    chunks. recall@5: share of questions whose top 5 holds a chunk of the gold document
    overlapping the gold answer span (character offsets); top-5 overlap: mean share of the
    two backends' top 5 that is the same chunks.

Run it from the repository root (needs the ``onnx`` extra)::

    python benchmarks/embed.py --backend onnx-int8         # or this file directly
    python benchmarks/embed_backends.py --chunks 256 --documents 10
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
QA = ROOT.parent / "shared" / "corpora" / "qa-squad11-train.json.gz"
BATCH = 64  # kbsync.sync.EMBED_BATCH
BACKENDS = ("torch", "onnx-int8")

Vectors = npt.NDArray[np.float32]


def in_sync_order(embedder: Any, texts: Sequence[str]) -> tuple[float, Vectors]:
    """Seconds and vectors of embedding ``texts`` as a sync does (token order, batches of 64)."""
    from kbsync.sync.embedding import by_length

    order = by_length(list(range(len(texts))), embedder.count_tokens(texts))
    out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    start = time.perf_counter()
    for i in range(0, len(order), BATCH):
        batch = order[i : i + BATCH]
        out[batch] = embedder.embed([texts[j] for j in batch])
    return time.perf_counter() - start, out


def qa_chunks(documents: int) -> tuple[list[tuple[str, int, int]], list[str],
                                       list[dict[str, Any]]]:
    """The first documents' chunks as (document, start, end), their texts, and questions."""
    from kbsync.engine import DEFAULT_CHUNKER

    with gzip.open(QA, "rt", encoding="utf-8") as f:
        data = json.load(f)
    chunker = DEFAULT_CHUNKER.text_chunker()
    where: list[tuple[str, int, int]] = []
    texts: list[str] = []
    for doc in data["documents"][:documents]:
        for c in chunker.chunk(doc["text"]).chunks:
            where.append((doc["id"], c.start, c.end))
            texts.append(c.text)
    kept = {doc for doc, _, _ in where}
    return where, texts, [q for q in data["questions"] if q["doc"] in kept]


def top5(chunks: Vectors, queries: Vectors) -> npt.NDArray[np.int64]:
    scores = queries @ chunks.T
    best = np.argpartition(-scores, 5, axis=1)[:, :5]
    ranked = np.take_along_axis(scores, best, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(best, ranked, axis=1)


def recall_at_5(found: npt.NDArray[np.int64], where: Sequence[tuple[str, int, int]],
                questions: Sequence[dict[str, Any]]) -> float:
    hits = 0
    for row, q in zip(found, questions, strict=True):
        hits += any(where[i][0] == q["doc"] and where[i][1] < e and s < where[i][2]
                    for i in row for s, e in q["spans"])
    return hits / len(questions)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=768, help="chunks for the speed part")
    parser.add_argument("--documents", type=int, default=50, help="QA documents (of 50)")
    args = parser.parse_args(argv)
    if not QA.exists():
        raise SystemExit(f"{QA} is missing (the shared corpora)")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from embed import chunk_texts
    from kbsync.embed.providers.local import LocalEmbedder

    texts = chunk_texts(args.chunks)
    where, qa_texts, questions = qa_chunks(args.documents)
    embedders = {b: LocalEmbedder(backend=b) for b in BACKENDS}
    speed: dict[str, tuple[float, int, Vectors]] = {}
    found: dict[str, npt.NDArray[np.int64]] = {}
    for name, embedder in embedders.items():
        start = time.perf_counter()
        embedder.embed(texts[:BATCH])  # warm-up; onnx-int8 exports here unless cached
        warm = time.perf_counter() - start
        seconds, vectors = in_sync_order(embedder, texts)
        speed[name] = (seconds, sum(embedder.count_tokens(texts)), vectors)
        print(f"{name}: warm-up (load{', export unless cached' if name != 'torch' else ''}) "
              f"{warm:.1f} s"
              + (f", cached in {embedder._onnx.file}" if embedder._onnx else ""), flush=True)
        _, chunk_vectors = in_sync_order(embedder, qa_texts)
        query_vectors = embedder.embed([q["question"] for q in questions])
        found[name] = top5(chunk_vectors, query_vectors)
    torch_vectors, onnx_vectors = speed["torch"][2], speed["onnx-int8"][2]
    cosines = (torch_vectors * onnx_vectors).sum(axis=1)
    overlap = np.mean([len(set(a) & set(b)) / 5 for a, b in
                       zip(found["torch"], found["onnx-int8"], strict=True)])
    print(f"\n{len(texts)} chunks of FastAPI's docs ({speed['torch'][1]:,} word pieces), batch "
          f"size 16; QA set: {len(qa_texts):,} chunks, {len(questions)} questions")
    print("| backend | chunks/s | tokens/s | vs torch | recall@5 (QA, vector) |")
    print("|---|---:|---:|---:|---:|")
    base = speed["torch"][0]
    for name in BACKENDS:
        seconds, tokens, _ = speed[name]
        print(f"| {name} | {len(texts) / seconds:.1f} | {tokens / seconds:,.0f} | "
              f"{base / seconds:.2f}x | {recall_at_5(found[name], where, questions):.3f} |")
    print(f"\nagreement: cosine of the two backends' vectors mean {cosines.mean():.4f}, "
          f"min {cosines.min():.4f}; top-5 overlap of vector search {overlap:.3f}")


if __name__ == "__main__":
    main()
