"""PDF: the text of each page with pypdf, one section per page, in page order.

Pages stay separate sections (with no heading; section ``i`` is page ``i + 1``,
empty pages included) so a change on one page is a change in one section, and a
search hit can name its page.

A few kilobytes of PDF can hold a FlateDecode stream that inflates to tens of
megabytes of drawing operators, and pypdf's text extraction spends seconds per
megabyte on them (a decompression bomb costs minutes, not memory). So the
decompressed page content a document may hold is budgeted by its size: at most
``CONTENT_RATIO_MAX`` times the file's bytes, and never less than
``CONTENT_FLOOR_BYTES``; a page's content streams and the form XObjects they draw
are counted before its text is extracted.
"""

from __future__ import annotations

import io
import logging
import re
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["CONTENT_FLOOR_BYTES", "CONTENT_RATIO_MAX", "PdfExtractor"]

CONTENT_RATIO_MAX = 25
"""Decompressed page content may be at most this many times the PDF's size; text
streams deflate about 3 to 10 times, so only a bomb goes past it."""

CONTENT_FLOOR_BYTES = 2 * 1024 * 1024
"""A small PDF may always hold this much decompressed page content."""

_METADATA_KEYS = (
    ("/Author", "author"),
    ("/Keywords", "keywords"),
    ("/CreationDate", "created"),
    ("/ModDate", "modified"),
)


_QUIET = logging.NullHandler()


class PdfExtractor:
    """PDF documents: page text in reading order as pypdf gives it; title from the metadata."""

    @property
    def identity(self) -> str:
        """Name, library and version; pypdf's default text extraction belongs to it."""
        return "pdf-pypdf-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Read every page; an encrypted or damaged PDF is an ExtractionError saying which."""
        try:
            from pypdf import PdfReader
            from pypdf.errors import DependencyError, FileNotDecryptedError
        except ImportError as exc:
            raise DependencyMissingError("PDF extraction", "pdf", "pypdf", exc) from exc
        # pypdf logs what it repairs ("EOF marker not found"); with no handler anywhere,
        # logging's last resort would print it over a sync's progress. A damaged file
        # is reported once, as this document's error; an application's own logging
        # configuration still receives the records.
        logging.getLogger("pypdf").addHandler(_QUIET)

        if b"%PDF-" not in data[:1024]:
            raise ExtractionError(locator, "is not a PDF: no %PDF- header in its first 1024 bytes")
        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionError(locator, "is an encrypted PDF that needs a password to open")
            info: Any = reader.metadata
            pages: list[Section] = []
            budget = max(CONTENT_FLOOR_BYTES, CONTENT_RATIO_MAX * len(data))
            used = 0
            for number, page in enumerate(reader.pages, start=1):
                used += _content_bytes(page, budget - used)
                if used > budget:
                    raise ExtractionError(
                        locator,
                        f"page {number} of the PDF brings its decompressed content past "
                        f"{budget:,} bytes, the budget for a file of {len(data):,} bytes "
                        "(a decompression bomb?); not extracted",
                    )
                try:
                    text = page.extract_text()
                except Exception as exc:  # pypdf raises many kinds on damaged content streams
                    raise ExtractionError(
                        locator, f"page {number} of the PDF cannot be read ({_describe(exc)})"
                    ) from exc
                pages.append(Section(heading=None, text=text.strip()))
        except ExtractionError:
            raise
        except FileNotDecryptedError:
            raise ExtractionError(
                locator, "is an encrypted PDF that needs a password to open"
            ) from None
        except DependencyError as exc:
            raise ExtractionError(
                locator,
                f"is an encrypted PDF that pypdf cannot decrypt without an extra package ({exc})",
            ) from None
        except Exception as exc:  # a damaged file can fail anywhere in pypdf's parser
            if type(exc).__name__ == "LimitReachedError":  # pypdf's own caps (pypdf >= 5)
                raise ExtractionError(
                    locator,
                    f"has a stream past pypdf's decompression limit (a decompression bomb?; "
                    f"{_describe(exc)}); not extracted",
                ) from exc
            raise ExtractionError(
                locator, f"is a damaged or unreadable PDF ({_describe(exc)})"
            ) from exc

        title = _info_text(info, "/Title")
        metadata = [(name, _info_text(info, key)) for key, name in _METADATA_KEYS]
        metadata.append(("pages", str(len(pages))))
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=_info_text(info, "/Subject"),
            sections=tuple(pages),
            metadata=tuple(sorted((k, v) for k, v in metadata if v)),
        )


def _content_bytes(page: Any, budget: int) -> int:
    """Decompressed bytes of a page's content streams and of the form XObjects it draws.

    Counting stops once ``budget`` is exceeded. Each object is counted once, and
    forms inside forms are followed, as text extraction follows them; images are
    not decoded by text extraction, so they are not counted.
    """
    total = 0
    seen: dict[int, Any] = {}  # holding the objects keeps their ids unique
    pending: list[Any] = [page.get("/Contents"), page.get("/Resources")]
    while pending and total <= budget:
        obj = _resolved(pending.pop())
        if obj is None or id(obj) in seen:
            continue
        seen[id(obj)] = obj
        if isinstance(obj, list):  # an array of content streams
            pending.extend(obj)
        elif hasattr(obj, "get_data"):  # a content stream or a form XObject
            total += len(obj.get_data())
            pending.append(obj.get("/Resources"))
        elif isinstance(obj, dict):  # a resource dictionary
            xobjects = _resolved(obj.get("/XObject"))
            if isinstance(xobjects, dict):
                forms = (_resolved(x) for x in xobjects.values())
                pending.extend(f for f in forms if isinstance(f, dict)
                               and f.get("/Subtype") == "/Form")
    return total


def _resolved(obj: Any) -> Any:
    """A PDF object with an indirect reference followed."""
    return obj.get_object() if hasattr(obj, "get_object") else obj


def _info_text(info: Any, key: str) -> str | None:
    """A document information entry as text, whitespace collapsed, or None when absent or blank."""
    if info is None:
        return None
    try:
        value = info.get(key)
        if value is not None and hasattr(value, "get_object"):
            value = value.get_object()  # an indirect reference to the string
    except Exception:  # a damaged information dictionary is no reason to lose the text
        return None
    if value is None:
        return None
    collapsed = " ".join(str(value).split())
    date = _PDF_DATE.match(collapsed) if key in _DATE_KEYS else None
    if date:
        return _iso_date(date)
    return collapsed or None


_DATE_KEYS = frozenset({"/CreationDate", "/ModDate"})
_PDF_DATE = re.compile(r"D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?")


def _iso_date(found: re.Match[str]) -> str:
    """A PDF date (``D:YYYYMMDDHHmmSS``, time zone dropped) as ISO 8601, to the precision given."""
    year, month, day, hour, minute, second = found.groups()
    text = year + (f"-{month}" if month else "") + (f"-{day}" if month and day else "")
    if month and day and hour:
        text += f"T{hour}:{minute or '00'}:{second or '00'}"
    return text


def _describe(exc: Exception) -> str:
    """An exception as ``Type: message`` for an error message."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
