"""Media types: a path's media type by its extension, and the extractor for a media type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.core.media import OCTET_STREAM, media_type_for
from kbsync.extract.epub import EpubExtractor
from kbsync.extract.html import HtmlExtractor
from kbsync.extract.markdown import MarkdownExtractor
from kbsync.extract.odt import OdtExtractor
from kbsync.extract.office import DocxExtractor, PptxExtractor, XlsxExtractor
from kbsync.extract.pdf import PdfExtractor
from kbsync.extract.rtf import RtfExtractor
from kbsync.extract.text import TextExtractor

if TYPE_CHECKING:
    from kbsync.extract import Extractor

__all__ = ["OCTET_STREAM", "SUPPORTED_MEDIA_TYPES", "extractor_for", "media_type_for"]

# Extractors are stateless, so one instance of each serves every document.
_EXTRACTORS: dict[str, Extractor] = {
    "text/plain": TextExtractor(),
    "text/markdown": MarkdownExtractor(),
    "text/html": HtmlExtractor(),
    "application/pdf": PdfExtractor(),
    # The office extra: each imports its library when it first reads a document.
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocxExtractor(),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": PptxExtractor(),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": XlsxExtractor(),
    "application/epub+zip": EpubExtractor(),
    "application/vnd.oasis.opendocument.text": OdtExtractor(),
    "application/rtf": RtfExtractor(),
}

_ALIASES = {
    "text/x-markdown": "text/markdown",
    "application/xhtml+xml": "text/html",
    "application/x-pdf": "application/pdf",
    "text/rtf": "application/rtf",
}

# The same, refusing UTF-8 documents with invalid bytes in them (`strict_decoding = true`).
_STRICT: dict[str, Extractor] = {
    **_EXTRACTORS,
    "text/plain": TextExtractor(strict_decoding=True),
    "text/markdown": MarkdownExtractor(strict_decoding=True),
    "text/html": HtmlExtractor(strict_decoding=True),
}

SUPPORTED_MEDIA_TYPES: tuple[str, ...] = tuple(sorted(_EXTRACTORS))
"""The media types an extractor exists for."""


def extractor_for(media_type: str, *, strict_decoding: bool = False) -> Extractor | None:
    """The extractor for a media type, or None when there is none.

    Parameters (``text/html; charset=utf-8``) and case are ignored, so an HTTP
    Content-Type can be passed as it came. ``strict_decoding``: a UTF-8 document
    with invalid bytes fails instead of being indexed with U+FFFD in their place.
    """
    essence = media_type.split(";", 1)[0].strip().lower()
    return (_STRICT if strict_decoding else _EXTRACTORS).get(_ALIASES.get(essence, essence))
