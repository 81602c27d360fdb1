"""Embedding benchmark: kbsync's local embedder in a sync's batches against ``encode``.

What is measured
    The chunks of real Markdown documentation (the snapshot of FastAPI's docs in
    ``<repo>/../shared/corpora/fastapi-docs-history.jsonl.gz``, cut with kbsync's default
    chunker, the first ``--chunks`` of them in document order) are embedded with the local
    model (all-MiniLM-L6-v2) three ways, in one process, after one warm-up batch:

    ``encode``        sentence-transformers' ``SentenceTransformer.encode`` on all texts at
                      once, with the embedder's batch size (it sorts the texts by
                      characters itself);
    ``plan order``    kbsync's embedder on batches of 64 chunks in the plan's order;
    ``token order``   kbsync's embedding step (``kbsync.sync.embed_plan``): the plan's
                      chunks ordered by their token count (``by_length``), then batches
                      of 64 handed to ``LocalEmbedder.embed``, which feeds them to the
                      model in that order, ``batch_size`` at a time.

    For each: chunks/s, model tokens/s, the ratio to ``encode``, the word pieces the model
    was fed counting padding (as a multiple of the real ones), and the largest difference of
    any vector component from ``encode``'s vectors. Those differ in the last bits because a
    text padded to another length is rounded differently, so the run also checks, untimed,
    that the token-order vectors are bit for bit ``encode``'s when ``encode`` is given the
    same model batches: kbsync computes what the model computes, and its speed comes from
    which texts share a batch.

Run it from the repository root (needs the ``local`` extra)::

    python benchmarks/embed.py                 # 768 chunks
    python benchmarks/embed.py --chunks 256
    python benchmarks/embed.py --backend onnx-int8   # torch against onnx-int8
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
HISTORY = ROOT.parent / "shared" / "corpora" / "fastapi-docs-history.jsonl.gz"
BATCH = 64  # kbsync.sync.EMBED_BATCH

Vectors = npt.NDArray[np.float32]


def chunk_texts(limit: int) -> list[str]:
    """The first ``limit`` chunks of the history's snapshot, in document order."""
    from kbsync.engine import DEFAULT_CHUNKER
    from kbsync.extract.registry import extractor_for

    spec = importlib.util.spec_from_file_location("corpora_replay", HISTORY.parent / "replay.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot read {HISTORY.parent / 'replay.py'}")
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    snapshot = next(replay.iter_history(HISTORY))
    extractor = extractor_for("text/markdown")
    assert extractor is not None
    chunker = DEFAULT_CHUNKER.text_chunker()
    texts: list[str] = []
    for path in sorted(p for p in snapshot["files"] if p.endswith(".md")):
        record = extractor.extract(snapshot["files"][path].encode("utf-8"), locator=path)
        texts.extend(c.text for c in chunker.chunk(record.text).chunks)
        if len(texts) >= limit:
            break
    return texts[:limit]


def padded_pieces(lengths: Sequence[int], batches: Sequence[Sequence[int]], size: int,
                  *, sort: bool) -> int:
    """Word pieces fed to the model: each run of ``size`` texts of a call padded to its
    longest (``encode`` sorts a call's texts first, by characters; by tokens is close)."""
    total = 0
    for batch in batches:
        fed = [lengths[i] for i in batch]
        if sort:
            fed.sort(reverse=True)
        total += sum(max(fed[i : i + size]) * len(fed[i : i + size])
                     for i in range(0, len(fed), size))
    return total


def timed(run: Callable[[], Vectors]) -> tuple[float, Vectors]:
    start = time.perf_counter()
    vectors = run()
    return time.perf_counter() - start, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=768, help="chunks to embed")
    parser.add_argument("--backend", choices=("torch", "onnx-int8"), default="torch",
                        help="onnx-int8: both backends' speed and agreement (embed_backends.py)")
    args = parser.parse_args()
    if args.backend != "torch":
        from embed_backends import main as compare_backends

        compare_backends(["--chunks", str(args.chunks)])
        return
    if not HISTORY.exists():
        raise SystemExit(f"{HISTORY} is missing (the shared corpora)")

    from kbsync.embed.providers.local import LocalEmbedder
    from kbsync.sync.embedding import by_length

    texts = chunk_texts(args.chunks)
    embedder = LocalEmbedder()
    model = embedder._loaded()  # the same model object for every way
    lengths = embedder.count_tokens(texts)
    embedder.embed(texts[:BATCH])  # warm-up: threads, allocator, first-call costs
    plan = [list(range(i, min(i + BATCH, len(texts)))) for i in range(0, len(texts), BATCH)]
    order = by_length(list(range(len(texts))), lengths)  # what embed_plan does
    by_tokens = [order[i : i + BATCH] for i in range(0, len(order), BATCH)]

    def in_batches(batches: list[list[int]]) -> Callable[[], Vectors]:
        def run() -> Vectors:
            out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
            for batch in batches:
                out[batch] = embedder.embed([texts[i] for i in batch])
            return out
        return run

    ways: list[tuple[str, Callable[[], Vectors], list[list[int]]]] = [
        ("encode", lambda: np.asarray(model.encode(texts, batch_size=embedder.batch_size,
                                                   normalize_embeddings=True,
                                                   convert_to_numpy=True,
                                                   show_progress_bar=False), np.float32),
         [list(range(len(texts)))]),
        ("plan order", in_batches(plan), plan),
        ("token order", in_batches(by_tokens), by_tokens),
    ]
    real = sum(lengths)
    results = []
    for name, run, batches in ways:
        seconds, vectors = timed(run)
        results.append((name, seconds, vectors, padded_pieces(
            lengths, batches, embedder.batch_size, sort=name == "encode")))
    base_seconds, base = results[0][1], results[0][2]
    print(f"{len(texts)} chunks, {real:,} word pieces; batch size {embedder.batch_size}, "
          f"kbsync batches of {BATCH}")
    header = ("way", "seconds", "chunks/s", "tokens/s", "vs encode", "fed/real", "max |Δ|")
    print("  ".join(f"{h:>11}" for h in header))
    for name, seconds, vectors, fed in results:
        print("  ".join(f"{c:>11}" for c in (
            name, f"{seconds:.1f}", f"{len(texts) / seconds:.1f}", f"{real / seconds:,.0f}",
            f"{base_seconds / seconds:.2f}x", f"{fed / real:.2f}",
            f"{float(np.abs(vectors - base).max()):.1e}")))
    token_order = results[-1][2]
    same = np.empty_like(token_order)
    for start in range(0, len(order), embedder.batch_size):
        rows = order[start : start + embedder.batch_size]
        same[rows] = model.encode([texts[i] for i in rows], batch_size=len(rows),
                                  normalize_embeddings=True, convert_to_numpy=True,
                                  show_progress_bar=False)
    print(f"token order bit for bit encode's on the same batches of {embedder.batch_size}: "
          f"{np.array_equal(token_order, same)}")


if __name__ == "__main__":
    main()
