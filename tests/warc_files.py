"""WARC files made by the tests with warcio, as a crawler writes them."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

__all__ = ["WarcFile", "page_html"]


def page_html(title: str, *paragraphs: str) -> bytes:
    """A small HTML page: a title, a heading and paragraphs."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}"
            "</body></html>").encode()


class WarcFile:
    """A WARC file being written: ``with WarcFile(path) as w: w.page(...)``.

    ``gzip`` writes one gzip member per record (``.warc.gz``); ``stream`` writes to an
    open binary stream instead of ``path`` (an fsspec file).
    """

    def __init__(self, path: Path | None = None, *, gzip: bool = True,
                 stream: IO[bytes] | None = None) -> None:
        self._own = stream is None
        self._stream: IO[bytes] = stream if stream is not None else open(path, "wb")  # type: ignore[arg-type]  # noqa: SIM115
        self._writer = WARCWriter(self._stream, gzip=gzip)

    def __enter__(self) -> WarcFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._own:
            self._stream.close()

    def page(self, url: str, body: bytes, date: str, *, status: str = "200 OK",
             content_type: str | None = "text/html; charset=utf-8",
             headers: Iterable[tuple[str, str]] = (), digest: bool = True) -> str:
        """A ``response`` record; returns its payload digest (``sha1:...``)."""
        http = [("Content-Type", content_type)] if content_type else []
        record = self._writer.create_warc_record(
            url, "response", payload=io.BytesIO(body),
            http_headers=StatusAndHeaders(status, [*http, *headers], protocol="HTTP/1.1"),
            warc_headers_dict={"WARC-Date": date})
        payload_digest = str(record.rec_headers.get_header("WARC-Payload-Digest"))
        if not digest:
            record.rec_headers.remove_header("WARC-Payload-Digest")
        self._writer.write_record(record)
        return payload_digest

    def revisit(self, url: str, digest: str, date: str, *, refers_to: str | None = None,
                refers_date: str = "", status: str = "200 OK",
                content_type: str | None = "text/html; charset=utf-8") -> None:
        """A ``revisit`` record (identical payload digest) of an earlier capture."""
        http = [("Content-Type", content_type)] if content_type else []
        record = self._writer.create_revisit_record(
            url, digest, refers_to or url, refers_date,
            http_headers=StatusAndHeaders(status, http, protocol="HTTP/1.1"),
            warc_headers_dict={"WARC-Date": date})
        self._writer.write_record(record)

    def record(self, url: str, kind: str, body: bytes, date: str, *,
               content_type: str = "", headers: dict[str, str] | None = None) -> None:
        """Any other record (``request``, ``metadata``, ``resource``...)."""
        record = self._writer.create_warc_record(
            url, kind, payload=io.BytesIO(body), length=len(body),
            warc_content_type=content_type,
            warc_headers_dict={"WARC-Date": date, **(headers or {})})
        self._writer.write_record(record)

    def raw(self, data: bytes) -> None:
        """Bytes written as they are (a malformed record)."""
        self._stream.write(data)
