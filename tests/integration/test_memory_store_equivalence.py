"""MemoryStore behaves as SqliteStore: random edits of a source, synced into both, give the same
reports and the same logical state (documents, versions, current chunks, the embedding cache)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kbsync.extract.registry import extractor_for
from kbsync.model import ItemError
from kbsync.store import RecordStore
from kbsync.store.rows import held_meta_name
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, release_source, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})
WORDS = ["harbour", "light", "keeper", "stairs", "wick", "night", "storm", "ship", "lamp", "rock"]
KEYS = [f"doc{i}.txt" for i in range(5)]
BODIES = st.lists(st.sampled_from(WORDS), min_size=1, max_size=80).map(
    lambda ws: " ".join(ws).encode())
# One edit of the source before a sync: (what, key, other key, body).
# A header many documents share: chunks of it become the source's boilerplate.
HEADER = b"cookie notice we value your privacy " * 12
EDITS = st.tuples(st.sampled_from(["write", "append", "header", "copy", "delete", "rename",
                                   "rename-edit", "fail", "missing", "found", "gc"]),
                  st.sampled_from(KEYS), st.sampled_from(KEYS), BODIES)
STEPS = st.lists(st.tuples(st.lists(EDITS, min_size=1, max_size=3),
                           st.booleans(), st.booleans()), min_size=1, max_size=7)
META = ["chunker", "embedder", "removed_sources", "embedded memory"]


def _edit(source: MemorySource, what: str, key: str, other: str, body: bytes) -> None:
    docs = source.documents
    if what == "write":
        docs[key] = body
    elif what == "append" and docs.get(key):
        docs[key] = (docs[key] or b"") + b" " + body
    elif what == "header":
        docs[key] = HEADER + body
    elif what == "copy" and key in docs:
        docs[other] = docs[key]
    elif what == "delete":
        docs.pop(key, None)
    elif what == "rename" and key in docs and other not in docs:
        docs[other] = docs.pop(key)
    elif what == "rename-edit" and key in docs and other not in docs:  # as git names one
        docs[other] = (docs.pop(key) or b"") + b" " + body
        source.renames[other] = key
    elif what == "fail" and key in docs:
        docs[key] = None
    elif what == "missing" and key in docs:  # a 404 that a later check is to confirm
        source.errors[key] = ItemError(key, "not found (simulated)", missing=True)
    elif what == "found":
        source.errors.clear()


def _logical(store: RecordStore, embedder: str, universe: set[str]) -> dict[str, Any]:
    """What a store holds, through the protocol only (no clock-dependent field)."""
    docs = {(s, d.key): d for s in sorted(store.source_names())
            for d in store.with_digests(s, store.manifest(s).values())}
    texts = {}
    for s, key in docs:
        text = store.document(key, s)
        assert text is not None
        texts[(s, key)] = (text.title, text.text, text.previous, text.generation,
                           text.moved_from, "".join(store.text_pieces(s, key)))
    status = store.status()
    hits = store.search_vector(embedder, CountingEmbedder(16).embed(["harbour light"])[0],
                               1000).hits
    return {
        "documents": docs,
        "texts": texts,
        "chunks": sorted(tuple(r) for r in store.chunk_digests("memory")),
        "indexed": list(store.indexed_chunks()),
        "cached": store.cached(embedder, universe),
        "unembedded": store.unembedded("memory", embedder),
        "dimensions": store.embedder_dimensions(),
        "boilerplate": store.boilerplate("memory"),
        "meta": {name: store.get_meta(name) for name in META}
        | {key: store.get_meta(held_meta_name("memory", key)) for key in KEYS},
        "counts": (status.documents, status.chunks, status.embeddings, status.runs,
                   dict(status.by_source)),
        "vector hits": sorted((h.key, h.index, h.digest, round(h.score, 5)) for h in hits),
    }


@settings(max_examples=60, deadline=None)
@given(steps=STEPS, release=st.booleans(), http=st.booleans())
def test_random_edits_synced_into_a_memory_store_and_a_sqlite_store_agree(
        steps: list[tuple[list[tuple[str, str, str, bytes]], bool, bool]],
        release: bool, http: bool) -> None:
    folder = tempfile.TemporaryDirectory()
    source = MemorySource(http=http)  # with http, ETags and 304 answers instead of a stat
    stores: list[RecordStore] = [MemoryStore(), SqliteStore(Path(folder.name) / "store.db")]
    embedder = CountingEmbedder(dimension=16)
    universe: set[str] = set()
    try:
        for edits, mass, accept in steps:
            collected = []
            for what, key, other, body in edits:
                _edit(source, what, key, other, body)
                if what == "gc":
                    collected.append([s.gc() for s in stores])
            options = SyncOptions(allow_mass_delete=mass, accept_replacements=accept)
            results = [sync_sources([source], s, embedder, extractor_for, CHUNKER, options)
                       for s in stores]
            assert results[0].sources == results[1].sources
            assert all(a == b for a, b in collected)
            for s in stores:
                universe.update(d for _, d in s.chunk_digests("memory"))
            memory, sqlite = (_logical(s, embedder.identity, universe) for s in stores)
            assert memory == sqlite
        # A source no longer configured: kept, or deleted once released.
        for s in stores:
            if release:
                release_source(s, "memory")
        gone = [sync_sources([], s, embedder, extractor_for, CHUNKER) for s in stores]
        assert gone[0].sources == gone[1].sources
        assert _logical(stores[0], embedder.identity, universe) == \
            _logical(stores[1], embedder.identity, universe)
    finally:
        for s in stores:
            s.close()
        folder.cleanup()
