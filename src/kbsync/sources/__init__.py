"""Sources: where documents come from. A source lists items, then reads the ones asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from kbsync.model import KnownItem, Listing, SourceItem

__all__ = ["Source"]


@runtime_checkable
class Source(Protocol):
    """A folder, a website, or a fake in tests."""

    @property
    def name(self) -> str:
        """Stable name of the source inside a knowledge base (its keys are unique within it)."""
        ...

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Every item currently in the source, with the stat the first gate compares.

        ``known`` is what the store remembers (stat, HTTP validators, missing
        count) so that a source can revalidate instead of downloading.
        """
        ...

    def read(self, item: SourceItem) -> bytes:
        """The item's bytes; raises DocumentError (naming the item) when it cannot be read."""
        ...


from kbsync.sources.files import FilesystemSource  # noqa: E402  (after Source: files.py is an adapter of it)

__all__ += ["FilesystemSource"]
