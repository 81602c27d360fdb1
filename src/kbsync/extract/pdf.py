"""PDF: the text of each page with pypdf, one section per page, in page order.

Pages stay separate sections (with no heading; section ``i`` is page ``i + 1``,
empty pages included) so a change on one page is a change in one section, and a
search hit can name its page.
"""

from __future__ import annotations

import io
import re
from typing import Any

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["PdfExtractor"]

_METADATA_KEYS = (
    ("/Author", "author"),
    ("/Keywords", "keywords"),
    ("/CreationDate", "created"),
    ("/ModDate", "modified"),
)


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
        except ImportError:
            raise DependencyMissingError("PDF extraction", "pdf", "pypdf") from None

        if b"%PDF-" not in data[:1024]:
            raise ExtractionError(locator, "is not a PDF: no %PDF- header in its first 1024 bytes")
        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionError(locator, "is an encrypted PDF that needs a password to open")
            info: Any = reader.metadata
            pages: list[Section] = []
            for number, page in enumerate(reader.pages, start=1):
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
