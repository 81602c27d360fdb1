"""A folder's listing counts as complete only on the device its root was last listed at,
unless it lacks nothing or the move is accepted; the step reads and writes meta only, so
its fake is meta alone."""

from __future__ import annotations

from kbsync.model import RootIdentity
from kbsync.sync.listing import check_root, recorded_root
from kbsync.sync.tally import SourceTally
from kbsync.testing import MemoryMeta


def _check(store: MemoryMeta, root: RootIdentity, lacking: int, *,
           accept: bool = False) -> tuple[bool, SourceTally]:
    out = SourceTally(source="docs")
    complete = check_root(store, "docs", root, True, lambda: lacking, out, accept=accept,
                          write=True)
    return complete, out


def test_a_first_listing_records_its_root() -> None:
    store = MemoryMeta()
    assert _check(store, RootIdentity(8, 100), lacking=0)[0]
    assert recorded_root(store, "docs") == RootIdentity(8, 100)


def test_a_root_on_another_device_that_lacks_documents_deletes_nothing() -> None:
    store = MemoryMeta()
    _check(store, RootIdentity(8, 100), lacking=0)
    complete, out = _check(store, RootIdentity(9, 2), lacking=3)
    assert not complete
    assert "another device" in out.failures[0][1]
    assert recorded_root(store, "docs") == RootIdentity(8, 100)  # the old root stays


def test_an_accepted_move_records_the_new_root() -> None:
    store = MemoryMeta()
    _check(store, RootIdentity(8, 100), lacking=0)
    assert _check(store, RootIdentity(9, 2), lacking=3, accept=True)[0]
    assert recorded_root(store, "docs") == RootIdentity(9, 2)
