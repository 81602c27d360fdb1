"""Extractors: media type -> :class:`~kbsync.model.Record`.

Each extractor has an ``identity`` (name, version and settings) that is part of
a document's text hash, so a better extractor re-derives what it changes. This package
exports the protocol only; the extractors and the registry that picks one by media type
(:mod:`kbsync.extract.registry`) are imported where they are used, so the sync, which
sees extractors through the protocol, loads none of their libraries.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kbsync.model import Record

__all__ = ["Extractor"]


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
