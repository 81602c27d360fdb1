"""EPUB: the spine's XHTML documents in reading order with ebooklib, headings to sections.

ebooklib reads the container and package document (metadata, manifest, spine);
each spine document's body is walked with lxml: ``h1``–``h6`` open sections,
block elements (paragraphs, list items, preformatted text, table rows as `` | ``
lines) make the body. The navigation document and scripts are skipped.

Title, author, language and description come from the Dublin Core metadata,
``modified`` from the package's ``dcterms:modified``. A book whose content is
encrypted (DRM, listed in ``META-INF/encryption.xml``) fails; font obfuscation,
which only scrambles embedded fonts, does not.
"""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.office_zip import check_zip, describe
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["EpubExtractor"]

_FONT_OBFUSCATION = frozenset({
    "http://www.idpf.org/2008/embedding",
    "http://ns.adobe.com/pdf/enc#RC",
})
_ALGORITHM = re.compile(rb"""EncryptionMethod[^>]*?Algorithm\s*=\s*["']([^"']+)["']""")
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_SKIPPED = frozenset({"head", "script", "style", "nav", "template"})
# Elements that hold their own line of text; an element with none of these (or a
# heading) below it is one paragraph, its inline markup flattened.
_BLOCKS = frozenset({
    "p", "div", "li", "pre", "blockquote", "dt", "dd", "figcaption", "caption", "address",
    "section", "article", "aside", "header", "footer", "table", "tr", "ul", "ol", "dl",
    "figure", "main", "hr", "br",
})
_SPACES = re.compile(r"\s+")


class EpubExtractor:
    """EPUB 2 and 3 books: spine order, headings to sections, Dublin Core metadata."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "epub-ebooklib-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Every spine document's text; a damaged or encrypted book is an ExtractionError."""
        try:
            import lxml.html  # type: ignore[import-untyped]  # no stubs shipped
            from ebooklib import epub
        except ImportError as exc:
            raise DependencyMissingError("EPUB extraction", "office", "ebooklib", exc) from exc
        archive = check_zip(data, locator, "EPUB")
        _check_not_encrypted(archive, locator)
        try:
            with warnings.catch_warnings():  # ebooklib warns about its own options
                warnings.simplefilter("ignore")
                book: Any = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
            sections: list[Section] = []
            for idref, _linear in book.spine:
                item = book.get_item_with_id(idref)
                if item is None or type(item).__name__ == "EpubNav":
                    continue
                content = item.get_content()
                if not content.strip():
                    continue
                root = lxml.html.document_fromstring(content)
                sections.extend(_sections(root))
        except Exception as exc:  # a damaged book can fail anywhere in the parsers
            raise ExtractionError(locator, f"is a damaged or unreadable EPUB file ({describe(exc)})"
                                  ) from exc
        metadata = {
            "author": _dc(book, "creator"),
            "language": _dc(book, "language"),
            "modified": _modified(book),
        }
        title = _dc(book, "title") or next((s.heading for s in sections if s.heading), None)
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=_dc(book, "description"),
            sections=_merged(sections),
            metadata=tuple(sorted((k, v) for k, v in metadata.items() if v)),
        )


def _check_not_encrypted(archive: zipfile.ZipFile, locator: str) -> None:
    """Fail for a book whose content (not only its fonts) is encrypted."""
    try:
        listing = archive.read("META-INF/encryption.xml")
    except KeyError:
        return
    except Exception as exc:
        raise ExtractionError(locator, f"is a damaged EPUB file ({describe(exc)})") from exc
    algorithms = {m.decode("ascii", "replace") for m in _ALGORITHM.findall(listing)}
    if algorithms - _FONT_OBFUSCATION:
        raise ExtractionError(
            locator, "is an encrypted (DRM-protected) EPUB: META-INF/encryption.xml lists "
            f"content encrypted with {', '.join(sorted(algorithms - _FONT_OBFUSCATION))}; "
            "not extracted",
        )


def _sections(root: Any) -> Iterator[Section]:
    """One spine document's headings and paragraphs as sections."""
    heading: str | None = None
    level = 0
    body: list[str] = []
    for found, text in _blocks(root):
        if found:
            if heading is not None or body:
                yield Section(heading=heading, text="\n\n".join(body), level=level)
            heading, level, body = text, found, []
        else:
            body.append(text)
    if heading is not None or body:
        yield Section(heading=heading, text="\n\n".join(body), level=level)


def _blocks(element: Any) -> Iterator[tuple[int, str]]:
    """(heading level, text) or (0, paragraph text) for the blocks below ``element``."""
    tag = element.tag.lower() if isinstance(element.tag, str) else ""
    if tag in _SKIPPED or not isinstance(element.tag, str):  # comments, processing instructions
        return
    if tag in _HEADINGS:
        text = _collapse(element.text_content())
        if text:
            yield _HEADINGS[tag], text
        return
    if tag == "tr":
        cells = [_collapse(c.text_content()) for c in element
                 if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")]
        if any(cells):
            yield 0, " | ".join(cells)
        return
    if not any(isinstance(d.tag, str) and (d.tag.lower() in _BLOCKS or d.tag.lower() in _HEADINGS)
               for d in element.iterdescendants()):
        text = element.text_content().strip("\n") if tag == "pre" else _collapse(
            element.text_content())
        if text:
            yield 0, text
        return
    if element.text and element.text.strip():
        yield 0, _collapse(element.text)
    for child in element:
        yield from _blocks(child)
        if child.tail and child.tail.strip():
            yield 0, _collapse(child.tail)


def _merged(sections: list[Section]) -> tuple[Section, ...]:
    """Headingless sections that follow another (a chapter split over files) joined to it."""
    merged: list[Section] = []
    for section in sections:
        if merged and section.heading is None:
            last = merged[-1]
            text = "\n\n".join(t for t in (last.text, section.text) if t)
            merged[-1] = Section(heading=last.heading, text=text, level=last.level)
        else:
            merged.append(section)
    return tuple(merged)


def _dc(book: Any, name: str) -> str | None:
    """The first Dublin Core value of ``name``, whitespace collapsed, or None."""
    values = book.get_metadata("DC", name) or []
    for value, _attributes in values:
        if isinstance(value, str) and value.strip():
            return _collapse(value)
    return None


def _modified(book: Any) -> str | None:
    """The package's ``dcterms:modified`` (EPUB 3), or None."""
    for value, attributes in book.get_metadata("OPF", "meta") or []:
        if (attributes or {}).get("property") == "dcterms:modified" and value and value.strip():
            return str(value).strip()
    return None


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, ends stripped."""
    return _SPACES.sub(" ", text).strip()
