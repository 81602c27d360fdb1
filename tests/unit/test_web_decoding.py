from __future__ import annotations

import gzip
import zlib
from datetime import UTC, datetime

import brotli  # type: ignore[import-untyped]
import pytest

from kbsync.sources.web.decoding import ACCEPT_ENCODING, DecodingError, decoder_for
from kbsync.sources.web.fetch import parse_content_type, retry_after_seconds

TEXT = b"The quick brown fox jumps over the lazy dog. " * 200


def _decode(encoding: str | None, data: bytes, cap: int = 10_000_000, step: int = 7) -> bytes:
    decoder = decoder_for(encoding, cap)
    for i in range(0, len(data), step):
        decoder.feed(data[i : i + step])
    return decoder.finish()


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize(
    ("encoding", "encoded"),
    [
        (None, TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("GZIP", gzip.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", _raw_deflate(TEXT)),
        ("br", brotli.compress(TEXT)),
        ("gzip", gzip.compress(TEXT[:100]) + gzip.compress(TEXT[100:])),
    ],
)
def test_bodies_decode_in_small_pieces_to_the_original(
    encoding: str | None, encoded: bytes
) -> None:
    assert _decode(encoding, encoded) == TEXT


def test_br_is_advertised_because_brotli_is_installed() -> None:
    assert ACCEPT_ENCODING == "gzip, deflate, br"


BOMBS = {
    "gzip": gzip.compress(b"\0" * 20_000_000),
    "deflate": zlib.compress(b"\0" * 20_000_000),
    "br": brotli.compress(b"\0" * 20_000_000, quality=1),
}


@pytest.mark.parametrize("encoding", sorted(BOMBS))
def test_a_compression_bomb_stops_at_the_cap(encoding: str) -> None:
    bomb = BOMBS[encoding]
    assert len(bomb) < 100_000
    decoder = decoder_for(encoding, 1_000_000)
    with pytest.raises(DecodingError, match="max_decompressed_bytes=1000000") as caught:
        decoder.feed(bomb)
    assert caught.value.over_cap
    # What was held never exceeded the cap (plus the one byte that tells "over").
    assert len(decoder.buffer) <= 1_000_000  # type: ignore[attr-defined]


def test_truncate_mode_keeps_the_first_bytes_instead_of_failing() -> None:
    decoder = decoder_for("gzip", 100, truncate=True)
    decoder.feed(gzip.compress(TEXT))
    assert decoder.finish() == TEXT[:100]


def test_a_truncated_or_corrupt_compressed_body_is_an_error() -> None:
    whole = gzip.compress(TEXT)
    with pytest.raises(DecodingError, match="truncated"):
        _decode("gzip", whole[: len(whole) // 2])
    with pytest.raises(DecodingError, match="corrupt"):
        _decode("gzip", b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(DecodingError, match="truncated"):
        _decode("br", brotli.compress(TEXT)[:-10])


def test_an_empty_body_labelled_gzip_is_empty() -> None:
    assert _decode("gzip", b"") == b""


@pytest.mark.parametrize("encoding", ["compress", "zstd", "gzip, br", "bogus"])
def test_an_unsupported_content_encoding_is_an_error(encoding: str) -> None:
    with pytest.raises(DecodingError, match="unsupported Content-Encoding"):
        decoder_for(encoding, 100)


def test_retry_after_reads_delta_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(" 0 ", now) == 0.0
    assert retry_after_seconds("Wed, 01 Jan 2025 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("-5", now) is None
    assert retry_after_seconds(None, now) is None


def test_the_media_type_drops_parameters_and_defaults_to_html() -> None:
    assert parse_content_type("Text/HTML; charset=ISO-8859-1") == ("text/html", "ISO-8859-1")
    assert parse_content_type('text/plain; charset="utf-8"') == ("text/plain", "utf-8")
    assert parse_content_type("application/pdf") == ("application/pdf", None)
    assert parse_content_type(None) == ("text/html", None)
    assert parse_content_type("") == ("text/html", None)
