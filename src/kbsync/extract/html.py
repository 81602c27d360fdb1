"""HTML: the main content found by trafilatura, split into sections at its headings.

Navigation, footers and other boilerplate stay out of the text, so a changed
menu does not change every page's text hash. A page where trafilatura finds no
main content falls back to all the text of its body, read with the standard
library's parser: a short page is still a document.

trafilatura also drops lists of links as boilerplate, and on a hub page (a
home page, a blog's index: a short intro and a list of posts) that list is
what changes. So the link lists of the content area (outside ``nav``,
``header``, ``footer``, ``aside`` and their ARIA roles) that trafilatura left
out are added as sections of their own when the page is a hub: its main text
is short (under HUB_MAX_WORDS words) or its link lists are at least a quarter
of it. An article's "related posts" box stays out.
"""

from __future__ import annotations

import re
from copy import deepcopy
from html.parser import HTMLParser
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.text import TITLE_MAX_CHARS, charset_of, decode, replacement_warnings
from kbsync.model import Record, Section

__all__ = ["HtmlExtractor", "declared_charset", "html_to_text"]

_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE
)

_METADATA_FIELDS = ("author", "date", "url", "sitename", "language", "license")
"""Document fields of trafilatura kept as metadata. Never ``filedate`` (the day of
extraction) or ``fingerprint``: metadata must depend on the page alone."""

_HEADING_LEVEL = re.compile(r"h([1-6])")

HUB_MAX_WORDS = 200
"""A page whose main text has fewer words than this has its link lists in its text."""
HUB_LIST_SHARE = 0.25
"""Or one whose link lists have at least this share of the words of its main text."""
_MIN_LIST_ITEMS = 3
_CHROME_TAGS = frozenset({"nav", "header", "footer", "aside", "form", "menu"})
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu",
                           "menubar", "search"})
_CHROME_NAMES = re.compile(r"(?:^|[-_\s])(?:nav|navbar|navigation|menu|breadcrumbs?|sidebar|"
                           r"footer|header|toc|pagination|pager|share|social|skip)(?:$|[-_\s])",
                           re.IGNORECASE)


class HtmlExtractor:
    """HTML pages: trafilatura's main content; title, description and page metadata."""

    def __init__(self, *, strict_decoding: bool = False) -> None:
        self.strict_decoding = strict_decoding  # see TextExtractor

    @property
    def identity(self) -> str:
        """Name, library and version; the trafilatura settings below belong to it."""
        return "html-trafilatura-v2"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Decode (BOM, the HTTP charset, then ``<meta charset>``), extract, split at headings."""
        try:
            import trafilatura
        except ImportError as exc:
            raise DependencyMissingError("HTML extraction", "html", "trafilatura", exc) from exc

        declared = charset_of(media_type) or declared_charset(data)
        decoded = decode(data, locator, declared_encoding=declared, strict=self.strict_decoding)
        text = decoded.text
        url = locator if locator.startswith(("http://", "https://")) else None
        document = None
        if text.strip():
            try:
                document = trafilatura.bare_extraction(
                    text,
                    url=url,
                    output_format="python",
                    include_formatting=True,
                    include_comments=False,
                    include_tables=True,
                    include_images=False,
                    include_links=False,
                    deduplicate=False,  # trafilatura's cache is process-wide state
                    with_metadata=True,
                    # Only dates marked up in the page: the extensive search guesses
                    # from free text and from the day it runs.
                    date_extraction_params={"extensive_search": False, "original_date": True},
                )
            except Exception as exc:  # a parser bug on one page must not end the run
                raise ExtractionError(
                    locator, f"trafilatura failed on this page ({type(exc).__name__}: {exc})"
                ) from exc
        sections = _sections(document) if document is not None else ()
        if sections:
            sections = (*sections, *_hub_lists(text, sections))
        fallback: _PageText | None = None
        if not sections:
            fallback = _PageText.parse(text)
            body = fallback.body_text()
            sections = (Section(heading=None, text=body),) if body else ()

        title = _field(document, "title")
        description = _field(document, "description")
        if title is None or description is None:
            fallback = fallback or _PageText.parse(text)
            title = title or fallback.title
            description = description or fallback.description
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=description,
            sections=sections,
            metadata=_metadata(document),
            warnings=replacement_warnings(decoded),
        )


def declared_charset(data: bytes) -> str | None:
    """The encoding a page declares in a ``<meta>`` tag within its first 4 KiB, if any."""
    match = _META_CHARSET.search(data[:4096])
    return match.group(1).decode("ascii") if match else None


def html_to_text(markup: str) -> str:
    """All visible text of an HTML document's body, block elements on their own lines."""
    return _PageText.parse(markup).body_text()


def _sections(document: Any) -> tuple[Section, ...]:
    """Split trafilatura's XML body at its top-level ``<head>`` elements into sections.

    Headings are found in the XML, not in the Markdown rendering, where a line of
    a ``<pre>`` block starting with ``#`` would pass for one. Each part is
    rendered by trafilatura's own XML-to-Markdown conversion.
    """
    from trafilatura.xml import xmltotxt

    body = getattr(document, "body", None)
    if body is None or len(body) == 0:
        text = (_field(document, "text") or "").strip()
        return (Section(heading=None, text=text),) if text else ()

    sections: list[Section] = []
    heading: str | None = None
    level = 0
    part = body.makeelement("body", {})
    part.text = body.text  # loose text before the first element, if any

    def flush() -> None:
        text = xmltotxt(part, True).strip() if len(part) or part.text else ""
        if heading is not None or text:
            sections.append(Section(heading=heading, text=text, level=level))

    for child in body:
        if child.tag == "head":
            flush()
            part = body.makeelement("body", {})
            heading = " ".join("".join(child.itertext()).split()) or None
            found = _HEADING_LEVEL.fullmatch(child.get("rend") or "")
            level = int(found.group(1)) if found else 1
            if heading is None:
                level = 0
        else:
            part.append(deepcopy(child))  # appending the child itself would move it
    flush()
    return tuple(sections)


def _hub_lists(markup: str, sections: tuple[Section, ...]) -> tuple[Section, ...]:
    """The content area's link lists that trafilatura left out, when the page is a hub."""
    try:
        import lxml.html  # type: ignore[import-untyped]  # no stubs shipped
        from lxml import etree
    except ImportError:  # trafilatura depends on lxml; without it, no lists
        return ()
    try:
        root = lxml.html.document_fromstring(markup)
    except (etree.ParserError, ValueError):
        return ()
    extracted = " ".join(" ".join(s.text.split()) for s in sections)
    main_words = len(extracted.split())
    found: list[Section] = []
    list_words = 0
    for element in root.iter("ul", "ol"):
        if _in_chrome(element) or any(a.tag in ("ul", "ol") for a in element.iterancestors()):
            continue
        items = _linked_items(element)
        if len(items) < _MIN_LIST_ITEMS or all(item in extracted for item in items):
            continue
        found.append(Section(heading=_heading_before(element), text="\n".join(items), level=2))
        list_words += sum(len(item.split()) for item in items)
    if not found or (main_words >= HUB_MAX_WORDS and list_words < HUB_LIST_SHARE * main_words):
        return ()
    return tuple(found)


def _in_chrome(element: Any) -> bool:
    """Whether an element sits in the page's navigation, header, footer or sidebar."""
    for node in (element, *element.iterancestors()):
        if not isinstance(node.tag, str):
            continue
        if node.tag in _CHROME_TAGS or (node.get("role") or "").lower() in _CHROME_ROLES:
            return True
        names = f"{node.get('id') or ''} {node.get('class') or ''}"
        if _CHROME_NAMES.search(names):
            return True
    return False


def _linked_items(element: Any) -> list[str]:
    """The text of the list's items, when (nearly) every item is mostly a link; else none."""
    items = [child for child in element if child.tag == "li"]
    texts: list[str] = []
    linked = 0
    for item in items:
        text = " ".join(item.text_content().split())
        if not text:
            continue
        anchor = " ".join(" ".join(a.text_content().split()) for a in item.iter("a"))
        if anchor and len(anchor) * 2 >= len(text):
            linked += 1
        texts.append(text)
    return texts if texts and linked * 5 >= len(items) * 4 else []


def _heading_before(element: Any) -> str | None:
    """The text of the heading just before a list (among its previous siblings), if any."""
    for sibling in element.itersiblings(preceding=True):
        if not isinstance(sibling.tag, str):
            continue
        if _HEADING_LEVEL.fullmatch(sibling.tag):
            return " ".join(sibling.text_content().split()) or None
        if sibling.tag in ("ul", "ol", "p", "div", "section", "table"):
            return None
    return None


def _field(document: Any, name: str) -> str | None:
    """A text field of trafilatura's document, whitespace collapsed, or None when blank."""
    value = getattr(document, name, None) if document is not None else None
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value if v)
    if not isinstance(value, str):
        return None
    collapsed = " ".join(value.split())
    return collapsed or None


def _metadata(document: Any) -> tuple[tuple[str, str], ...]:
    """The page metadata kept with the record, sorted by name."""
    pairs = [(name, _field(document, name)) for name in (*_METADATA_FIELDS, "categories", "tags")]
    return tuple(sorted((name, value) for name, value in pairs if value))


class _PageText(HTMLParser):
    """Title, meta description and body text of a page, by the standard library's parser."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "title"})
    _BLOCK = frozenset(
        {
            "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl",
            "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4",
            "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
            "summary", "table", "td", "th", "tr", "ul",
        }
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: str | None = None
        self.description: str | None = None
        self._title_parts: list[str] = []
        self._in_title = False
        self._skip_depth = 0
        self._lines: list[list[str]] = [[]]

    @classmethod
    def parse(cls, markup: str) -> _PageText:
        """Parse a whole document."""
        parser = cls()
        parser.feed(markup)
        parser.close()
        title = " ".join("".join(parser._title_parts).split())
        parser.title = title or None
        return parser

    def body_text(self) -> str:
        """The text outside skipped elements, one line per block, blank lines dropped."""
        lines = (" ".join("".join(parts).split()) for parts in self._lines)
        return "\n".join(line for line in lines if line)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag == "meta":
            named = {k.lower(): (v or "") for k, v in attrs}
            kind = (named.get("name") or named.get("property") or "").lower()
            if kind in ("description", "og:description") and self.description is None:
                self.description = " ".join(named.get("content", "").split()) or None
        if tag in self._SKIP:
            self._skip_depth += 1
        if tag in self._BLOCK:
            self._lines.append([])

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self._SKIP:  # a self-closing skipped tag opens nothing to skip
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip_depth:
            self._skip_depth -= 1
        if tag in self._BLOCK:
            self._lines.append([])

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """``<![...`` up to the next ``>`` is a bogus comment, as HTML parsers read it.

        Why: the standard library's parser raises AssertionError on an unknown
        keyword there (``<![FOO[``), which would fail the whole page.
        """
        end = self.rawdata.find(">", i + 3)
        return -1 if end < 0 else end + 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title_parts.append(data)
        elif not self._skip_depth:
            self._lines[-1].append(data)
