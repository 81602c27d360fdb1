"""Reading WARC files with warcio: the captures of one file, and one record's payload again.

A scan reads every record once, keeping what :mod:`.captures` needs and no payload.
Records that say nothing about a web page are passed over quietly (``request``,
``metadata``, ``warcinfo``, ``dns:`` and other non-http(s) targets, ``robots.txt``,
which is the crawler's own). Faults, each named with the file and the offset:

- a record that cannot be parsed: an error (the listing is incomplete), and the scan
  resumes at the next record start (the next gzip member of a ``.warc.gz``, the next
  ``WARC/1.x`` line of a ``.warc``); in a ``.warc``, the record just before it is not
  trusted either (a wrong Content-Length shows as the next record's broken start);
- a file that ends inside a record (truncated): an error, and the record is unusable;
- a record whose date or status cannot be read: an unusable capture of its URL (an
  earlier capture decides); a target URL that is not a valid http(s) URL: a warning.

The payload is found again by seeking to the record's offset (each gzip member of a
``.warc.gz`` is independently readable), checked to be the same record by its
``WARC-Record-ID``, and decoded of its Transfer- and Content-Encoding, up to a cap.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import urlsplit

from kbsync.errors import DependencyMissingError, DocumentError
from kbsync.sources.warc.captures import Capture, RecordKind, ShardScan
from kbsync.sources.web.urls import UrlError, canonicalize

try:
    from warcio.archiveiterator import ArchiveIterator
    from warcio.bufferedreaders import BufferedReader
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise DependencyMissingError("The WARC source", "warc", exc.name or "warcio", exc) from exc

__all__ = ["MAX_FAULTS", "read_payload", "scan_file"]

MAX_FAULTS = 100
"""Malformed records passed over in one file before the rest of it is given up."""
_BLOCK = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b\x08"
_WARC_LINE = b"\nWARC/1."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_KINDS = {"response": RecordKind.RESPONSE, "resource": RecordKind.RESOURCE,
          "revisit": RecordKind.REVISIT}


class _QuietIterator(ArchiveIterator):  # type: ignore[misc]  # warcio is untyped
    """warcio's iterator without its warning on stderr: a record not followed by blank
    lines is counted (``err_count``) and reported by the scan, naming the file."""

    INC_RECORD = ""


def scan_file(stream: IO[bytes], file: str) -> ShardScan:
    """The captures of the WARC file open in ``stream`` (seekable), named ``file``."""
    gzipped = stream.read(2) == _GZIP_MAGIC[:2]
    captures: list[Capture] = []
    errors: list[str] = []
    skipped: list[str] = []
    start: int | None = 0
    faults = 0
    while start is not None:
        stream.seek(start)
        iterator = _QuietIterator(stream)
        offset = start
        try:
            for record in iterator:
                offset = iterator.offset
                _check(record)
                capture, truncated = _capture(record, file, offset, skipped)
                iterator.get_record_length()  # to the record's end: counts a bad length
                if truncated:
                    errors.append(f"{file}: the file ends inside the record at offset "
                                  f"{offset} (truncated); the listing is incomplete")
                    if capture is not None:
                        captures.append(_unusable(capture, "is cut short"))
                    return ShardScan(file, tuple(captures), tuple(errors), _warnings(file, skipped))
                if iterator.err_count:
                    iterator.err_count = 0
                    capture = None if capture is None else _unusable(
                        capture, "is not followed where its Content-Length says")
                    errors.append(f"{file}: the record at offset {offset} is not followed "
                                  "by the blank lines its Content-Length promises; the "
                                  "listing is incomplete")
                if capture is not None:
                    captures.append(capture)
            start = None
        except Exception as exc:  # warcio raises whatever its parsers and zlib raise
            faults += 1
            offset = max(offset, iterator.offset)
            errors.append(f"{file}: a malformed record at offset {offset} "
                          f"({type(exc).__name__}: {_first_line(exc)}); the listing is "
                          "incomplete")
            if not gzipped and captures and captures[-1].offset < offset:
                # A wrong Content-Length of the record before shows as this one's start.
                captures[-1] = _unusable(captures[-1], "is followed by a malformed record")
            if faults >= MAX_FAULTS:
                errors.append(f"{file}: {MAX_FAULTS} malformed records; the rest of the "
                              "file was not read")
                break
            start = _next_start(stream, offset + 1, gzipped)
    return ShardScan(file, tuple(captures), tuple(errors), _warnings(file, skipped))


def read_payload(stream: IO[bytes], offset: int, record_id: str, cap: int,
                 locator: str, where: str) -> bytes:
    """The decoded payload of the record at ``offset``; DocumentError naming ``locator``
    and ``where`` (the file and offset) when it is not there any more or cannot be read."""
    stream.seek(offset)
    try:
        record = next(iter(_QuietIterator(stream)), None)
    except Exception as exc:  # warcio raises whatever its parsers and zlib raise
        raise DocumentError(locator, f"{where}: the record cannot be read "
                                     f"({type(exc).__name__}: {_first_line(exc)})") from exc
    if record is None or record.rec_headers.get_header("WARC-Record-ID") != record_id:
        raise DocumentError(locator, f"{where}: the record {record_id} is not there any more "
                                     "(the file changed since it was listed)")
    headers = record.http_headers if record.rec_type != "resource" else None
    coding = _content_coding(headers)
    if coding is not None:
        raise DocumentError(locator, f"{where}: unsupported Content-Encoding {coding!r}")
    data = bytearray()
    try:
        content = record.content_stream()
        while block := content.read(_BLOCK):
            data += block
            if len(data) > cap:
                raise DocumentError(locator, f"{where}: the payload is over the cap of "
                                             f"{cap:,} bytes (max_bytes); not read")
    except DocumentError:
        raise
    except Exception as exc:  # a broken compressed body, a truncated file
        raise DocumentError(locator, f"{where}: the payload cannot be decoded "
                                     f"({type(exc).__name__}: {_first_line(exc)})") from exc
    if _drain(record, None)[1]:
        raise DocumentError(locator, f"{where}: the file ends inside the record")
    return bytes(data)


class _MalformedRecordError(Exception):
    """A record warcio parsed that is no WARC record (no type, no length)."""


def _check(record: Any) -> None:
    """Refuse a record without a WARC-Type or a Content-Length: warcio takes such a header
    block for a record that runs to the end of the file, hiding every record after it."""
    headers = record.rec_headers
    length = (headers.get_header("Content-Length") or "").strip()
    if record.format == "warc" and (not headers.get_header("WARC-Type")
                                    or not length.isdigit()):
        raise _MalformedRecordError(
            f"no WARC-Type or Content-Length after {headers.protocol!r}")


def _capture(record: Any, file: str, offset: int,
             skipped: list[str]) -> tuple[Capture | None, bool]:
    """The capture a record makes (None for one about no page), and whether it was cut
    short; reads the payload through, hashing it when the record has no digest."""
    kind = _KINDS.get(record.rec_type)
    url = (record.rec_headers.get_header("WARC-Target-URI") or "").strip()
    if kind is None or not url.lower().startswith(("http://", "https://")):
        return None, _drain(record, None)[1]
    try:
        key = canonicalize(url.strip("<>"))
    except UrlError:
        skipped.append(url)
        return None, _drain(record, None)[1]
    if urlsplit(key).path == "/robots.txt":
        return None, _drain(record, None)[1]
    headers = record.rec_headers
    digest = (headers.get_header("WARC-Payload-Digest") or (
        headers.get_header("WARC-Block-Digest") if kind is RecordKind.RESOURCE else None)
        or "").strip()
    hasher = hashlib.sha1() if not digest and kind is not RecordKind.REVISIT else None
    size, truncated = _drain(record, hasher)
    if hasher is not None:
        digest = "sha1:" + base64.b32encode(hasher.digest()).decode("ascii")
    date = _nanoseconds(headers.get_header("WARC-Date"))
    found = Capture(key, date or 0, file, offset, kind,
                    record_id=(headers.get_header("WARC-Record-ID") or "").strip(),
                    digest=digest, size=size)
    if date is None:
        return _unusable(found, f"has no valid WARC-Date ({headers.get_header('WARC-Date')!r})"
                         ), truncated
    if kind is RecordKind.RESOURCE:
        return _with(found, 200, headers.get_header("Content-Type"), None), truncated
    http = record.http_headers
    if http is None:
        if kind is RecordKind.REVISIT:  # a revisit may carry no block at all
            return _revisit(found, headers), truncated
        return _unusable(found, "has no HTTP headers"), truncated
    try:
        status = int(http.get_statuscode())
    except (TypeError, ValueError):
        return _unusable(found, f"has no valid HTTP status ({http.statusline!r})"), truncated
    found = _with(found, status, http.get_header("Content-Type"), http)
    return (_revisit(found, headers) if kind is RecordKind.REVISIT else found), truncated


def _with(capture: Capture, status: int, content_type: str | None, http: Any) -> Capture:
    return Capture(capture.key, capture.date, capture.file, capture.offset, capture.kind,
                   status, capture.record_id, _media_type(content_type), capture.digest,
                   capture.size,
                   None if http is None else _header(http, "ETag"),
                   None if http is None else _header(http, "Last-Modified"))


def _revisit(capture: Capture, headers: Any) -> Capture:
    target = (headers.get_header("WARC-Refers-To-Target-URI") or "").strip()
    try:
        refers_to = canonicalize(target) if target else ""
    except UrlError:
        refers_to = ""
    return Capture(capture.key, capture.date, capture.file, capture.offset, capture.kind,
                   capture.status, capture.record_id, capture.media_type, capture.digest,
                   0, capture.etag, capture.last_modified, refers_to,
                   _nanoseconds(headers.get_header("WARC-Refers-To-Date")) or 0)


def _unusable(capture: Capture, note: str) -> Capture:
    return Capture(capture.key, capture.date, capture.file, capture.offset,
                   RecordKind.UNUSABLE, record_id=capture.record_id, note=note)


def _drain(record: Any, hasher: Any) -> tuple[int, bool]:
    """Read the record's payload through: its size, and whether the file ended inside it."""
    raw = record.raw_stream
    size = 0
    while block := raw.read(_BLOCK):
        size += len(block)
        if hasher is not None:
            hasher.update(block)
    return size, getattr(raw, "limit", 0) > 0


def _header(http: Any, name: str) -> str | None:
    value = http.get_header(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _media_type(content_type: str | None) -> str:
    """``type/subtype`` in lower case, with the charset parameter when there is one."""
    if not content_type:
        return ""
    main, *params = content_type.split(";")
    media = main.strip().lower()
    if "/" not in media:
        return ""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"'):
            return f"{media}; charset={value.strip().strip(chr(34)).lower()}"
    return media


def _nanoseconds(value: str | None) -> int | None:
    """A WARC-Date (ISO 8601, UTC, seconds or a fraction of them) in ns since the epoch."""
    if not value:
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    delta = when.replace(tzinfo=when.tzinfo or UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _content_coding(http: Any) -> str | None:
    """A Content-Encoding the payload has and warcio cannot decode, else None."""
    if http is None:
        return None
    value = (http.get_header("Content-Encoding") or "").strip().lower()
    codings = [c.strip() for c in value.split(",") if c.strip() and c.strip() != "identity"]
    if not codings:
        return None
    supported = set(BufferedReader.get_supported_decompressors()) | {"x-gzip"}
    return value if len(codings) > 1 or codings[0] not in supported else None


def _next_start(stream: IO[bytes], after: int, gzipped: bool) -> int | None:
    """Where the next record may start at or after ``after`` (None: nowhere)."""
    marker = _GZIP_MAGIC if gzipped else _WARC_LINE
    skip = 0 if gzipped else 1  # a WARC line starts after its newline
    stream.seek(max(after - skip, 0))
    position = max(after - skip, 0)
    tail = b""
    while block := stream.read(1 << 20):
        data = tail + block
        found = data.find(marker)
        if found >= 0:
            return position - len(tail) + found + skip
        tail = data[-(len(marker) - 1):]
        position += len(block)
    return None


def _warnings(file: str, skipped: list[str]) -> tuple[str, ...]:
    if not skipped:
        return ()
    return (f"{file}: {len(skipped)} record(s) whose target is not a valid http(s) URL "
            f"were skipped (the first: {skipped[0]!r})",)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(exc).__name__

