"""OpenDocument text (ODT) with odfpy: ``text:h`` headings to sections, metadata from meta.xml.

The body is walked in document order: headings (their ``outline-level``) open
sections; paragraphs, list items and table rows (cells separated by `` | ``)
make the body; text inside sections, lists and frames is followed. Title,
description, author (the initial creator, else the last one), keywords and the
creation and modification dates are the document's own metadata.

A password-protected ODT keeps a readable ZIP whose manifest lists encryption
data for its parts; it fails before odfpy parses ciphertext as XML.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.office_zip import check_zip, describe
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["OdtExtractor"]

_TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_ODT = "application/vnd.oasis.opendocument.text"
# Containers whose children are walked for text (sections, lists, frames, shapes).
_CONTAINERS = frozenset({
    "section", "list", "list-item", "list-header", "frame", "text-box", "g", "custom-shape",
    "rect", "index-body", "table-of-content", "alphabetical-index", "illustration-index",
    "soft-page-break", "note", "note-body", "deletion", "changed-region", "tracked-changes",
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
        return "odt-odfpy-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """The body's text in order; a damaged or encrypted file is an ExtractionError."""
        try:
            from odf import teletype
            from odf.opendocument import load
        except ImportError as exc:
            raise DependencyMissingError("ODT extraction", "office", "odfpy", exc) from exc
        archive = check_zip(data, locator, "ODT")
        _check_package(archive, locator)
        try:
            document: Any = load(io.BytesIO(data))
            sections = tuple(_sections(document.text, teletype))
            meta = _metadata(document.meta, teletype)
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


def _sections(body: Any, teletype: Any) -> Iterator[Section]:
    """The body's headings and paragraphs as sections."""
    heading: str | None = None
    level = 0
    paragraphs: list[str] = []
    for found, text in _blocks(body, teletype):
        if found:
            if heading is not None or paragraphs:
                yield Section(heading=heading, text="\n\n".join(paragraphs), level=level)
            heading, level, paragraphs = text, found, []
        else:
            paragraphs.append(text)
    if heading is not None or paragraphs:
        yield Section(heading=heading, text="\n\n".join(paragraphs), level=level)


def _blocks(element: Any, teletype: Any) -> Iterator[tuple[int, str]]:
    """(heading level, text) or (0, paragraph text) for the blocks below ``element``."""
    for node in element.childNodes:
        qname = getattr(node, "qname", None)
        if qname is None:
            continue
        namespace, name = qname
        if namespace == _TEXT_NS and name == "h":
            text = _collapse(teletype.extractText(node))
            if text:
                yield _outline_level(node), text
        elif namespace == _TEXT_NS and name == "p":
            text = _collapse(teletype.extractText(node))
            if text:
                yield 0, text
        elif namespace == _TABLE_NS and name == "table":
            lines = list(_table_lines(node, teletype))
            if lines:
                yield 0, "\n".join(lines)
        elif name in _CONTAINERS:
            yield from _blocks(node, teletype)


def _table_lines(element: Any, teletype: Any) -> Iterator[str]:
    """A table's rows (inside row groups too) as `` | ``-separated lines; empty rows left out."""
    for node in element.childNodes:
        qname = getattr(node, "qname", None)
        if qname is None or qname[0] != _TABLE_NS:
            continue
        if qname[1] == "table-row":
            cells = [_collapse(teletype.extractText(cell)) for cell in node.childNodes
                     if getattr(cell, "qname", (None, None))[1] == "table-cell"]
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                yield " | ".join(cells)
        elif qname[1] in ("table-rows", "table-header-rows", "table-row-group"):
            yield from _table_lines(node, teletype)


def _outline_level(heading: Any) -> int:
    """A ``text:h``'s outline level (1 when absent or not a number from 1 to 10)."""
    try:
        level = int(heading.getAttribute("outlinelevel"))
    except (TypeError, ValueError):
        return 1
    return level if 1 <= level <= 10 else 1


def _metadata(meta: Any, teletype: Any) -> dict[str, str]:
    """meta.xml's fields that a record keeps, by kbsync's names (first value of each)."""
    found: dict[str, str] = {}
    for node in meta.childNodes:
        qname = getattr(node, "qname", None)
        if qname is None or qname[1] not in _META:
            continue
        name = _META[qname[1]]
        value = _collapse(teletype.extractText(node))
        if value and name not in found:
            found[name] = value
    return found


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, ends stripped."""
    return _SPACES.sub(" ", text).strip()
