"""Object store benchmark: a bucket on a local S3 server synced, re-synced, edited and renamed.

moto's S3 server runs on 127.0.0.1 and counts what it answers. N generated Markdown
objects (default 1,000) are synced into a fresh knowledge base; then a no-op re-sync,
a re-sync after 1% of the objects are edited and 1% renamed (server-side copy and
delete), and a full re-read (``verify``) for comparison. For each it prints the
listing requests, object downloads (GETs), bytes sent, embeddings computed and the
wall time (which depends on the machine; the counts do not).

Needs the dev extras (``moto[server]``, ``s3fs``).

    python benchmarks/objects.py                 # 1,000 objects
    python benchmarks/objects.py --objects 200
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import DEFAULT_CHUNKER
from kbsync.extract.registry import extractor_for
from kbsync.sources.objects import ObjectStoreSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import sync_sources

WORDS = ("harbour light keeper stairs wick lamp storm ship rock tide quay rope sail chart "
         "compass signal beacon fog horn island channel current anchor hull mast deck").split()


class _Quiet(MotoRequestHandler):  # type: ignore[misc]
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class Counter:
    """What the server answered: listings, object GETs, HEADs and bytes sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.listings = self.gets = self.heads = self.bytes = 0

    def snapshot(self) -> tuple[int, int, int, int]:
        with self.lock:
            return self.listings, self.gets, self.heads, self.bytes


def serve(counter: Counter) -> tuple[str, Callable[[], None]]:
    app = DomainDispatcherApplication(create_backend_app)

    def counting(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        body = list(app(environ, start))
        with counter.lock:
            if method == "GET" and "list-type" in query:
                counter.listings += 1
            elif method == "GET":
                counter.gets += 1
                counter.bytes += sum(len(b) for b in body)
            elif method == "HEAD":
                counter.heads += 1
        return body

    server = make_server("127.0.0.1", 0, counting, threaded=True, request_handler=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        thread.join()

    return f"http://127.0.0.1:{server.server_port}", stop


def _page(rng: random.Random, n: int) -> bytes:
    paragraphs = [" ".join(rng.choice(WORDS) for _ in range(60)) + "." for _ in range(6)]
    return (f"# Page {n}\n\n" + "\n\n".join(paragraphs)).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    import boto3  # after the environment, which it reads

    counter = Counter()
    url, stop = serve(counter)
    rng = random.Random(18)
    client = boto3.client("s3", endpoint_url=url)
    client.create_bucket(Bucket="bench")
    keys = [f"docs/part{n % 10}/page{n:05}.md" for n in range(args.objects)]
    bodies = [_page(rng, n) for n in range(args.objects)]
    for key, body in zip(keys, bodies, strict=True):
        client.put_object(Bucket="bench", Key=key, Body=body)
    source = ObjectStoreSource("s3://bench/docs", name="bench",
                               storage_options={"endpoint_url": url})
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "kb.db")
        embedder = HashingEmbedder(384)

        def run(label: str, verify: bool = False) -> None:
            before = counter.snapshot()
            began = time.perf_counter()
            result = sync_sources([source], store, embedder, extractor_for, DEFAULT_CHUNKER,
                                  verify=verify).sources[0]
            seconds = time.perf_counter() - began
            after = counter.snapshot()
            listings, gets, heads, sent = (a - b for a, b in zip(after, before, strict=True))
            docs = ", ".join(f"{k} {v}" for k, v in sorted(result.documents.items()) if v)
            rows.append((label, str(listings), str(gets), str(heads), f"{sent:,}",
                         str(result.embeddings_computed), f"{seconds:.2f}", docs))

        run("first sync")
        run("no-op re-sync")
        changed = rng.sample(range(args.objects), max(2, args.objects // 50))
        half = len(changed) // 2
        for n in changed[:half]:
            client.put_object(Bucket="bench", Key=keys[n],
                              Body=bodies[n] + b"\n\nOne new sentence about the tide.")
        for n in changed[half:]:
            new = keys[n].replace("/page", "/moved-page")
            client.copy_object(CopySource={"Bucket": "bench", "Key": keys[n]},
                               Bucket="bench", Key=new)
            client.delete_object(Bucket="bench", Key=keys[n])
        run(f"{half} edited, {len(changed) - half} renamed")
        run("full re-read (verify)", verify=True)
        store.close()
    stop()
    header = ("run", "listings", "GETs", "HEADs", "bytes sent", "embedded", "seconds",
              "documents")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"{args.objects:,} objects in s3://bench/docs (moto on 127.0.0.1)")
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
