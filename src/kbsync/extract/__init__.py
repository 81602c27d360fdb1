"""Extractors: media type -> :class:`~kbsync.model.Record`.

Each extractor has an ``identity`` (name, version and settings) that is part of
a document's text hash, so a better extractor re-derives what it changes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kbsync.model import Record

__all__ = [
    "SUPPORTED_MEDIA_TYPES",
    "DocxExtractor",
    "EpubExtractor",
    "Extractor",
    "HtmlExtractor",
    "MarkdownExtractor",
    "OdtExtractor",
    "PdfExtractor",
    "PptxExtractor",
    "RtfExtractor",
    "TextExtractor",
    "XlsxExtractor",
    "decode_text",
    "extractor_for",
    "media_type_for",
]


@runtime_checkable
class Extractor(Protocol):
    """Turns a document's bytes into a Record, or raises ExtractionError naming the locator."""

    @property
    def identity(self) -> str:
        """Name, version and settings, e.g. ``"markdown-v1"``."""
        ...

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """The record of ``data``; ``media_type`` may carry a ``charset`` parameter."""
        ...


# Below the Protocol: the registry's annotations refer to it.
from kbsync.extract.epub import EpubExtractor  # noqa: E402
from kbsync.extract.html import HtmlExtractor  # noqa: E402
from kbsync.extract.markdown import MarkdownExtractor  # noqa: E402
from kbsync.extract.odt import OdtExtractor  # noqa: E402
from kbsync.extract.office import DocxExtractor, PptxExtractor, XlsxExtractor  # noqa: E402
from kbsync.extract.pdf import PdfExtractor  # noqa: E402
from kbsync.extract.registry import SUPPORTED_MEDIA_TYPES, extractor_for, media_type_for  # noqa: E402
from kbsync.extract.rtf import RtfExtractor  # noqa: E402
from kbsync.extract.text import TextExtractor, decode_text  # noqa: E402
