"""Links and visible text of an HTML page, with the standard library's ``html.parser``.

Only ``<a href>`` (and one ``<base href>``) lead anywhere: images, scripts
and stylesheets are not documents. The visible text (outside script, style
and template elements) serves the soft-404 comparison only; the real
extraction of a page is the extractor's job, not the source's.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from kbsync.sources.web.urls import UrlError, canonicalize

__all__ = ["HTML_TYPES", "ParsedPage", "decode_text", "parse_html", "resolve_links"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HIDDEN = frozenset({"script", "style", "template", "noscript"})


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """Raw ``href`` values in document order, the first ``<base href>``, and the visible text."""

    hrefs: tuple[str, ...]
    base: str | None
    text: str


def decode_text(body: bytes, charset: str | None) -> str:
    """Text of a body: the declared charset, else a ``<meta charset>`` near the start, else UTF-8.

    Undecodable bytes become U+FFFD: links and a soft-404 fingerprint survive a few.
    """
    for candidate in (charset, _sniff_charset(body), "utf-8"):
        if not candidate:
            continue
        try:
            codecs.lookup(candidate)
        except LookupError:
            continue
        return body.decode(candidate, "replace")
    return body.decode("utf-8", "replace")  # pragma: no cover - utf-8 always exists


def parse_html(html: str) -> ParsedPage:
    """Collect hrefs, the base and the visible text; never raises on broken markup."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return ParsedPage(tuple(parser.hrefs), parser.base, " ".join(parser.text))


def resolve_links(page: ParsedPage, page_url: str) -> list[str]:
    """Canonical absolute http(s) URLs of the page's links, first occurrence first."""
    base = page_url
    if page.base:
        try:
            base = canonicalize(page.base, base=page_url)
        except UrlError:
            base = page_url
    seen: set[str] = set()
    links: list[str] = []
    for href in page.hrefs:
        if href.startswith("#"):
            continue
        try:
            url = canonicalize(href, base=base)
        except UrlError:
            continue  # mailto:, javascript:, malformed: not pages to crawl
        if url not in seen:
            seen.add(url)
            links.append(url)
    return links


def _sniff_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:2048])
    return match.group(1).decode("ascii") if match else None


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None
        self.text: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self._hidden += 1
            return
        if tag not in ("a", "base"):
            return
        href = next((v for k, v in attrs if k == "href" and v), None)
        if href is None:
            return
        if tag == "a":
            self.hrefs.append(href.strip())
        elif self.base is None:
            self.base = href.strip()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <script/> and friends open nothing, so they must not count as hidden.
        if tag not in _HIDDEN:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.text.append(data.strip())
