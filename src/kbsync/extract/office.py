"""Office Open XML: DOCX with python-docx, PPTX with python-pptx, XLSX with openpyxl.

- DOCX: body paragraphs and tables in document order; a paragraph in a Word heading
  style (``Heading 1`` to ``Heading 9``, or a style based on one) opens a section of
  that level, the ``Title`` style one of level 1. Table rows become lines of cells
  separated by `` | ``.
- PPTX: one section per slide, headed by the slide's title placeholder; the other
  shapes' text (inside groups too), tables and the speaker notes are its body.
- XLSX: one section per worksheet, headed by the sheet's name, its rows as text
  table lines; formulas give their cached values.

The title is the package's core property ``title``, else the first heading; author,
keywords and the created/modified dates are the core properties' own. A package
without core properties has none (the libraries would otherwise invent them: a
"python-docx" author and the current time).

The ZIP container is checked before a library sees it (``office_zip``): bombs,
encrypted and truncated files fail as this document's ExtractionError.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import date, datetime, time
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.office_zip import check_zip, describe
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["XLSX_CELLS_MAX", "DocxExtractor", "PptxExtractor", "XlsxExtractor"]

XLSX_CELLS_MAX = 10_000_000
"""A workbook may yield at most this many cells (the empty ones of a row included).

A sheet declares its rows sparsely: one cell at column XFD of a million rows
compresses to kilobytes and would expand into billions of empty cells."""

_CORE_RELATIONSHIP = b"relationships/metadata/core-properties"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W_P, _W_T, _W_TAB = f"{_W}p", f"{_W}t", f"{_W}tab"
_W_BREAKS = frozenset({f"{_W}br", f"{_W}cr"})
_W_SKIPPED = frozenset({
    f"{_W}del", f"{_W}moveFrom", f"{_W}drawing", f"{_W}pict", f"{_W}pPr", f"{_W}rPr",
    "{http://schemas.openxmlformats.org/markup-compatibility/2006}AlternateContent",
})
_HEADING_STYLE = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\n\v\f\u00a0]+")


class DocxExtractor:
    """Word documents: heading styles to sections, tables as text lines, core properties."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "docx-python-docx-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Paragraphs and tables in order; an unreadable package is an ExtractionError."""
        try:
            import docx
        except ImportError as exc:
            raise DependencyMissingError("DOCX extraction", "office", "python-docx", exc) from exc
        archive = check_zip(data, locator, "DOCX")
        core = _has_core_properties(archive)
        try:
            document: Any = docx.Document(io.BytesIO(data))
            sections = tuple(_docx_sections(document))
            properties = _core(document.core_properties) if core else {}
        except Exception as exc:  # a damaged package can fail anywhere in the parser
            raise ExtractionError(locator, f"is a damaged or unreadable DOCX file ({describe(exc)})"
                                  ) from exc
        return _record(properties, sections)


class PptxExtractor:
    """PowerPoint presentations: one section per slide, titled by the slide's title."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "pptx-python-pptx-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Every slide's text and notes; an unreadable package is an ExtractionError."""
        try:
            import pptx
        except ImportError as exc:
            raise DependencyMissingError("PPTX extraction", "office", "python-pptx", exc) from exc
        archive = check_zip(data, locator, "PPTX")
        core = _has_core_properties(archive)
        try:
            presentation: Any = pptx.Presentation(io.BytesIO(data))
            sections = tuple(_slide(slide) for slide in presentation.slides)
            properties = _core(presentation.core_properties) if core else {}
        except Exception as exc:  # a damaged package can fail anywhere in the parser
            raise ExtractionError(locator, f"is a damaged or unreadable PPTX file ({describe(exc)})"
                                  ) from exc
        properties["slides"] = str(len(sections))
        return _record(properties, sections)


class XlsxExtractor:
    """Excel workbooks: one section per worksheet, rows as `` | ``-separated lines."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "xlsx-openpyxl-v2"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Every worksheet's non-empty rows; an unreadable package is an ExtractionError."""
        try:
            import openpyxl
        except ImportError as exc:
            raise DependencyMissingError("XLSX extraction", "office", "openpyxl", exc) from exc
        archive = check_zip(data, locator, "XLSX")
        core = _has_core_properties(archive)
        try:
            # read_only streams each sheet's XML; data_only gives formulas' cached values.
            workbook: Any = openpyxl.load_workbook(io.BytesIO(data), read_only=True,
                                                   data_only=True)
        except Exception as exc:  # a damaged package can fail anywhere in the parser
            raise ExtractionError(locator, f"is a damaged or unreadable XLSX file ({describe(exc)})"
                                  ) from exc
        try:
            sections = tuple(_sheets(workbook, locator))
            properties = _core(workbook.properties) if core else {}
        except ExtractionError:
            raise
        except Exception as exc:
            raise ExtractionError(locator, f"is a damaged or unreadable XLSX file ({describe(exc)})"
                                  ) from exc
        finally:
            workbook.close()
        properties["sheets"] = str(len(sections))
        uncomputed = _uncomputed_formulas(archive)
        warnings = (f"formula cells without a saved value, left empty: {uncomputed:,} (the "
                    "workbook was written without computing them; saving it from a "
                    "spreadsheet application stores the values)",) if uncomputed else ()
        return replace(_record(properties, sections), warnings=warnings)


# --- DOCX ------------------------------------------------------------------------------------


def _docx_sections(document: Any) -> Iterator[Section]:
    """The body's blocks grouped under their headings."""
    levels = _heading_levels(document)
    heading: str | None = None
    level = 0
    body: list[str] = []
    for block in _docx_blocks(document):
        if hasattr(block, "rows"):  # a table: a paragraph per row
            # (single line breaks are spaces to the normalizer: rows would run together)
            body.extend(_table_lines(block))
            continue
        text = _collapse(_paragraph_text(block._p))
        # The style id straight from the paragraph's XML: python-docx's Paragraph.style
        # scans every style of the document each time (seconds for a long document).
        found = levels.get(block._p.style or "", 0)
        if found and text:
            if heading is not None or body:
                yield Section(heading=heading, text="\n\n".join(body), level=level)
            heading, level, body = text, found, []
        elif text:
            body.append(text)
    if heading is not None or body:
        yield Section(heading=heading, text="\n\n".join(body), level=level)


def _docx_blocks(document: Any) -> Iterator[Any]:
    """The body's paragraphs and tables in order, those inside content controls too.

    python-docx's ``iter_inner_content`` skips content controls (``w:sdt``), where
    Word keeps cover pages, tables of contents and form fields.
    """
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    paragraph, table, control, content = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:sdtContent")
    parent = document._body
    pending = [iter(document.element.body)]
    while pending:
        child = next(pending[-1], None)
        if child is None:
            pending.pop()
        elif child.tag == paragraph:
            yield Paragraph(child, parent)
        elif child.tag == table:
            yield Table(child, parent)
        elif child.tag == control:
            inner = child.find(content)
            if inner is not None:
                pending.append(iter(inner))


def _heading_levels(document: Any) -> dict[str, int]:
    """Each heading style's id and level (1 to 9; 1 for Title), styles based on them too."""
    levels: dict[str, int] = {}
    for style in document.styles:
        level = _style_level(style)
        if level:
            levels[style.style_id] = level
    return levels


def _style_level(style: Any) -> int:
    """1 to 9 for a heading style (or one based on it), 1 for Title; else 0."""
    for _ in range(10):  # a chain of base styles; a cycle in a damaged file ends here
        if style is None:
            return 0
        name = (getattr(style, "name", None) or "").strip()
        if name.lower() == "title":
            return 1
        found = _HEADING_STYLE.match(name)
        if found:
            return int(found.group(1))
        style = getattr(style, "base_style", None)
    return 0


def _paragraph_text(paragraph: Any) -> str:
    """A paragraph's text as Word shows it with changes accepted.

    Tracked insertions (``w:ins``), inline content controls, fields and smart tags
    are read (python-docx's ``Paragraph.text`` drops the first two); deleted and
    moved-away text is not, nor drawings, whose text boxes ``mc:AlternateContent``
    holds twice.
    """
    parts: list[str] = []
    pending = [iter(paragraph)]
    while pending:
        child = next(pending[-1], None)
        if child is None:
            pending.pop()
        elif child.tag == _W_T:
            parts.append(child.text or "")
        elif child.tag == _W_TAB:
            parts.append("\t")
        elif child.tag in _W_BREAKS:
            parts.append("\n")
        elif child.tag not in _W_SKIPPED and isinstance(child.tag, str):
            pending.append(iter(child))
    return "".join(parts)


def _table_lines(table: Any) -> list[str]:
    """A table's rows as lines; a merged cell (the same cell repeated) is written once."""
    lines = []
    for row in table.rows:
        cells: list[str] = []
        last: object = None
        for cell in row.cells:
            if cell._tc is last:  # python-docx repeats a horizontally merged cell
                continue
            last = cell._tc
            cells.append(_collapse("\n".join(_paragraph_text(p) for p in cell._tc.iter(_W_P))))
        line = _row_line(cells)
        if line:
            lines.append(line)
    return lines


# --- PPTX ------------------------------------------------------------------------------------


def _slide(slide: Any) -> Section:
    """A slide: its title as the heading; other text, tables and notes as the body."""
    title_shape = slide.shapes.title
    title = _collapse(title_shape.text_frame.text) if title_shape is not None else ""
    skip = title_shape.shape_id if title_shape is not None else None
    body = [text for text in _shape_texts(slide.shapes, skip) if text]
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = frame.text.strip() if frame is not None else ""
        if notes:
            body.append(notes)
    return Section(heading=title or None, text="\n\n".join(body), level=1 if title else 0)


def _shape_texts(shapes: Iterable[Any], skip: int | None) -> Iterator[str]:
    """The text of shapes in z-order, groups followed into."""
    for shape in shapes:
        if shape.shape_id == skip:
            continue
        if hasattr(shape, "shapes"):  # a group shape
            yield from _shape_texts(shape.shapes, skip)
        elif getattr(shape, "has_table", False):  # a paragraph per row, as in documents
            yield from (line for row in shape.table.rows
                        if (line := _row_line([_collapse(c.text) for c in row.cells])))
        elif getattr(shape, "has_text_frame", False):
            yield "\n".join(_collapse(p.text) for p in shape.text_frame.paragraphs
                            if p.text.strip())


# --- XLSX ------------------------------------------------------------------------------------


def _sheets(workbook: Any, locator: str) -> Iterator[Section]:
    """Each worksheet as a section of row lines, the workbook's cell budget enforced."""
    cells = 0
    for sheet in workbook.worksheets:
        # The declared dimension may be a lie that pads every row to column XFD.
        sheet.reset_dimensions()
        lines = []
        for row in sheet.iter_rows(values_only=True):
            cells += len(row)
            if cells > XLSX_CELLS_MAX:
                raise ExtractionError(
                    locator,
                    f"sheet {sheet.title!r} brings the workbook past {XLSX_CELLS_MAX:,} cells "
                    "(a sparse-sheet bomb?); not extracted",
                )
            line = _row_line([_cell_text(value) for value in row])
            if line:
                lines.append(line)
        # A paragraph per row: single line breaks are spaces to the normalizer.
        yield Section(heading=sheet.title, text="\n\n".join(lines), level=1)


# A cell (``<c ...>...</c>``) of a worksheet's XML, and a formula or a value inside one.
_CELL = re.compile(rb"<c[ >].*?</c>", re.DOTALL)
_FORMULA = re.compile(rb"<f[ >/]")
_VALUE = re.compile(rb"<v(?: [^>]*)?>[^<]")  # with text: openpyxl writes an empty <v></v>


def _uncomputed_formulas(archive: zipfile.ZipFile) -> int:
    """How many formula cells of the worksheets have no cached value.

    openpyxl gives such a cell's value as None, like an empty cell's; the sheet XML
    says what it is: an ``<f>`` with no ``<v>``, or an empty one (libraries that write
    formulas without computing them leave the value out).
    """
    count = 0
    for name in archive.namelist():
        if not (name.startswith("xl/worksheets/") and name.endswith(".xml")):
            continue
        with archive.open(name) as member:  # a megabyte at a time: sheets can be big
            rest = b""
            while piece := member.read(1 << 20):
                xml = rest + piece
                last = xml.rfind(b"</c>")
                end = last + 4 if last >= 0 else 0
                count += sum(1 for cell in _CELL.finditer(xml, 0, end)
                             if _FORMULA.search(cell[0]) and not _VALUE.search(cell[0]))
                rest = xml[end:]
    return count


def _cell_text(value: object) -> str:
    """A cell's value as text: dates in ISO 8601, whole floats without ``.0``.

    A spreadsheet stores a date as a date-time at midnight: it reads as the date alone.
    """
    if value is None:
        return ""
    if isinstance(value, datetime) and value.time() == time() and value.tzinfo is None:
        return value.date().isoformat()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return _collapse(str(value))


# --- shared ----------------------------------------------------------------------------------


def _row_line(cells: list[str]) -> str:
    """Cells as one ``a | b | c`` line, trailing empty cells dropped; "" for an empty row."""
    while cells and not cells[-1]:
        cells.pop()
    return " | ".join(cells)


def _has_core_properties(archive: zipfile.ZipFile) -> bool:
    """Whether the package relates a core properties part (title, author, dates)."""
    try:
        return _CORE_RELATIONSHIP in archive.read("_rels/.rels")
    except Exception:  # missing or damaged (zlib.error, BadZipFile): the parser reports it
        return False


def _core(properties: Any) -> dict[str, str]:
    """The core properties kept: title, subject, author, keywords, created, modified."""
    found = {
        "title": properties.title,
        "description": properties.subject,
        "author": getattr(properties, "author", None) or getattr(properties, "creator", None),
        "keywords": properties.keywords,
        "created": properties.created,
        "modified": properties.modified,
    }
    kept: dict[str, str] = {}
    for name, value in found.items():
        if isinstance(value, datetime | date):
            kept[name] = value.isoformat()
        elif isinstance(value, str) and value.strip():
            kept[name] = _collapse(value)
    return kept


def _record(properties: dict[str, str], sections: tuple[Section, ...]) -> Record:
    """The record: title from the properties else the first heading; the rest as metadata."""
    title = properties.pop("title", None) or next(
        (s.heading for s in sections if s.heading), None)
    description = properties.pop("description", None)
    return Record(
        title=title[:TITLE_MAX_CHARS] if title else None,
        description=description,
        sections=sections,
        metadata=tuple(sorted(properties.items())),
    )


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, ends stripped."""
    return _SPACES.sub(" ", text).strip()
