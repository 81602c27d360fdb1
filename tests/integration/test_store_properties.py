"""A hypothesis state machine: random edits of a source, each followed by a sync."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from kbsync.extract.registry import extractor_for
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource
from tests.conftest import Backend

WORDS = ["harbour", "light", "keeper", "stairs", "wick", "night", "storm", "ship", "lamp", "rock"]
KEYS = st.sampled_from([f"doc{i}.txt" for i in range(6)])
BODIES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(
    lambda ws: " ".join(ws).encode())
CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})


class SyncedStore(RuleBasedStateMachine):
    backend = Backend("sqlite")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.store = self.backend.open(Path(self.dir.name))
        self.source = MemorySource()
        self.embedder = CountingEmbedder(dimension=16)
        self._sync()

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()

    def _sync(self) -> None:
        sync_sources([self.source], self.store, self.embedder, extractor_for, CHUNKER,
                     allow_mass_delete=True)

    @rule(key=KEYS, body=BODIES)
    def write(self, key: str, body: bytes) -> None:
        self.source.documents[key] = body
        self._sync()

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.source.documents.pop(key, None)
        self._sync()

    @rule(key=KEYS, new=KEYS)
    def rename(self, key: str, new: str) -> None:
        if key in self.source.documents and new not in self.source.documents:
            self.source.documents[new] = self.source.documents.pop(key)
            self._sync()

    @rule()
    def resync_writes_nothing(self) -> None:
        before = self.store.total_changes
        texts = self.embedder.texts
        self._sync()
        assert self.store.total_changes - before == 1  # its run row
        assert self.embedder.texts == texts

    @invariant()
    def store_matches_the_source(self) -> None:
        assert self.store.verify(self.embedder.identity, None) == []
        assert set(self.store.manifest("memory")) == set(self.source.documents)
        for key, body in self.source.documents.items():
            doc = self.store.document(key)
            assert doc is not None
            assert doc.text.split() == body.decode().split()


def test_random_edits_each_followed_by_a_sync_keep_the_store_sound(backend: Backend) -> None:
    machine = type("SyncedStoreOn" + backend.name.title(), (SyncedStore,), {"backend": backend})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=25, stateful_step_count=12, deadline=None))
