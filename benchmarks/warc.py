"""WARC benchmark: a generated crawl in WARC files synced, re-synced, and crawled again.

N generated HTML pages (default 10,000, about 3 KB each) are written as ``response``
records into F gzip WARC files (default 10), as a crawler would, and synced into a
fresh SQLite knowledge base (hashing embedder); then a no-op re-sync of the same
files. A second crawl is then added as F more files: 1% of the pages edited, 1%
answering 410, the rest unchanged (``revisit`` records, as a deduplicating crawler
writes them); it is synced, then re-synced with nothing new. For each run it prints
the files and records, the time of a listing made just before the sync (a file not
seen before is scanned, an unchanged one comes from the kept scans of
``.kbsync/warc-index``), the payload bytes read, the embeddings computed, the wall
time of the whole sync, and the documents per action (the times depend on the
machine; the counts do not). ``--no-index`` scans every file at every listing.

    python benchmarks/warc.py                  # 10,000 pages
    python benchmarks/warc.py --pages 1000 --files 4
"""

from __future__ import annotations

import argparse
import io
import os
import random
import tempfile
import time
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import DEFAULT_CHUNKER
from kbsync.extract.registry import extractor_for
from kbsync.sources.warc.source import WarcSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import sync_sources

WORDS = ("harbour light keeper stairs wick lamp storm ship rock tide quay rope sail chart "
         "compass signal beacon fog horn island channel current anchor hull mast deck").split()


def _page(rng: random.Random, n: int, extra: str = "") -> bytes:
    paragraphs = "".join(
        "<p>" + " ".join(rng.choice(WORDS) for _ in range(70)) + ".</p>" for _ in range(6))
    return (f"<html><head><title>Page {n}</title></head><body><h1>Page {n}</h1>"
            f"{paragraphs}{extra}</body></html>").encode()


def _write(path: Path, records: list[tuple[str, str, bytes | str]], date: str) -> int:
    """Write records (URL, status or "revisit", body or digest) into one gzip WARC file,
    dated a minute ago (a file its crawler closed)."""
    with path.open("wb") as f:
        writer = WARCWriter(f, gzip=True)
        for url, status, data in records:
            headers = StatusAndHeaders(status if status != "revisit" else "200 OK",
                                       [("Content-Type", "text/html; charset=utf-8")],
                                       protocol="HTTP/1.1")
            if status == "revisit":
                record = writer.create_revisit_record(
                    url, str(data), url, "2024-01-01T00:00:00Z", http_headers=headers,
                    warc_headers_dict={"WARC-Date": date})
            else:
                record = writer.create_warc_record(
                    url, "response", payload=io.BytesIO(bytes(data)), http_headers=headers,
                    warc_headers_dict={"WARC-Date": date})
            writer.write_record(record)
    closed = time.time() - 60
    os.utime(path, (closed, closed))
    return len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--no-index", action="store_true",
                        help="keep no scans between listings")
    args = parser.parse_args()
    rng = random.Random(35)
    urls = [f"https://docs.example.org/section{n % 50}/page{n:05}" for n in range(args.pages)]
    bodies = [_page(rng, n) for n in range(args.pages)]
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        crawl = Path(tmp) / "crawl"
        crawl.mkdir()
        digests: dict[str, str] = {}
        began = time.perf_counter()
        per_file = -(-args.pages // args.files)
        records = 0
        for f in range(args.files):
            part = range(f * per_file, min((f + 1) * per_file, args.pages))
            records += _write(crawl / f"crawl1-{f:03}.warc.gz",
                              [(urls[n], "200 OK", bodies[n]) for n in part],
                              "2024-01-01T00:00:00Z")
        written = time.perf_counter() - began
        for path in sorted(crawl.iterdir()):  # the digests warcio wrote, for the revisits
            from warcio.archiveiterator import ArchiveIterator

            with path.open("rb") as stream:
                for record in ArchiveIterator(stream):
                    digests[record.rec_headers.get_header("WARC-Target-URI")] = (
                        record.rec_headers.get_header("WARC-Payload-Digest"))
        (Path(tmp) / ".kbsync").mkdir()
        source = WarcSource([str(crawl / "*.warc.gz")], name="crawl",
                            index_dir=None if args.no_index
                            else Path(tmp) / ".kbsync" / "warc-index")
        store = SqliteStore(Path(tmp) / "kb.db")
        embedder = HashingEmbedder(384)

        def run(label: str) -> None:
            files = len(source.shards().files)
            began = time.perf_counter()
            source.list()
            listed = time.perf_counter() - began
            began = time.perf_counter()
            result = sync_sources([source], store, embedder, extractor_for,
                                  DEFAULT_CHUNKER).sources[0]
            seconds = time.perf_counter() - began
            docs = ", ".join(f"{k} {v}" for k, v in sorted(result.documents.items()) if v)
            rows.append((label, str(files), f"{records:,}", f"{listed:.2f}",
                         f"{result.bytes_read:,}", f"{result.embeddings_computed:,}",
                         f"{seconds:.2f}", docs))

        run("first sync")
        run("no-op re-sync")
        changed = rng.sample(range(args.pages), max(2, args.pages // 50))
        edited, gone = set(changed[: len(changed) // 2]), set(changed[len(changed) // 2:])
        second: list[tuple[str, str, bytes | str]] = []
        for n in range(args.pages):
            if n in edited:
                second.append((urls[n], "200 OK", bodies[n][:-14] +
                               b"<p>One new sentence about the tide.</p></body></html>"))
            elif n in gone:
                second.append((urls[n], "410 Gone", b"gone"))
            else:
                second.append((urls[n], "revisit", digests[urls[n]]))
        for f in range(args.files):
            records += _write(crawl / f"crawl2-{f:03}.warc.gz",
                              second[f * per_file:(f + 1) * per_file], "2024-02-01T00:00:00Z")
        run(f"crawl 2: {len(edited)} edited, {len(gone)} gone")
        run("no-op re-sync")
        store.close()
    header = ("run", "files", "records", "listing s", "bytes read", "embedded", "sync s",
              "documents")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"{args.pages:,} pages in {args.files} gzip WARC files per crawl "
          f"(written in {written:.1f} s)")
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
