"""Media types: a path's media type by its extension, and the extractor for a media type."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from kbsync.extract.html import HtmlExtractor
from kbsync.extract.markdown import MarkdownExtractor
from kbsync.extract.pdf import PdfExtractor
from kbsync.extract.text import TextExtractor

if TYPE_CHECKING:
    from kbsync.extract import Extractor

__all__ = ["OCTET_STREAM", "SUPPORTED_MEDIA_TYPES", "extractor_for", "media_type_for"]

OCTET_STREAM = "application/octet-stream"
"""The media type of a path whose extension says nothing kbsync can extract."""

_BY_EXTENSION: dict[str, str] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".rst": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}

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


def media_type_for(path: str) -> str:
    """The media type of a file path or URL path by its extension (case-insensitive)."""
    _, extension = posixpath.splitext(path.replace("\\", "/").lower())
    return _BY_EXTENSION.get(extension, OCTET_STREAM)


def extractor_for(media_type: str) -> Extractor | None:
    """The extractor for a media type, or None when there is none.

    Parameters (``text/html; charset=utf-8``) and case are ignored, so an HTTP
    Content-Type can be passed as it came.
    """
    essence = media_type.split(";", 1)[0].strip().lower()
    return _EXTRACTORS.get(_ALIASES.get(essence, essence))
