"""Hostile inputs, synced in a separate measured process: bounded memory, no hang, never opened.

Each case is a folder with the two good documents of ``test_bad_inputs`` and one
hostile file. All cases run in one child process (``measured_sync``) after a
warm-up sync, each with its own knowledge base, so each case's peak memory is
measured from the same starting point. The rule: the hostile file fails alone
with a message for a person (or is indexed cleanly, or, when no extractor reads
its type, is no document and is never parsed), the good documents are
indexed, ``verify`` is clean, the sync adds less than ``EXTRA_MEMORY_MAX`` of
resident memory, and a file rejected by its size is never opened.

Wall time is recorded, not asserted (the machine is shared and noisy); a sync
that hangs is cut by the child after two minutes and fails its case.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsync.engine import init_config
from tests.integration.measured_sync import measure_in_child
from tests.integration.test_bad_inputs import (
    GOOD,
    _assert_readable,
    _operators_pdf,
    _pdf,
    _pdf_with_stream,
)

EXTRA_MEMORY_MAX = 256 * 1024 * 1024
GIB = 1024**3
RESULTS_ENV = "KBSYNC_BOUNDED_RESULTS"
"""When set, the measured figures of every case are written to this JSON file."""


def _entity_bomb(levels: int = 10, fan_out: int = 10) -> str:
    """An internal DTD subset whose last entity expands to fan_out ** levels copies of "lol"."""
    lines = ['<!ENTITY lol0 "lol">']
    for level in range(1, levels):
        lines.append(f'<!ENTITY lol{level} "{f"&lol{level - 1};" * fan_out}">')
    return "\n".join(lines)


def _deflate_zeros(mebibytes: int) -> bytes:
    """A zlib stream of ``mebibytes`` MiB of zero bytes, made in a fraction of a second.

    One MiB is compressed once and ended with a full flush, which makes the piece
    independent of what came before, so repeating it is a valid stream.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = bytes(1 << 20)
    piece = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(mebibytes):
        checksum = zlib.adler32(block, checksum)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    return b"\x78\xda" + piece * mebibytes + end + checksum.to_bytes(4, "big")


def _sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(GIB)


def _write(make: Callable[[], bytes]) -> Callable[[Path], None]:
    """Write what ``make`` returns; made when the case is built, not when tests are collected."""
    return lambda path: path.write_bytes(make())


def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with (zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
          archive.open("inner.md", "w", force_zip64=True) as member):
        block = bytes(1 << 20)
        for _ in range(256):
            member.write(block)
    return out.getvalue()


def _gzip_bomb() -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        block = bytes(1 << 20)
        for _ in range(256):
            f.write(block)
    return out.getvalue()


def _deep(opening: bytes, closing: bytes) -> Callable[[], bytes]:
    return lambda: (b"<html><body>" + opening * DEEP + b"abyssal trench" + closing * DEEP
                    + b"</body></html>")


LAUGHS = _entity_bomb()
DEEP = 100_000

# name -> (file name, how to make it, expectation, words): "failed" with one of the words in
# the message, "indexed" with every word in the text, or "skipped" (no extractor reads it).
CASES: dict[str, tuple[str, Callable[[Path], None], str, tuple[str, ...]]] = {
    "sparse-1gib": ("huge.txt", _sparse, "failed", ("over the cap",)),
    "pdf-flate-1gib": ("bomb.pdf", _write(lambda: _pdf_with_stream(_deflate_zeros(1024))),
                       "failed", ("decompress", "damaged")),
    "pdf-flate-operators": ("ops.pdf", _write(_operators_pdf), "failed", ("decompression bomb",)),
    "gzip-as-text": ("notes.txt", _write(_gzip_bomb), "failed", ("gzip",)),
    "zip-as-markdown": ("notes.md", _write(_zip_bomb), "failed", ("ZIP",)),
    "truncated-pdf": ("cut.pdf", _write(lambda: _pdf("Truncated manual about cranes")[:300]),
                      "failed", ("damaged", "unreadable")),
    "deep-html": ("deep.html", _write(_deep(b"<div>", b"</div>")), "indexed", ("abyssal trench",)),
    "deep-unclosed-html": ("unclosed.html", _write(_deep(b"<span><b>", b"")), "indexed",
                           ("abyssal trench",)),
    "billion-laughs-html": ("laughs.html", _write(lambda: (
        f'<?xml version="1.0"?>\n<!DOCTYPE html [\n{LAUGHS}\n]>\n<html><body>'
        "<p>Laughing matters reviewed.</p><p>&lol9;</p></body></html>").encode()),
        "indexed", ("Laughing matters",)),
    "billion-laughs-svg-in-html": ("svg.html", _write(lambda: (
        f"<html><body><p>Vector drawings explained.</p><svg><!DOCTYPE svg [\n{LAUGHS}\n]>"
        "<text>&lol9;</text></svg></body></html>").encode()),
        "indexed", ("Vector drawings",)),
    "billion-laughs-xhtml": ("laughs.xhtml", _write(lambda: (
        f'<?xml version="1.0"?>\n<!DOCTYPE html [\n{LAUGHS}\n]>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>&lol9;</p></body></html>').encode()),
        "skipped", ()),
    "billion-laughs-xml": ("laughs.xml", _write(lambda: (
        f'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n{LAUGHS}\n]>\n<lolz>&lol9;</lolz>').encode()),
        "skipped", ()),
    "billion-laughs-markdown": ("laughs.md", _write(lambda: (
        f"# Laughs\n\n<!DOCTYPE x [\n{LAUGHS}\n]>\n\n&lol9; and prose\n").encode()),
        "indexed", ("prose",)),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """Build every case's knowledge base, sync them all in one measured child process."""
    base = tmp_path_factory.mktemp("bounded")
    kbs: list[Path] = []
    for name, (file_name, make, _, _) in {"warmup": _WARMUP, **CASES}.items():
        kb = base / name
        docs = kb / "docs"
        docs.mkdir(parents=True)
        for good, text in GOOD.items():
            (docs / good).write_text(text, encoding="utf-8")
        make(docs / file_name)
        init_config(kb, ["docs"])
        kbs.append(kb)
    results = dict(zip(CASES, measure_in_child(kbs[0], kbs[1:]), strict=True))
    if os.environ.get(RESULTS_ENV):
        figures = {name: {k: r.get(k) for k in ("seconds", "extra_rss_bytes", "failures")}
                   for name, r in results.items()}
        Path(os.environ[RESULTS_ENV]).write_text(json.dumps(figures, indent=2))
    return results


_WARMUP = ("warm.pdf", _write(lambda: _pdf("Warm up every extractor")), "indexed", ())


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_file_fails_alone_or_is_indexed_within_bounded_memory(
    measured: dict[str, dict[str, Any]], case: str
) -> None:
    file_name, _, expected, words = CASES[case]
    result = measured[case]
    assert not result["hung"], f"{case}: the sync hung"
    assert result["verify"] == []
    assert result["extra_rss_bytes"] < EXTRA_MEMORY_MAX, result["extra_rss_bytes"]
    for good in GOOD:
        assert good in result["keys"]
    if expected == "skipped":  # no extractor reads the type: not a document, never parsed
        assert result["failures"] == {}, result["failures"]
        assert file_name not in result["keys"]
        assert result["actions"]["new"] == 2
    elif expected == "failed":
        assert set(result["failures"]) == {file_name}, result["failures"]
        message = result["failures"][file_name]
        _assert_readable(message)
        assert any(w.lower() in message.lower() for w in words), message
        assert file_name not in result["keys"]
        assert result["actions"]["new"] == 2
    else:
        assert result["failures"] == {}, result["failures"]
        assert file_name in result["keys"]
        assert result["actions"]["new"] == 3
        text = result["texts"][file_name]
        for word in words:
            assert word in text, text[:300]
        assert "lollollol" not in text  # no entity was expanded


def test_a_sparse_file_over_the_size_cap_is_never_opened(
    measured: dict[str, dict[str, Any]],
) -> None:
    result = measured["sparse-1gib"]
    opened = [p for p in result["opened"] if os.path.basename(p) == "huge.txt"]
    assert opened == []
    assert any(os.path.basename(p) == "alpha.txt" for p in result["opened"]), (
        "the audit hook saw no document opened at all"
    )
