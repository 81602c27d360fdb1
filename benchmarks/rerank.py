"""What reranking costs: a cross-encoder of ms-marco-MiniLM-L6's shape reading a search's
candidates, on this machine's CPU.

No cross-encoder's weights can be installed here (no package ships them; nothing is
downloaded at run time), so the quality of reranking is not measured by this script.
Its cost does not depend on the weights: a BERT sequence classifier of the shape of
``cross-encoder/ms-marco-MiniLM-L6-v2`` (6 layers, 384 wide, 12 heads, 1,536 inner, one
label) with random weights and the default model's tokenizer is exported to ONNX and run
by :class:`kbsync.embed.providers.cross_encoder.CrossEncoderReranker`, as ``[search]
rerank`` runs a real one. Its inputs are real: the hybrid search's candidates on the
long-document QA set (``../shared/corpora/qa-squad11-train.json.gz``, the first
``--questions`` questions, kbsync's default chunker and the local model), read either as
the chunks alone or as their 512-token context windows.

    python benchmarks/rerank.py [--questions 30] [--candidates 10 20]

Prints p50 and p95 milliseconds of scoring one query's candidates, per candidate count
and text, beside the p50 of the hybrid search itself in the same process.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parent.parent / "shared" / "corpora"


def _stand_in(folder: Path) -> Path:
    """A random-weight cross-encoder of ms-marco-MiniLM-L6-v2's shape (for timing only)."""
    import torch
    import transformers

    from kbsync.embed.providers.local import LocalEmbedder

    counter = LocalEmbedder().token_counter
    assert counter is not None
    tokenizer = Path(counter.removeprefix("tokenizer:")).parent
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(tokenizer / name, folder / name)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                     num_attention_heads=12, intermediate_size=1536,
                                     max_position_embeddings=512, num_labels=1)
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--candidates", type=int, nargs="+", default=[10, 20])
    args = parser.parse_args()

    from kbsync import KnowledgeBase
    from kbsync.embed.providers.cross_encoder import CrossEncoderReranker

    with gzip.open(CORPORA / "qa-squad11-train.json.gz", "rt", encoding="utf-8") as f:
        qa = json.load(f)
    questions = [q["question"] for q in qa["questions"][: args.questions]]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        wanted = {q["doc"] for q in qa["questions"][: args.questions]}
        for n, doc in enumerate(d for d in qa["documents"] if d["id"] in wanted):
            (root / "docs" / f"{n:03d}.txt").write_text(doc["text"], encoding="utf-8")
        (root / "model").mkdir()
        reranker = CrossEncoderReranker(str(_stand_in(root / "model")),
                                        cache_dir=str(root / "cache"))
        rows: list[tuple[str, float, float]] = []
        with KnowledgeBase.create(root, ["docs"], embedder={"kind": "local"}) as kb:
            kb.sync(yes=True)
            searched: list[float] = []
            hits = {}
            most = max(args.candidates)
            for q in questions:
                start = time.perf_counter()
                kb.search(q, k=5, mode="hybrid")
                searched.append((time.perf_counter() - start) * 1000)
                hits[q] = kb.search(q, k=most, mode="hybrid")
            rows.append(("hybrid search, k = 5 (no reranking)", *_percentiles(searched)))
            reranker.score("warm up", ["the export and the session are made here"])
            for n in args.candidates:
                for label, text in (("chunks", lambda h: h.text),
                                    ("512-token windows", lambda h: h.context or h.text)):
                    times = []
                    for q in questions:
                        passages = [text(h) for h in hits[q][:n]]
                        start = time.perf_counter()
                        reranker.score(q, passages)
                        times.append((time.perf_counter() - start) * 1000)
                    rows.append((f"rerank {n} {label}", *_percentiles(times)))
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'p50 ms':>8}  {'p95 ms':>8}")
    for name, p50, p95 in rows:
        print(f"{name:{width}}  {p50:8.0f}  {p95:8.0f}")
    print(json.dumps({name: [round(p50), round(p95)] for name, p50, p95 in rows}))


if __name__ == "__main__":
    sys.exit(main())
