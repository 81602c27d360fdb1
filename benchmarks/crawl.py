"""Crawl benchmark: a local site crawled twice, with 2% of its pages changed in between.

A threaded HTTP server on 127.0.0.1 serves N generated HTML pages (default 2,000)
that link to each other, with ETags and 304 answers to If-None-Match. kbsync
crawls the site into a fresh knowledge base, 2% of the pages get one new
sentence, and kbsync syncs again; then a full re-crawl (``--verify``: no
validators) is measured for comparison. For each run it prints requests made,
connections opened (the server speaks HTTP/1.1 with keep-alive), bytes
downloaded, pages re-extracted (new + modified + metadata-only) and embeddings
computed.

Target: the second crawl downloads at most 5% of the bytes of the first and
computes embeddings only for the changed regions.

    python benchmarks/crawl.py            # 2,000 pages
    python benchmarks/crawl.py --pages 300
"""

from __future__ import annotations

import argparse
import hashlib
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config

WORDS = (
    "harbour light keeper stairs wick lamp storm ship rock tide quay rope sail chart compass "
    "signal beacon fog horn island channel current anchor hull mast deck cabin lantern glass "
    "weather season winter summer evening morning shift watch log record crew captain pilot"
).split()


@dataclass
class Site:
    """Generated pages and the counters of what the server sent."""

    pages: dict[str, str]
    requests: int = 0
    connections: int = 0
    bytes_sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def body(self, path: str) -> bytes:
        index = int(path.strip("/").removeprefix("page-") or 0)
        n = len(self.pages)
        links = "".join(f'<a href="/page-{(index * 7 + k) % n}">next {k}</a> ' for k in (1, 2, 3))
        html = (f"<html><head><title>Page {index}</title></head><body><main>"
                f"<h1>Page {index}</h1>{self.pages[path]}<p>{links}</p></main></body></html>")
        return html.encode()


def generate(n: int, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    pages = {}
    for i in range(n):
        paragraphs = []
        for _ in range(rng.randint(4, 8)):
            sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize()
                         + "." for _ in range(rng.randint(3, 6))]
            paragraphs.append("<p>" + " ".join(sentences) + "</p>")
        pages["/" if i == 0 else f"/page-{i}"] = "".join(paragraphs)
    return pages


def serve(site: Site) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def setup(self) -> None:
            with site.lock:
                site.connections += 1
            super().setup()

        def log_message(self, *args: object) -> None:
            return

        def do_GET(self) -> None:
            with site.lock:
                site.requests += 1
            if self.path == "/robots.txt":
                self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
                return
            path = "/" if self.path in ("/", "/page-0") else self.path
            if path not in site.pages:
                self._send(404, b"not found", "text/plain")
                return
            body = site.body(path)
            etag = '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self._send(200, body, "text/html; charset=utf-8", etag)

        def _send(self, status: int, body: bytes, kind: str, etag: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if etag:
                self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(body)
            with site.lock:
                site.bytes_sent += len(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--changed", type=float, default=0.02)
    args = parser.parse_args()
    site = Site(generate(args.pages))
    server = serve(site)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        init_config(tmp, [url])
        config = Path(tmp) / "kbsync.toml"
        config.write_text(config.read_text() + f"allow_private_addresses = true\ndelay = 0.0\n"
                          f"max_pages = {args.pages + 100}\nmax_depth = 1000\n"
                          "soft_404_check = false\n")
        with KnowledgeBase.open(tmp) as engine:
            def run(name: str, verify: bool = False) -> None:
                requests, sent, opened = site.requests, site.bytes_sent, site.connections
                started = time.perf_counter()
                report = engine.sync(verify=verify, allow_mass_delete=True, yes=True)
                seconds = time.perf_counter() - started
                s = report.sources[0]
                extracted = sum(s.documents[k] for k in
                                ("new", "modified", "rechunked", "metadata-only"))
                rows.append((name, site.requests - requests, site.connections - opened,
                             site.bytes_sent - sent, extracted, s.embeddings_computed, seconds,
                             report.total("failed")))

            run("first crawl")
            rng = random.Random(1)
            changed = rng.sample(sorted(site.pages), max(1, int(args.pages * args.changed)))
            for path in changed:
                site.pages[path] += "<p>A new sentence about the night shift at the harbour.</p>"
            run(f"second crawl ({len(changed)} pages changed)")
            run("full re-crawl (no validators)", verify=True)
    server.shutdown()

    table = Table(title=f"Crawl of {args.pages} local pages")
    for name in ("run", "requests", "connections", "bytes downloaded", "pages re-extracted",
                 "embeddings computed", "seconds", "failed"):
        table.add_column(name, justify="left" if name == "run" else "right")
    for name, requests, opened, sent, extracted, embedded, seconds, failed in rows:
        table.add_row(name, f"{requests:,}", f"{opened:,}", f"{sent:,}", f"{extracted:,}",
                      f"{embedded:,}", f"{seconds:.2f}", str(failed))
    console = Console()
    console.print(table)
    share = rows[1][3] / rows[0][3] if rows[0][3] else 0.0
    verdict = "PASS" if share <= 0.05 else "MISS"
    console.print(f"second crawl downloaded {share:.1%} of the first crawl's bytes "
                  f"(target ≤ 5%): {verdict}")
    console.print(f"embeddings after the edit: {rows[1][5]} for {len(changed)} changed pages")


if __name__ == "__main__":
    main()
