"""A hypothesis state machine: edits, renames, deletions, erasures and syncs killed midway.

Whatever happened before, after the next sync the store holds exactly the
documents of a plain dictionary model, and every invariant holds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kbsync.extract.registry import extractor_for
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource
from tests.reliability.harness import crash_in_child, killed

WORDS = ["harbour", "light", "keeper", "stairs", "wick", "night", "storm", "ship", "lamp", "rock"]
KEYS = st.sampled_from([f"doc{i}.txt" for i in range(6)])
BODIES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(
    lambda ws: " ".join(ws).encode())
CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})


class CrashingStore(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "kb.db"
        self.store = SqliteStore(self.path)
        self.source = MemorySource()
        self.model: dict[str, bytes] = {}
        self.embedder = CountingEmbedder(dimension=16)

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()

    def _sync(self) -> None:
        sync_sources([self.source], self.store, self.embedder, extractor_for, CHUNKER,
                     allow_mass_delete=True)

    @rule(key=KEYS, body=BODIES)
    def write(self, key: str, body: bytes) -> None:
        self.source.documents[key] = self.model[key] = body
        self._sync()

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.source.documents.pop(key, None)
        self.model.pop(key, None)
        self._sync()

    @rule(key=KEYS, new=KEYS)
    def rename(self, key: str, new: str) -> None:
        if key in self.model and new not in self.model:
            self.source.documents[new] = self.model[new] = self.source.documents.pop(key)
            self.model.pop(key)
            self._sync()

    @rule(key=KEYS)
    def erase(self, key: str) -> None:
        self.source.documents.pop(key, None)
        self.model.pop(key, None)
        self.store.erase(key)
        self._sync()

    @rule(edits=st.lists(st.tuples(KEYS, st.none() | BODIES), min_size=1, max_size=4),
          at=st.integers(1, 120))
    def crashing_sync(self, edits: list[tuple[str, bytes | None]], at: int) -> None:
        """Edit, then sync in a child killed at its ``at``-th write step; then sync again."""
        for key, body in edits:
            if body is None:
                self.source.documents.pop(key, None)
                self.model.pop(key, None)
            else:
                self.source.documents[key] = self.model[key] = body
        self.store.close()  # a connection must not cross a fork

        def doomed() -> None:
            store = SqliteStore(self.path)
            sync_sources([self.source], store, self.embedder, extractor_for, CHUNKER,
                         allow_mass_delete=True)

        status = crash_in_child(doomed, crash_at=at)
        assert killed(status) or status == 0  # 0: the sync had fewer write steps
        self.store = SqliteStore(self.path)
        self._sync()

    @invariant()
    def store_equals_the_model(self) -> None:
        assert self.store.verify(self.embedder.identity, None) == []
        assert set(self.store.manifest("memory")) == set(self.model)
        for key, body in self.model.items():
            doc = self.store.document(key)
            assert doc is not None
            assert doc.text.split() == body.decode().split()


TestCrashingStore = CrashingStore.TestCase
TestCrashingStore.settings = settings(max_examples=20, stateful_step_count=10, deadline=None)
