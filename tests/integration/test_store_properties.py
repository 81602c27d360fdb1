"""A hypothesis state machine: random edits of a source, each followed by a sync."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import rule, run_state_machine_as_test

from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.conftest import Backend
from tests.store_machine import EditedSource


class SyncedStore(EditedSource):
    backend = Backend("sqlite")

    def __init__(self) -> None:
        super().__init__()
        self.sync()

    def open_store(self) -> SqliteStore | PostgresStore:
        return self.backend.open(self.folder)

    @rule()
    def resync_writes_nothing(self) -> None:
        before = self.store.total_changes
        texts = self.embedder.texts
        self.sync()
        assert self.store.total_changes - before == 1  # its run row
        assert self.embedder.texts == texts


def test_random_edits_each_followed_by_a_sync_keep_the_store_sound(backend: Backend) -> None:
    machine = type("SyncedStoreOn" + backend.name.title(), (SyncedStore,), {"backend": backend})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=25, stateful_step_count=12, deadline=None))
