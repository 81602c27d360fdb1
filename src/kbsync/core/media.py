"""Media types of documents by their file extension (for folders, and URLs without a type)."""

from __future__ import annotations

import posixpath

__all__ = ["OCTET_STREAM", "media_type_for"]

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
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".epub": "application/epub+zip",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".rtf": "application/rtf",
}


def media_type_for(path: str) -> str:
    """The media type of a file path or URL path by its extension (case-insensitive)."""
    _, extension = posixpath.splitext(path.replace("\\", "/").lower())
    return _BY_EXTENSION.get(extension, OCTET_STREAM)
