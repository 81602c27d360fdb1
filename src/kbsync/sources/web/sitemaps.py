"""Sitemaps (sitemaps.org): XML ``urlset`` and ``sitemapindex`` files, gzipped or not, or text.

Parsed with the standard library's ``xml.etree`` and refused outright when
they carry a DOCTYPE: a sitemap never needs one, and a document type is what
entity-expansion attacks ("billion laughs") and external entities need.
``lastmod`` is kept as a hint only: it is often wrong or missing, so kbsync's
gates rely on HTTP validators and content hashes, never on it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from kbsync.errors import SourceError
from kbsync.sources.web.decoding import DecodingError, decoder_for

__all__ = [
    "MAX_ENTRIES",
    "Sitemap",
    "SitemapEntry",
    "SitemapError",
    "SitemapKind",
    "lastmod_seconds",
    "parse_sitemap",
]

MAX_ENTRIES = 50_000
"""The sitemaps.org limit per file; entries past it are ignored."""

_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


class SitemapError(SourceError, ValueError):
    """The file is not a sitemap kbsync will read; the message says why."""


class SitemapKind(StrEnum):
    """A list of pages, or a list of further sitemaps."""

    URLSET = "urlset"
    INDEX = "sitemapindex"


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One ``<loc>`` (as written) and its ``<lastmod>`` hint, if any."""

    loc: str
    lastmod: str | None = None


@dataclass(frozen=True, slots=True)
class Sitemap:
    """A parsed sitemap file."""

    kind: SitemapKind
    entries: tuple[SitemapEntry, ...]


def parse_sitemap(data: bytes, max_decompressed_bytes: int) -> Sitemap:
    """Parse a sitemap file's bytes (gzip is detected by its magic number and inflated with a cap).

    Raises :class:`SitemapError` when the file is malformed, carries a DOCTYPE
    or entity declaration, or inflates past ``max_decompressed_bytes``.
    """
    if data[:2] == b"\x1f\x8b":
        decoder = decoder_for("gzip", max_decompressed_bytes)
        try:
            decoder.feed(data)
            data = decoder.finish()
        except DecodingError as exc:
            raise SitemapError(f"gzipped sitemap: {exc}") from exc
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if (
        not head.startswith(b"<")
        and not head.startswith(b"\xff\xfe")
        and not (head.startswith(b"\xfe\xff"))
    ):
        return _parse_text(head)
    return _parse_xml(data)


def _parse_text(data: bytes) -> Sitemap:
    """The text form: one absolute URL per line."""
    lines = data.decode("utf-8", "replace").splitlines()
    entries = [SitemapEntry(line.strip()) for line in lines if line.strip()]
    return Sitemap(SitemapKind.URLSET, tuple(entries[:MAX_ENTRIES]))


class _NoDoctype(ET.TreeBuilder):
    """Builds the tree but stops at a document type declaration, before any entity is used."""

    def doctype(self, name: str, pubid: str, system: str) -> None:
        raise SitemapError("a DOCTYPE is not allowed in a sitemap")


def _parse_xml(data: bytes) -> Sitemap:
    # The byte check catches declarations in ASCII-compatible encodings before the
    # parser sees them; the builder hook catches them in any other encoding.
    if _DECLARATION.search(data):
        raise SitemapError("a DOCTYPE or ENTITY declaration is not allowed in a sitemap")
    parser = ET.XMLParser(target=_NoDoctype())
    try:
        parser.feed(data)
        root = parser.close()
    except SitemapError:
        raise
    except (ET.ParseError, LookupError, ValueError) as exc:  # LookupError: an unknown encoding
        raise SitemapError(f"malformed XML: {exc}") from exc
    kind_name = _local(root.tag)
    if kind_name == "urlset":
        kind, child = SitemapKind.URLSET, "url"
    elif kind_name == "sitemapindex":
        kind, child = SitemapKind.INDEX, "sitemap"
    else:
        raise SitemapError(f"not a sitemap: the root element is <{kind_name}>")
    entries: list[SitemapEntry] = []
    for element in root:
        if _local(element.tag) != child:
            continue
        loc: str | None = None
        lastmod: str | None = None
        for field in element:
            name = _local(field.tag)
            if name == "loc" and field.text:
                loc = field.text.strip()
            elif name == "lastmod" and field.text:
                lastmod = field.text.strip()
        if loc:
            entries.append(SitemapEntry(loc, lastmod))
            if len(entries) >= MAX_ENTRIES:
                break
    return Sitemap(kind, tuple(entries))


def _local(tag: str) -> str:
    """The local name of a possibly namespaced tag (``{ns}url`` -> ``url``)."""
    return tag.rsplit("}", 1)[-1]


_YEAR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def lastmod_seconds(text: str) -> float | None:
    """A ``<lastmod>`` (W3C datetime: a year, a date, or a date and time) as seconds since
    the epoch; None when unreadable. Without a zone it is read as UTC."""
    text = text.strip()
    short = _YEAR_MONTH.match(text)
    if short is not None:
        text = f"{short.group(1)}-{short.group(2) or '01'}-01"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
