"""The model the store state machines share: one in-memory source edited at random, then synced.

The source's documents are the model: after every step the store must hold
exactly them, and every invariant must hold. Subclasses say how the store is
opened and add rules of their own (resyncs, erasures, syncs killed midway).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kbsync.extract.registry import extractor_for
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource

__all__ = ["BODIES", "CHUNKER", "KEYS", "EditedSource"]

WORDS = ["harbour", "light", "keeper", "stairs", "wick", "night", "storm", "ship", "lamp", "rock"]
KEYS = st.sampled_from([f"doc{i}.txt" for i in range(6)])
BODIES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(
    lambda ws: " ".join(ws).encode())
CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})


class EditedSource(RuleBasedStateMachine):
    """Writes, deletions and renames of a source's documents, each followed by a sync."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.folder = Path(self.dir.name)
        self.source = MemorySource()
        self.embedder = CountingEmbedder(dimension=16)
        self.store = self.open_store()

    def open_store(self) -> SqliteStore | PostgresStore:
        """A store in ``self.folder`` (each machine says which kind)."""
        raise NotImplementedError

    def teardown(self) -> None:
        self.store.close()
        self.dir.cleanup()

    def sync(self) -> None:
        # Random bodies replace documents wholesale: apply them at once (not held).
        sync_sources([self.source], self.store, self.embedder, extractor_for, CHUNKER,
                     options=SyncOptions(allow_mass_delete=True, accept_replacements=True))

    @rule(key=KEYS, body=BODIES)
    def write(self, key: str, body: bytes) -> None:
        self.source.documents[key] = body
        self.sync()

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.source.documents.pop(key, None)
        self.sync()

    @rule(key=KEYS, new=KEYS)
    def rename(self, key: str, new: str) -> None:
        if key in self.source.documents and new not in self.source.documents:
            self.source.documents[new] = self.source.documents.pop(key)
            self.sync()

    @invariant()
    def digest_counts_equal_a_recount(self) -> None:
        """The counts boilerplate is decided by, kept as documents are written (even by a
        sync killed midway), are those of the current chunks."""
        counts: Counter[tuple[str, str]] = Counter()
        for doc in self.store.with_digests("memory", list(self.store.manifest("memory").values())):
            if doc.chunk_digests:
                counts[("", "")] += 1
                counts.update(("", d) for d in set(doc.chunk_digests))
        assert self.store.digest_counts("memory") == dict(counts)

    @invariant()
    def store_matches_the_source(self) -> None:
        assert self.store.verify(self.embedder.identity, None) == []
        assert set(self.store.manifest("memory")) == set(self.source.documents)
        for key, body in self.source.documents.items():
            doc = self.store.document(key)
            assert doc is not None
            assert doc.text.split() == body.decode().split()
