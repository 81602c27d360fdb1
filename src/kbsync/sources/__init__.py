"""Sources: where documents come from. A source lists items, then reads the ones asked for."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kbsync.model import ItemError, KnownItem, Listing, PageSchedule, SourceItem

__all__ = ["Entries", "Revisiting", "Revisits", "Scan", "ScanningSource", "Source", "listing_of"]

Entries = Generator[SourceItem | ItemError, None, Listing]
"""A listing handed over piece by piece: items and errors (in no particular order), then
a :class:`Listing` without items that says whether it was complete, with its warnings."""


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


class Scan:
    """:data:`Entries` to iterate once; afterwards ``summary`` is the listing's summary."""

    def __init__(self, entries: Entries) -> None:
        self._entries = entries
        self.summary = Listing(items=())

    def __iter__(self) -> Iterator[SourceItem | ItemError]:
        self.summary = yield from self._entries


def listing_of(entries: Entries) -> Listing:
    """A scan gathered into one :class:`Listing`: items sorted by key, errors by key and message.

    What :meth:`Source.list` is for a source that can scan.
    """
    items: list[SourceItem] = []
    errors: list[ItemError] = []
    scan = Scan(entries)
    for entry in scan:
        if isinstance(entry, SourceItem):
            items.append(entry)
        else:
            errors.append(entry)
    summary = scan.summary
    return Listing(items=tuple(sorted(items, key=lambda i: i.key)), complete=summary.complete,
                   errors=tuple(sorted([*errors, *summary.errors],
                                       key=lambda e: (e.key, e.message))),
                   warnings=summary.warnings, revision=summary.revision, root=summary.root)


@runtime_checkable
class ScanningSource(Source, Protocol):
    """A source that can hand its listing over piece by piece, so a sync never holds all of it.

    A source that cannot (a crawl must hold its frontier anyway) just lists.
    """

    def scan(self) -> Entries:
        """What :meth:`Source.list` returns, as :data:`Entries`; needs nothing the store knows."""
        ...


@dataclass(frozen=True, slots=True)
class Revisits:
    """What the latest listing of a :class:`Revisiting` source checked and left for later.

    ``schedules`` holds the revisit schedule of each page of the listing, for the
    store to keep; ``checked`` counts the pages requested, ``not_due`` the known
    pages listed as unchanged without a request.
    """

    schedules: Mapping[str, PageSchedule] = field(default_factory=dict)
    checked: int = 0
    not_due: int = 0


@runtime_checkable
class Revisiting(Source, Protocol):
    """A source whose items have revisit schedules (a website): it can check only those due."""

    def list_due(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """:meth:`Source.list`, but a known item that is not due is listed as unchanged
        (``not_modified``) without being checked: not checked is not gone."""
        ...

    @property
    def revisits(self) -> Revisits:
        """The schedules and counts of the latest listing."""
        ...

