"""List a source beside the store's manifest of it, into a scratch file.

A source that can scan hands its listing over piece by piece; one that needs what
the store knows (HTTP validators, the crawl's frontier) is given it. A listing that
names its root directory (a folder) is checked against the root recorded by the last
one (:func:`check_root`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from kbsync.model import ItemError, KnownItem, Listing, PageSchedule, RootIdentity, SourceItem
from kbsync.sources import Entries, Revisiting, Revisits, Scan, ScanningSource, Source
from kbsync.store import Erasures, Frontier, Manifest, Meta, Schedules
from kbsync.sync.erasures import erasure_matcher
from kbsync.sync.observe import Derive
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import SourceTally

__all__ = ["ROOT_PREFIX", "Listed", "ListingReads", "Revisited", "check_root", "keep_schedules",
           "list_source", "next_frontier", "record_root", "recorded_root", "root_meta_name"]


class ListingReads(Manifest, Meta, Erasures, Protocol):
    """What listing a source reads of a store: its manifest, the root it was last listed at
    (meta), the erasures it skips; and its frontier and schedules, when it keeps them
    (:class:`~kbsync.store.Frontier`, :class:`~kbsync.store.Schedules`)."""


_MANIFEST_PAGE = 1000

ROOT_PREFIX = "root "
"""Prefix of the store's meta entries that hold the device and inode of each folder
source's root, as its last complete listing found them."""


def root_meta_name(source: str) -> str:
    """The store's meta entry holding the root that ``source`` was last listed at."""
    return ROOT_PREFIX + source


@dataclass(frozen=True, slots=True)
class Revisited:
    """A revisiting source's schedules after its listing, and the store's before it."""

    revisits: Revisits
    before: Mapping[str, PageSchedule]
    complete: bool


@dataclass(frozen=True, slots=True)
class Listed:
    """What listing a source came to: whether the listing was complete, and for a revisiting
    source the schedules to keep once its changes are applied (:func:`keep_schedules`)."""

    complete: bool
    revisited: Revisited | None = None


def list_source(source: Source, store: ListingReads, derive: Derive, verify: bool,
                scratch: Scratch, out: SourceTally, *, dry_run: bool = False,
                due: bool = False, accept_root: bool = False) -> Listed:
    """Put the source's listing and the store's manifest of it in ``scratch``.

    An item no extractor reads is not a document of the knowledge base (a page that
    became an image): it is left out, so a stored one is deleted like a vanished one.
    So is an item whose key an erasure (``kbsync erase``) covers: it is counted in
    ``out.skipped_erased`` and never read, so a sync does not bring it back. A
    :class:`~kbsync.sources.Revisiting` source is handed each page's schedule,
    and with ``due`` lists only the pages due. An incomplete listing counts the
    stored documents it lacks in ``out.deletions_held``: they are kept. So is a
    listing of a root on another device than the last one (:func:`check_root`),
    unless ``accept_root``.
    """
    erased = erasure_matcher(store.erasures())
    revisited = None
    if isinstance(source, ScanningSource):
        scan = Scan(source.scan())
    else:  # a source that needs what the store knows (validators) holds its listing anyway
        listing, revisited = _list_known(source, store, verify, out, erased, dry_run=dry_run,
                                         due=due)
        scan = Scan(_entries(listing))
    page: list[tuple[SourceItem | ItemError, str]] = []
    for entry in scan:
        if erased is not None and entry.key and erased(entry.key):
            out.skipped_erased += 1
        elif isinstance(entry, ItemError):
            if entry.key:
                page.append((entry, ""))
            else:
                out.failures.append(("", entry.message))
        elif (derivation := derive(entry.media_type)) is None:
            out.skipped_unsupported += 1
            out.unsupported.append(entry.key)
        else:
            page.append((entry, derivation))
        if len(page) == _MANIFEST_PAGE:
            scratch.add_listed(page)
            page.clear()
    scratch.add_listed(page)
    summary = scan.summary
    out.revision = summary.revision
    out.warnings.extend(summary.warnings)
    out.failures.extend(("", e.message) for e in summary.errors)
    after = None
    while page_of_stored := store.manifest(source.name, after, _MANIFEST_PAGE):
        scratch.add_stored(page_of_stored.values())
        after = next(reversed(page_of_stored))
    complete = summary.complete
    if summary.root is not None:
        complete = check_root(store, source.name, summary.root, complete,
                              scratch.unlisted_count, out, accept=accept_root,
                              write=not dry_run)
    out.listing_complete = complete
    if not complete:  # it cannot tell what is gone: what it lacks is kept
        out.deletions_held += scratch.unlisted_count()
    return Listed(complete, revisited)


def check_root(store: Meta, source: str, root: RootIdentity, complete: bool,
               unlisted: Callable[[], int], out: SourceTally, *, accept: bool,
               write: bool) -> bool:
    """Whether a listing of ``root`` may count as complete; a complete one records its root.

    A root on another device than the one recorded by the last complete listing is
    most likely a disk unmounted before the sync, its empty mount point left behind
    (or a network share not mounted yet): its listing lacks documents that were never
    deleted. So when it lacks any (``unlisted()``: stored documents it does not list),
    it is incomplete, with one error naming the source and both devices, and the root
    recorded stays the old one. A root moved on purpose is taken with ``accept``
    (``kbsync sync --accept-root``); one whose listing lacks nothing is taken as it is
    (nothing could be deleted: a share remounted under another device number). The
    first listing of a source has nothing to compare: it records its root. An inode
    changed on the same device is a folder replaced in place (a checkout made anew),
    not a disk gone: it is recorded without a word. ``write`` false (a dry run)
    records nothing.
    """
    before = recorded_root(store, source)
    if before is not None and before.device != root.device and not accept and complete:
        lacking = unlisted()
        if lacking:
            out.failures.append(("", (
                f"the source root is on another device than at the last sync (device "
                f"{_device(before.device)}, now {_device(root.device)}): an unmounted disk or "
                f"share looks like an emptied folder, so the listing counts as incomplete and "
                f"none of the {lacking:,} documents it lacks is deleted; if the folder was "
                f"moved on purpose, run `kbsync sync --accept-root` once")))
            return False
    if complete and write and before != root:
        record_root(store, source, root)
    return complete


def record_root(store: Meta, source: str, root: RootIdentity) -> None:
    """Record ``root`` as the one ``source`` was last listed at (what :func:`recorded_root`
    reads back)."""
    store.set_meta(root_meta_name(source), f"{root.device}:{root.inode}")


def recorded_root(store: Meta, source: str) -> RootIdentity | None:
    """The root the last complete listing of ``source`` recorded (None: none, or unreadable)."""
    value = store.get_meta(root_meta_name(source)) or ""
    device, _, inode = value.partition(":")
    try:
        return RootIdentity(int(device), int(inode))
    except ValueError:
        return None


def _device(number: int) -> str:
    """A device number as ``stat`` and ``/proc/self/mountinfo`` show it (major:minor)."""
    return f"{os.major(number)}:{os.minor(number)}"


def _list_known(source: Source, store: Manifest, verify: bool, out: SourceTally,
                erased: Callable[[str], bool] | None, *, dry_run: bool,
                due: bool) -> tuple[Listing, Revisited | None]:
    """The listing of a source that is given what the store knows of its items (validators,
    missing counts, the crawl's frontier, revisit schedules)."""
    revisiting = source if isinstance(source, Revisiting) else None
    before = (store.schedules(source.name)
              if revisiting is not None and isinstance(store, Schedules) else {})
    # --verify also revalidates web pages in full: no validators, so no 304 shortcut.
    known = {k: KnownItem(k, d.stat, None if verify else d.validators, d.missing,
                          schedule=before.get(k))
             for k, d in store.manifest(source.name).items()}
    pending = (store.frontier(source.name) - known.keys()
               if isinstance(store, Frontier) else frozenset())
    asked = {**known, **{k: KnownItem(k, pending=True) for k in pending}}
    listing = revisiting.list_due(asked) if revisiting is not None and due \
        else source.list(asked)
    if isinstance(store, Frontier) and not dry_run:
        store.set_frontier(source.name, next_frontier(listing, known.keys(), pending))
    if revisiting is None:
        return listing, None
    revisits = revisiting.revisits
    out.pages_checked, out.pages_not_due = revisits.checked, revisits.not_due
    if erased is not None:  # an erased page leaves nothing behind, its schedule included
        revisits = replace(revisits, schedules={
            k: v for k, v in revisits.schedules.items() if not erased(k)})
    return listing, Revisited(revisits, before, listing.complete)


def keep_schedules(store: object, source: str, revisited: Revisited | None,
                   out: SourceTally) -> None:
    """Store the revisit schedules of the source's latest listing, once its changes are
    applied, in a store that keeps schedules (:class:`~kbsync.store.Schedules`).

    A page that failed to sync keeps the schedule it had (so it is not left
    alone longer for having failed); an incomplete listing replaces nothing.
    """
    if revisited is None or not isinstance(store, Schedules):
        return
    failed = {key for key, _ in out.failures if key}
    before = revisited.before
    schedules = {k: before[k] if k in failed and k in before else v
                 for k, v in revisited.revisits.schedules.items()
                 if k not in failed or k in before}
    store.set_schedules(source, schedules, replace=revisited.complete)


def next_frontier(listing: Listing, stored: Collection[str],
                  pending: Collection[str]) -> frozenset[str]:
    """The keys to try again next time: those that failed here and the store does not hold.

    A key that failed before and is listed now stays until the store holds it (the
    sync may stop before it is applied); one that failed before and is absent from
    a complete listing is forgotten (gone, out of scope, disallowed), and so is one
    that was found missing twice in a row (an HTTP 404 confirmed). An incomplete
    listing forgets nothing.
    """
    was = frozenset(pending)
    failed = {e.key for e in listing.errors
              if e.key and e.key not in stored and not (e.missing and e.key in was)}
    listed = {i.key for i in listing.items} & was
    return frozenset(failed | listed | (set() if listing.complete else was))


def _entries(listing: Listing) -> Entries:
    """A whole listing handed over as :data:`~kbsync.sources.Entries`."""
    yield from listing.items
    yield from listing.errors
    return Listing((), listing.complete, (), listing.warnings, listing.revision, listing.root)
