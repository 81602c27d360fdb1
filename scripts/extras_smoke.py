"""Use one optional extra of an installed kbsync on a real document: `python extras_smoke.py EXTRA`.

Run by scripts/check_extras.sh inside a fresh virtual environment that has only
kbsync and that extra, so an extra whose dependencies do not import, or that
does not do its job, fails here and not on a user's first document. Offline:
the web check serves its page from 127.0.0.1.
"""

from __future__ import annotations

import http.server
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from kbsync import KnowledgeBase, chunk_text

WORD = "lighthousekeeper"
ARTICLE = f"""<!doctype html><html><head><title>Keeping a light</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>Keeping a light</h1>
<p>The {WORD} climbs the tower at dusk, trims the wick and winds the clockwork that turns
the lens. Through the night the beam sweeps the water every ten seconds, and ships that
see it know which headland they are passing.</p>
<h2>In the morning</h2>
<p>At dawn the lamp is put out, the lens is covered against the sun, and the logbook
records the weather, the ships seen and the oil burned.</p></article>
<footer>Copyright the harbour trust</footer></body></html>"""


def _pdf(lines: list[str]) -> bytes:
    """A one-page PDF showing ``lines`` in Helvetica, written by hand (no PDF writer needed)."""
    shown = " ".join(f"({line}) '" for line in lines)
    content = f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        "/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"\
        .encode()
    return bytes(out)


def _sync_one(home: Path, name: str, data: bytes, sources: list[str] | None = None,
              edit: Callable[[Path], None] | None = None) -> None:
    """Sync a knowledge base holding one document and find it by a word of its text."""
    if sources is None:
        (home / "docs").mkdir()
        (home / "docs" / name).write_bytes(data)
        sources = ["docs"]
    KnowledgeBase.create(home, sources=sources, embedder={"kind": "hashing"}).close()
    if edit is not None:
        edit(home / "kbsync.toml")
    with KnowledgeBase.open(home) as kb:
        result = kb.sync()
        problems = [f for s in result.sources for f in s.failures]
        assert not problems, problems
        hits = kb.search(WORD, k=1, mode="text")
        assert hits, f"{name}: the document was not indexed"
        print(f"{name}: indexed, found by '{WORD}' under {hits[0].heading!r}")


def html(home: Path) -> None:
    _sync_one(home, "light.html", ARTICLE.encode())


def pdf(home: Path) -> None:
    _sync_one(home, "light.pdf", _pdf([f"The {WORD} climbs the tower at dusk.",
                                        "The beam sweeps the water every ten seconds."]))


def office(home: Path) -> None:
    import io

    # Every library of the extra imports on a fresh install, not only the one used here.
    import docx
    import ebooklib.epub  # noqa: F401
    import lxml.etree  # noqa: F401
    import openpyxl  # noqa: F401
    import pptx  # noqa: F401
    import striprtf.striprtf  # noqa: F401

    document = docx.Document()
    document.add_heading("Keeping a light", level=1)
    document.add_paragraph(f"The {WORD} climbs the tower at dusk.")
    out = io.BytesIO()
    document.save(out)
    _sync_one(home, "light.docx", out.getvalue())


def tiktoken(home: Path) -> None:
    result = chunk_text(ARTICLE, token_counter="tiktoken", min_tokens=16, max_tokens=64)
    assert result.chunks, "no chunks"
    assert result.diagnostics.token_counter.startswith("tiktoken"), result.diagnostics
    print(f"tiktoken: {len(result.chunks)} chunks, {result.diagnostics.token_counter}")


def watch(home: Path) -> None:
    docs = home / "docs"
    docs.mkdir()
    reasons: list[str] = []
    stop = threading.Event()
    with KnowledgeBase.create(home, sources=["docs"], embedder={"kind": "hashing"}) as kb:
        def seen(result: object, reason: str) -> None:
            reasons.append(reason)
            if reason == "file change":
                stop.set()
            elif len(reasons) == 1:  # the first scheduled check is done: now edit
                (docs / "light.txt").write_text(f"The {WORD} keeps the light.\n")

        thread = threading.Thread(target=kb.watch, kwargs={"stop": stop, "on_report": seen,
                                                           "interval": 3600.0})
        thread.start()
        thread.join(60)
        stop.set()
        assert "file change" in reasons, f"no file event seen: {reasons}"
        assert kb.search(WORD, k=1, mode="text"), "the new file was not indexed"
    print(f"watch: synced after {reasons}")


def web(home: Path) -> None:
    page = f"The {WORD} climbs the tower at dusk and winds the clockwork.\n".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/light.txt":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/light.txt"
        _sync_one(home, "light.txt", b"", sources=[url], edit=_allow_loopback)
    finally:
        server.shutdown()


def _allow_loopback(config: Path) -> None:
    """The web source refuses loopback addresses unless its table allows them."""
    text = config.read_text()
    config.write_text(text.replace("urls = [", "allow_private_addresses = true\nurls = [", 1))


def fsspec(home: Path) -> None:
    """A folder through a file:// URL: the object store source on fsspec alone."""
    (home / "bucket").mkdir()
    (home / "bucket" / "light.txt").write_text(f"The {WORD} keeps the light.\n")
    _sync_one(home, "light.txt", b"", sources=[(home / "bucket").as_uri()])


CHECKS: dict[str, Callable[[Path], None]] = {
    "html": html, "office": office, "pdf": pdf, "tiktoken": tiktoken, "watch": watch,
    "web": web, "fsspec": fsspec}


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        raise SystemExit(f"usage: extras_smoke.py {{{','.join(CHECKS)}}}")
    with tempfile.TemporaryDirectory() as home:
        CHECKS[sys.argv[1]](Path(home))


if __name__ == "__main__":
    main()
