"""Content-Encoding decoders that stop at a size cap, so a compression bomb cannot fill memory.

kbsync reads the raw (still compressed) stream and decodes it here, step by
step, asking each decompressor for at most the bytes still allowed; a
few kilobytes of gzip that would inflate to gigabytes are stopped at the
cap without ever being inflated further. Supported: ``gzip`` (also
``x-gzip`` and several concatenated members), ``deflate`` (zlib-wrapped, or
raw deflate as some servers send it), ``identity``, and ``br`` when the
``brotli`` package (1.2 or later, whose decompressor can bound its output)
is installed: only then is ``br`` advertised in ``Accept-Encoding``.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any, Protocol

__all__ = [
    "ACCEPT_ENCODING",
    "BROTLI",
    "Decoder",
    "DecodingError",
    "decoder_for",
]


def _load_brotli() -> Any:
    # Imported by name: brotli ships no type information, and it is optional.
    try:
        module = importlib.import_module("brotli")
    except ImportError:
        return None
    # Only a decompressor that can bound its output protects against a bomb.
    return module if hasattr(module.Decompressor(), "can_accept_more_data") else None


BROTLI: Any = _load_brotli()
ACCEPT_ENCODING = "gzip, deflate, br" if BROTLI is not None else "gzip, deflate"


class DecodingError(Exception):
    """The body could not be decoded: over the cap, corrupt, truncated, or an unknown coding.

    ``over_cap`` tells a cap violation from damage.
    """

    def __init__(self, message: str, *, over_cap: bool = False) -> None:
        super().__init__(message)
        self.over_cap = over_cap


class Decoder(Protocol):
    """Feed raw chunks in, take the decoded body out at the end."""

    def feed(self, data: bytes) -> None: ...

    def finish(self, *, partial: bool = False) -> bytes:
        """The decoded body; with ``partial`` an unfinished stream is not an error."""
        ...


def decoder_for(content_encoding: str | None, cap: int, *, truncate: bool = False) -> Decoder:
    """A decoder for the ``Content-Encoding`` header value, stopping at ``cap`` decoded bytes.

    Over the cap it raises :class:`DecodingError`, or with ``truncate`` keeps
    the first ``cap`` bytes and ignores the rest (robots.txt: only the start counts).
    """
    codings = [
        c.strip().lower()
        for c in (content_encoding or "").split(",")
        if c.strip() and c.strip().lower() != "identity"
    ]
    if not codings:
        return _Identity(cap, truncate)
    if len(codings) > 1:
        raise DecodingError(f"unsupported Content-Encoding {content_encoding!r} (stacked codings)")
    coding = codings[0]
    if coding in ("gzip", "x-gzip"):
        return _Zlib(cap, truncate, wbits=16 + zlib.MAX_WBITS)
    if coding == "deflate":
        return _Zlib(cap, truncate, wbits=None)
    if coding == "br" and BROTLI is not None:
        return _Brotli(cap, truncate)
    raise DecodingError(f"unsupported Content-Encoding {content_encoding!r}")


class _Sink:
    """Collects decoded bytes and enforces the cap."""

    def __init__(self, cap: int, truncate: bool) -> None:
        self.cap = cap
        self.truncate = truncate
        self.buffer = bytearray()
        self.full = False

    @property
    def room(self) -> int:
        return self.cap - len(self.buffer)

    def put(self, data: bytes) -> None:
        if len(data) > self.room:
            if not self.truncate:
                raise DecodingError(
                    f"decoded body exceeds max_decompressed_bytes={self.cap}", over_cap=True
                )
            data = data[: self.room]
            self.full = True
        self.buffer += data


class _Identity(_Sink):
    def feed(self, data: bytes) -> None:
        if not self.full:
            self.put(data)

    def finish(self, *, partial: bool = False) -> bytes:
        return bytes(self.buffer)


class _Zlib(_Sink):
    def __init__(self, cap: int, truncate: bool, *, wbits: int | None) -> None:
        super().__init__(cap, truncate)
        # None: deflate, whose wrapper is known only from the first bytes.
        self._wbits = wbits if wbits is not None else zlib.MAX_WBITS
        self._head = b""
        self._fed = False
        self._d: Any = None if wbits is None else zlib.decompressobj(wbits)

    def feed(self, data: bytes) -> None:
        if self.full or not data:
            return
        self._fed = True
        if self._d is None:
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            # RFC 9110 says zlib-wrapped, but some servers send raw deflate: the
            # zlib header is a CMF/FLG pair whose 16-bit value is a multiple of 31.
            zlib_wrapped = (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0
            self._wbits = zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS
            self._d = zlib.decompressobj(self._wbits)
        try:
            while data and not self.full:
                if self._d.eof:
                    # Another gzip member follows: concatenated members are one body.
                    self._d = zlib.decompressobj(self._wbits)
                # Ask for one byte more than the room left: enough to tell "over the
                # cap" without inflating any further.
                self.put(self._d.decompress(data, self.room + 1))
                data = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
        except zlib.error as exc:
            raise DecodingError(f"corrupt compressed body: {exc}") from exc

    def finish(self, *, partial: bool = False) -> bytes:
        if self.full or partial or not self._fed:
            # Nothing fed: an empty body, which some servers label gzip anyway.
            return bytes(self.buffer)
        if self._d is None:
            if self._head:
                raise DecodingError("truncated compressed body")
            return b""
        try:
            self.put(self._d.flush())
        except zlib.error as exc:
            raise DecodingError(f"corrupt compressed body: {exc}") from exc
        if not self._d.eof:
            raise DecodingError("truncated compressed body (the stream ended early)")
        return bytes(self.buffer)


class _Brotli(_Sink):
    def __init__(self, cap: int, truncate: bool) -> None:
        super().__init__(cap, truncate)
        self._d: Any = BROTLI.Decompressor()

    def feed(self, data: bytes) -> None:
        if self.full:
            return
        try:
            self.put(self._d.process(data, output_buffer_limit=self.room + 1))
            while not self.full and not self._d.can_accept_more_data():
                self.put(self._d.process(b"", output_buffer_limit=self.room + 1))
        except BROTLI.error as exc:
            raise DecodingError(f"corrupt compressed body: {exc}") from exc

    def finish(self, *, partial: bool = False) -> bytes:
        if not (self.full or partial) and not self._d.is_finished():
            raise DecodingError("truncated compressed body (the stream ended early)")
        return bytes(self.buffer)
