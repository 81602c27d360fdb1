"""OpenDocument text (ODT) read with lxml: ``text:h`` headings to sections, meta.xml as metadata.

The body is walked in document order: headings (their ``outline-level``) open
sections; paragraphs, list items and table rows (cells separated by `` | ``)
make the body; text inside sections, lists and frames is followed. Title,
description, author (the initial creator, else the last one), keywords and the
creation and modification dates are the document's own metadata.

A password-protected ODT keeps a readable ZIP whose manifest lists encryption
data for its parts; it fails before its ciphertext is parsed as XML.

Not odfpy: its last release is from 2020, and on a part that is not well-formed it
prints the whole part to standard output and goes on with an empty document (a
damaged file would replace the indexed one with nothing). lxml, which the other
formats need anyway, parses with entities left unresolved and no network.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.office_zip import check_zip, describe
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["OdtExtractor"]

_OFFICE_NS = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_SPACE = f"{{{_TEXT_NS}}}s"
_SPACE_COUNT = f"{{{_TEXT_NS}}}c"
_TAB = f"{{{_TEXT_NS}}}tab"
_LINE_BREAK = f"{{{_TEXT_NS}}}line-break"
_TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_ODT = "application/vnd.oasis.opendocument.text"
# Containers whose children are walked for text (sections, lists, frames, shapes). Not
# text:tracked-changes: it holds the text that tracked deletions removed.
_CONTAINERS = frozenset({
    "section", "list", "list-item", "list-header", "frame", "text-box", "g", "custom-shape",
    "rect", "index-body", "table-of-content", "alphabetical-index", "illustration-index",
})
_META = {
    "title": "title", "description": "description", "subject": "subject",
    "initial-creator": "author", "creator": "creator", "keyword": "keywords",
    "creation-date": "created", "date": "modified",
}
_SPACES = re.compile(r"\s+")


class OdtExtractor:
    """OpenDocument text files: headings to sections, tables as text lines, meta.xml kept."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "odt-lxml-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """The body's text in order; a damaged or encrypted file is an ExtractionError."""
        try:
            from lxml import etree  # type: ignore[import-untyped]  # no stubs shipped
        except ImportError as exc:
            raise DependencyMissingError("ODT extraction", "office", "lxml", exc) from exc
        archive = check_zip(data, locator, "ODT")
        _check_package(archive, locator)
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        try:
            content: Any = etree.fromstring(archive.read("content.xml"), parser)
            body = content.find(f"{{{_OFFICE_NS}}}body/{{{_OFFICE_NS}}}text")
            if body is None:
                raise ExtractionError(locator, "is not an ODT text document: content.xml has "
                                      "no office:text body")
            sections = tuple(_sections(body))
            meta = _metadata(archive, parser)
        except ExtractionError:
            raise
        except Exception as exc:  # a damaged file can fail anywhere in the parser
            raise ExtractionError(locator, f"is a damaged or unreadable ODT file ({describe(exc)})"
                                  ) from exc
        author = meta.pop("author", None) or meta.pop("creator", None)
        meta.pop("creator", None)
        if author:
            meta["author"] = author
        meta.pop("subject", None)
        title = meta.pop("title", None) or next((s.heading for s in sections if s.heading), None)
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=meta.pop("description", None),
            sections=sections,
            metadata=tuple(sorted(meta.items())),
        )


def _check_package(archive: zipfile.ZipFile, locator: str) -> None:
    """Fail for an encrypted ODT, another OpenDocument kind, or a ZIP without content.xml."""
    names = set(archive.namelist())
    try:
        if "META-INF/manifest.xml" in names and (
                b"encryption-data" in archive.read("META-INF/manifest.xml")):
            raise ExtractionError(
                locator, "is a password-protected (encrypted) ODT file; not extracted")
        if "mimetype" in names:
            declared = archive.read("mimetype").decode("ascii", "replace").strip()
            if declared != _ODT:
                raise ExtractionError(
                    locator, f"is not an OpenDocument text file: its mimetype is {declared!r}")
    except ExtractionError:
        raise
    except Exception as exc:
        raise ExtractionError(locator, f"is a damaged ODT file ({describe(exc)})") from exc
    if "content.xml" not in names:
        raise ExtractionError(locator, "is not an ODT file: its ZIP has no content.xml")


def _sections(body: Any) -> Iterator[Section]:
    """The body's headings and paragraphs as sections."""
    heading: str | None = None
    level = 0
    paragraphs: list[str] = []
    for found, text in _blocks(body):
        if found:
            if heading is not None or paragraphs:
                yield Section(heading=heading, text="\n\n".join(paragraphs), level=level)
            heading, level, paragraphs = text, found, []
        else:
            paragraphs.append(text)
    if heading is not None or paragraphs:
        yield Section(heading=heading, text="\n\n".join(paragraphs), level=level)


def _blocks(element: Any) -> Iterator[tuple[int, str]]:
    """(heading level, text) or (0, paragraph text) for the blocks below ``element``."""
    for node in element:
        if not isinstance(node.tag, str):  # comments, processing instructions, entities
            continue
        namespace, _, name = node.tag[1:].partition("}")
        if namespace == _TEXT_NS and name == "h":
            text = _collapse(_text(node))
            if text:
                yield _outline_level(node), text
        elif namespace == _TEXT_NS and name == "p":
            text = _collapse(_text(node))
            if text:
                yield 0, text
        elif namespace == _TABLE_NS and name == "table":
            # A paragraph per row: single line breaks are spaces to the normalizer.
            for line in _table_lines(node):
                yield 0, line
        elif name in _CONTAINERS:
            yield from _blocks(node)


def _table_lines(element: Any) -> Iterator[str]:
    """A table's rows (inside row groups too) as `` | ``-separated lines; empty rows left out."""
    for node in element:
        if not isinstance(node.tag, str):
            continue
        namespace, _, name = node.tag[1:].partition("}")
        if namespace != _TABLE_NS:
            continue
        if name == "table-row":
            cells = [_collapse(_text(cell)) for cell in node
                     if cell.tag == f"{{{_TABLE_NS}}}table-cell"]
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                yield " | ".join(cells)
        elif name in ("table-rows", "table-header-rows", "table-row-group"):
            yield from _table_lines(node)


def _text(element: Any) -> str:
    """An element's text as ODF means it: ``text:s`` spaces, tabs and line breaks included."""
    parts: list[str] = []
    pending = [element]
    while pending:
        node = pending.pop()
        if isinstance(node, str):  # a tail, queued after the element it follows
            parts.append(node)
            continue
        if node.text:
            parts.append(node.text)
        for child in reversed(node):
            if child.tail:
                pending.append(child.tail)
            if not isinstance(child.tag, str):
                continue
            if child.tag == _SPACE:
                count = child.get(_SPACE_COUNT) or "1"
                pending.append(" " * min(int(count) if count.isdigit() else 1, 100))
            elif child.tag == _TAB:
                pending.append("\t")
            elif child.tag == _LINE_BREAK:
                pending.append("\n")
            else:
                pending.append(child)
    return "".join(parts)


def _outline_level(heading: Any) -> int:
    """A ``text:h``'s outline level (1 when absent or not a number from 1 to 10)."""
    value = heading.get(f"{{{_TEXT_NS}}}outline-level") or ""
    level = int(value) if value.isdigit() else 1
    return level if 1 <= level <= 10 else 1


def _metadata(archive: zipfile.ZipFile, parser: Any) -> dict[str, str]:
    """meta.xml's fields that a record keeps, by kbsync's names (first value of each)."""
    from lxml import etree

    try:
        raw = archive.read("meta.xml")
    except KeyError:
        return {}
    meta = etree.fromstring(raw, parser).find(f"{{{_OFFICE_NS}}}meta")
    found: dict[str, str] = {}
    for node in meta if meta is not None else ():
        if not isinstance(node.tag, str):
            continue
        name = _META.get(node.tag.rpartition("}")[2])
        value = _collapse(_text(node))
        if name and value and name not in found:
            found[name] = value
    return found


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, ends stripped."""
    return _SPACES.sub(" ", text).strip()
