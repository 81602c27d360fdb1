"""Sources the store holds but the configuration no longer names.

Their documents stay until ``kbsync sources remove`` releases them (or a sync is run
with ``allow_mass_delete``): an absent table may be a typo or a mangled file.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from kbsync.errors import DocumentError
from kbsync.model import KnownItem, Listing, SourceItem
from kbsync.sources import Source
from kbsync.store import Maintenance, Manifest, Meta
from kbsync.sync.tally import SourceTally

__all__ = [
    "REMOVED_META",
    "RemovedSource",
    "forget_released",
    "keep_removed",
    "release_source",
    "released_sources",
    "removed_sources",
    "sources_to_sync",
]


REMOVED_META = "removed_sources"
"""The store's meta entry naming the sources `kbsync sources remove` released for deletion."""


class _Held(Manifest, Maintenance, Meta, Protocol):
    """What finding the removed sources reads: the stored sources, their counts of
    documents, the sources released (meta)."""


def removed_sources(store: _Held, sources: Sequence[Source], allow_mass_delete: bool,
                    ) -> tuple[list[RemovedSource], frozenset[str]]:
    """The stored sources no longer configured, and those of them whose documents may go.

    A source that is simply absent from the configuration may be a typo (``[[source]]``)
    or a mangled file: its documents stay until ``kbsync sources remove`` releases it
    (:func:`release_source`) or the sync is run with ``allow_mass_delete``.
    """
    configured = {s.name for s in sources}
    names = sorted(store.source_names() - configured)
    held = store.status().by_source if names else {}
    removed = [RemovedSource(n, held.get(n, 0)) for n in names]
    if allow_mass_delete:
        return removed, frozenset(names)
    return removed, frozenset(released_sources(store)) - configured


def sources_to_sync(store: _Held, sources: Sequence[Source], allow_mass_delete: bool,
                    only: Collection[str] | None,
                    ) -> tuple[Sequence[Source], list[RemovedSource], frozenset[str]]:
    """The configured sources a sync goes through (those of ``only``, when given), the
    stored ones no longer configured and those of them whose documents may go
    (:func:`removed_sources`); a sync of some sources leaves every other one as it is."""
    if only is not None:
        return [s for s in sources if s.name in only], [], frozenset()
    return (sources, *removed_sources(store, sources, allow_mass_delete))


def released_sources(store: Meta) -> list[str]:
    """The names `kbsync sources remove` released whose documents no sync has deleted yet."""
    value = store.get_meta(REMOVED_META)
    names = json.loads(value) if value else []
    return [str(n) for n in names] if isinstance(names, list) else []


def release_source(store: Meta, name: str) -> None:
    """Let the next sync delete the documents of ``name`` once it is no longer configured."""
    names = released_sources(store)
    if name not in names:
        store.set_meta(REMOVED_META, json.dumps(sorted([*names, name])))


def forget_released(store: Meta, settled: Collection[str]) -> None:
    """Sources a sync has deleted, or that are configured again, need no release any more."""
    names = released_sources(store)
    if names and set(names) & set(settled):
        store.set_meta(REMOVED_META, json.dumps([n for n in names if n not in settled]))


def keep_removed(source: RemovedSource, out: SourceTally) -> None:
    """Report a stored source missing from the configuration, whose documents are kept."""
    out.deletions_blocked = True
    out.deletions_held += source.documents
    kept = ("its document was" if source.documents == 1
            else f"its {source.documents:,} documents were")
    out.failures.append(("", f"a stored source that is no longer configured in kbsync.toml; "
                             f"{kept} kept (after `kbsync "
                             f"sources remove {source.name}` the next sync deletes them; "
                             "`kbsync sync --allow-mass-delete` does at once)"))


class RemovedSource:
    """A source that has documents in the store but is no longer configured: it lists nothing.

    ``documents`` is how many it has stored.
    """

    def __init__(self, name: str, documents: int = 0) -> None:
        self._name = name
        self.documents = documents

    @property
    def name(self) -> str:
        return self._name

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        return Listing(())

    def read(self, item: SourceItem) -> bytes:
        raise DocumentError(item.locator, "its source is no longer configured")
