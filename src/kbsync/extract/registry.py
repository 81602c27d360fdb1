"""Media types: a path's media type by its extension, and the extractor for a media type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.extract.html import HtmlExtractor
from kbsync.extract.markdown import MarkdownExtractor
from kbsync.extract.pdf import PdfExtractor
from kbsync.extract.text import TextExtractor
from kbsync.media import OCTET_STREAM, media_type_for

if TYPE_CHECKING:
    from kbsync.extract import Extractor

__all__ = ["OCTET_STREAM", "SUPPORTED_MEDIA_TYPES", "extractor_for", "media_type_for"]

# Extractors are stateless, so one instance of each serves every document.
_EXTRACTORS: dict[str, Extractor] = {
    "text/plain": TextExtractor(),
    "text/markdown": MarkdownExtractor(),
    "text/html": HtmlExtractor(),
    "application/pdf": PdfExtractor(),
}

_ALIASES = {
    "text/x-markdown": "text/markdown",
    "application/xhtml+xml": "text/html",
    "application/x-pdf": "application/pdf",
}

SUPPORTED_MEDIA_TYPES: tuple[str, ...] = tuple(sorted(_EXTRACTORS))
"""The media types an extractor exists for."""


def extractor_for(media_type: str) -> Extractor | None:
    """The extractor for a media type, or None when there is none.

    Parameters (``text/html; charset=utf-8``) and case are ignored, so an HTTP
    Content-Type can be passed as it came.
    """
    essence = media_type.split(";", 1)[0].strip().lower()
    return _EXTRACTORS.get(_ALIASES.get(essence, essence))
