"""A hypothesis state machine: edits, renames, deletions, erasures and syncs killed midway.

Whatever happened before, after the next sync the store holds exactly the
documents of a plain dictionary model (the source's), and every invariant holds.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from kbsync.extract.registry import extractor_for
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import SyncOptions, sync_sources
from tests.reliability.harness import crash_in_child, killed
from tests.store_machine import BODIES, CHUNKER, KEYS, EditedSource


class CrashingStore(EditedSource):
    @property
    def path(self) -> Path:
        return self.folder / "kb.db"

    def open_store(self) -> SqliteStore:
        return SqliteStore(self.path)

    @rule(key=KEYS)
    def erase(self, key: str) -> None:
        self.source.documents.pop(key, None)
        self.store.erase(key)
        self.sync()

    @rule(edits=st.lists(st.tuples(KEYS, st.none() | BODIES), min_size=1, max_size=4),
          at=st.integers(1, 120))
    def crashing_sync(self, edits: list[tuple[str, bytes | None]], at: int) -> None:
        """Edit, then sync in a child killed at its ``at``-th write step; then sync again."""
        for key, body in edits:
            if body is None:
                self.source.documents.pop(key, None)
            else:
                self.source.documents[key] = body
        self.store.close()  # a connection must not cross a fork

        def doomed() -> None:
            store = SqliteStore(self.path)
            sync_sources([self.source], store, self.embedder, extractor_for, CHUNKER,
                         options=SyncOptions(allow_mass_delete=True, accept_replacements=True))

        status = crash_in_child(doomed, crash_at=at)
        assert killed(status) or status == 0  # 0: the sync had fewer write steps
        self.store = SqliteStore(self.path)
        self.sync()


TestCrashingStore = CrashingStore.TestCase
TestCrashingStore.settings = settings(max_examples=20, stateful_step_count=10, deadline=None)
