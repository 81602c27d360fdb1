"""The sync logic on fakes: MemorySource, CountingEmbedder and MemoryStore, no file or database."""

from __future__ import annotations

from typing import Any

import pytest

from kbsync.core.plan import DocumentPlan, StoredDocument
from kbsync.errors import ConfirmationRequiredError, StoreError
from kbsync.extract.registry import extractor_for
from kbsync.model import ItemError
from kbsync.report import SyncResult
from kbsync.sync import Chunker, SyncOptions, release_source, sync_sources
from kbsync.sync.mirror import reconcile
from kbsync.sync.options import BatchLimits
from kbsync.sync.vector_index import MirroredIndex
from kbsync.testing import CountingEmbedder, MemorySink, MemorySource, MemoryStore

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})
WORDS = ["harbour", "light", "keeper", "stairs", "wick", "night", "storm", "ship", "lamp", "rock"]


def _body(i: int, words: int = 90) -> bytes:
    """A document of its own words, so no two share a chunk by chance."""
    return " ".join(f"{WORDS[(i * 7 + n * 3) % len(WORDS)]}{i}x{n % 11}"
                    for n in range(words)).encode()


def _source(n: int = 6) -> MemorySource:
    return MemorySource({f"doc{i}.txt": _body(i) for i in range(n)})


def _sync(source: MemorySource, store: MemoryStore, embedder: CountingEmbedder,
          **options: object) -> SyncResult:
    return sync_sources([source], store, embedder, extractor_for, CHUNKER,
                        options=SyncOptions(**options))  # type: ignore[arg-type]


def _state(store: MemoryStore) -> dict[tuple[str, str], StoredDocument]:
    """Every stored document with its current chunk digests, read through the protocol."""
    return {(s, d.key): d for s in sorted(store.source_names())
            for d in store.with_digests(s, store.manifest(s).values())}


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder(dimension=16)


def test_a_first_sync_stores_every_document_and_embeds_each_distinct_chunk_once(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    result = _sync(source, store, embedder)
    assert result.total("new") == 6
    digests = {d for doc in _state(store).values() for d in doc.chunk_digests}
    assert embedder.texts == result.sources[0].embeddings_computed == len(digests)
    assert store.cached(embedder.identity, digests) == digests
    assert store.unembedded("memory", embedder.identity) == {}
    assert store.document("doc3.txt") is not None
    assert store.search_text("keeper3x1", 3)[0].key == "doc3.txt"
    query = embedder.embed([store.search_text("keeper3x1", 1)[0].text])[0]
    assert store.search_vector(embedder.identity, query, 1).hits[0].key == "doc3.txt"
    assert [r.report["documents"]["new"] for r in store.runs()] == [6]


def test_a_second_sync_of_an_unchanged_source_reads_embeds_and_changes_nothing(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    before, texts, reads = _state(store), embedder.texts, len(source.reads)
    result = _sync(source, store, embedder)
    assert result.total("unchanged") == 6
    assert result.sources[0].bytes_read == 0
    assert (embedder.texts, len(source.reads)) == (texts, reads)
    assert _state(store) == before


def test_an_edit_embeds_only_the_new_chunks_and_keeps_the_previous_text(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    old = _state(store)[("memory", "doc2.txt")]
    source.documents["doc2.txt"] = _body(2) + b" and a new closing sentence here"
    texts = embedder.texts
    result = _sync(source, store, embedder)
    assert result.total("modified") == 1
    assert result.total("unchanged") == 5
    new = _state(store)[("memory", "doc2.txt")]
    assert new.generation == old.generation + 1
    fresh = set(new.chunk_digests) - set(old.chunk_digests)
    assert 0 < embedder.texts - texts == len(fresh) < len(new.chunk_digests)
    doc = store.document("doc2.txt")
    assert doc is not None
    assert doc.previous is not None
    assert doc.text.endswith("closing sentence here")
    assert not doc.previous.endswith("closing sentence here")


def test_a_rename_is_a_move_that_keeps_every_chunk_and_embeds_nothing(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    old = _state(store)[("memory", "doc1.txt")]
    source.documents["renamed.txt"] = source.documents.pop("doc1.txt")
    texts = embedder.texts
    result = _sync(source, store, embedder)
    assert result.total("moved") == 1
    assert result.total("deleted") == result.total("new") == 0
    assert embedder.texts == texts
    moved = _state(store)[("memory", "renamed.txt")]
    assert (moved.chunk_digests, moved.generation) == (old.chunk_digests, old.generation)
    assert ("memory", "doc1.txt") not in _state(store)


def test_a_vanished_document_is_deleted_and_no_longer_found(embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    gone = set(_state(store)[("memory", "doc4.txt")].chunk_digests)
    del source.documents["doc4.txt"]
    result = _sync(source, store, embedder)
    assert result.total("deleted") == 1
    assert ("memory", "doc4.txt") not in _state(store)
    assert store.search_text("keeper4x1", 5) == []
    assert store.cached(embedder.identity, gone) == gone  # the cache keeps them until gc
    assert store.gc() == {"chunk_texts": len(gone), "embeddings": len(gone)}
    assert store.cached(embedder.identity, gone) == set()


def test_more_than_half_of_a_source_vanishing_deletes_nothing_without_consent(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    for key in ["doc0.txt", "doc1.txt", "doc2.txt", "doc3.txt"]:
        del source.documents[key]
    refused = _sync(source, store, embedder)
    assert refused.sources[0].deletions_blocked
    assert refused.sources[0].deletions_held == 4
    assert ("", "4 of this source's 6 documents are gone, more than half: none was deleted, "
                "all are kept (use --allow-mass-delete)") in refused.sources[0].failures
    assert len(_state(store)) == 6
    allowed = _sync(source, store, embedder, allow_mass_delete=True)
    assert allowed.total("deleted") == 4
    assert len(_state(store)) == 2


def test_an_incomplete_listing_deletes_nothing(embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    del source.documents["doc5.txt"]
    source.complete = False
    assert _sync(source, store, embedder).total("deleted") == 0
    assert ("memory", "doc5.txt") in _state(store)


def test_a_source_no_longer_configured_keeps_its_documents_until_released(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    kept = sync_sources([], store, embedder, extractor_for, CHUNKER)
    assert kept.sources[0].source == "memory"
    assert kept.sources[0].deletions_blocked
    assert len(_state(store)) == 6
    release_source(store, "memory")
    released = sync_sources([], store, embedder, extractor_for, CHUNKER)
    assert released.total("deleted") == 6
    assert _state(store) == {}
    assert store.get_meta("removed_sources") in (None, "[]")


def test_a_document_that_cannot_be_read_fails_alone_and_keeps_its_stored_version(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    old = _state(store)[("memory", "doc0.txt")]
    source.documents["doc0.txt"] = None
    source.documents["doc9.txt"] = _body(9)
    result = _sync(source, store, embedder)
    assert result.total("failed") == 1
    assert result.total("new") == 1
    assert [k for k, _ in result.sources[0].failures] == ["doc0.txt"]
    assert _state(store)[("memory", "doc0.txt")] == old


def test_a_document_whose_embedding_fails_keeps_its_previous_version(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    old = _state(store)[("memory", "doc1.txt")]
    source.documents["doc1.txt"] = _body(1) + b" poisonword"
    embedder.fail_on.append("poisonword")
    result = _sync(source, store, embedder)
    assert result.total("failed") == 1
    assert _state(store)[("memory", "doc1.txt")] == old
    embedder.fail_on.clear()
    assert _sync(source, store, embedder).total("modified") == 1


def test_a_refused_bill_writes_nothing_and_is_recorded_as_interrupted(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    with pytest.raises(ConfirmationRequiredError):
        _sync(source, store, embedder, confirm_above_tokens=10)
    assert _state(store) == {}
    assert embedder.texts == 0
    assert store.runs()[0].report["interrupted"] is True


def test_a_dry_run_plans_without_writing(embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    planned = _sync(source, store, embedder, dry_run=True)
    assert planned.total("new") == 6
    assert planned.sources[0].embeddings_to_compute > 0
    assert (_state(store), store.runs(), embedder.texts) == ({}, [], 0)


def test_a_sync_with_an_external_vector_store_leaves_it_a_mirror_of_the_records(
        embedder: CountingEmbedder) -> None:
    store, source, sink = MemoryStore(), _source(), MemorySink()
    sync_sources([source], store, embedder, extractor_for, CHUNKER,
                 index=MirroredIndex(store, sink))
    source.documents["doc2.txt"] = _body(2) + b" an edit"
    source.documents["moved.txt"] = source.documents.pop("doc3.txt")
    del source.documents["doc4.txt"]
    sync_sources([source], store, embedder, extractor_for, CHUNKER,
                 index=MirroredIndex(store, sink))
    found = reconcile(store, sink, embedder.identity, embedder.dimension)
    assert found.problems() == []
    assert len(sink.points) == len(list(store.indexed_chunks()))
    assert store.pending_outbox() == []


def test_a_rename_the_source_names_with_edits_embeds_only_its_new_chunks(
        embedder: CountingEmbedder) -> None:
    store, source, sink = MemoryStore(), _source(), MemorySink()
    sync_sources([source], store, embedder, extractor_for, CHUNKER,
                 index=MirroredIndex(store, sink))
    old = _state(store)[("memory", "doc1.txt")]
    source.documents["renamed.txt"] = _body(1) + b" and a closing sentence here"
    del source.documents["doc1.txt"]
    source.renames["renamed.txt"] = "doc1.txt"
    texts = embedder.texts
    result = sync_sources([source], store, embedder, extractor_for, CHUNKER,
                          index=MirroredIndex(store, sink))
    assert (result.total("moved"), result.total("new"), result.total("deleted")) == (1, 0, 0)
    moved = _state(store)[("memory", "renamed.txt")]
    new_digests = set(moved.chunk_digests) - set(old.chunk_digests)
    assert new_digests
    assert embedder.texts - texts == len(new_digests)
    assert moved.generation == old.generation + 1
    assert ("memory", "doc1.txt") not in _state(store)
    assert reconcile(store, sink, embedder.identity, embedder.dimension).problems() == []
    keys = {payload.key for _, payload in sink.points.values()}
    assert "renamed.txt" in keys
    assert "doc1.txt" not in keys


class _FailingStore(MemoryStore):
    """A store whose write of one document fails, as a full disk would."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def apply(self, source: str, doc: DocumentPlan, *args: Any, **kwargs: Any) -> None:
        if doc.key == self.key:
            raise StoreError("the disk is full (simulated)")
        super().apply(source, doc, *args, **kwargs)


def test_a_batch_whose_write_fails_midway_keeps_none_of_its_documents(
        embedder: CountingEmbedder) -> None:
    store, source = _FailingStore("doc3.txt"), _source()
    with pytest.raises(StoreError):
        _sync(source, store, embedder)
    assert _state(store) == {}
    assert store.runs()[0].report["interrupted"] is True
    assert store.status().embeddings == embedder.texts > 0  # the cache kept every vector
    store.key = ""
    assert _sync(source, store, embedder).total("new") == 6
    assert store.status().embeddings == embedder.texts  # nothing embedded twice


def test_a_document_found_missing_is_counted_kept_and_cleared_when_it_is_back(
        embedder: CountingEmbedder) -> None:
    store, source = MemoryStore(), _source()
    _sync(source, store, embedder)
    source.errors["doc5.txt"] = ItemError("doc5.txt", "not found (simulated)", missing=True)
    assert _sync(source, store, embedder).total("failed") == 1
    assert _sync(source, store, embedder).total("deleted") == 0
    assert store.manifest("memory")["doc5.txt"].missing == 2
    source.errors.clear()
    assert _sync(source, store, embedder).total("unchanged") == 6
    assert store.manifest("memory")["doc5.txt"].missing == 0


@pytest.mark.parametrize("documents_per_batch", [1, 64])
def test_every_added_chunk_is_embedded_or_reused_when_documents_share_chunks(
        documents_per_batch: int) -> None:
    # A document and a second that ends with its text (two of four: not boilerplate), so
    # their common chunks are embedded once.
    shared = _body(1)
    source = MemorySource({"a.txt": shared, "b.txt": _body(2) + b" " + shared,
                           "c.txt": _body(3), "d.txt": _body(4)})
    embedder = CountingEmbedder()
    done = _sync(source, MemoryStore(), embedder,
                 batch=BatchLimits(documents=documents_per_batch)).sources[0]
    assert done.boilerplate_chunks == 0
    assert done.embeddings_computed == embedder.texts
    assert done.chunks["added"] == done.embeddings_computed + done.embeddings_reused
    assert done.embeddings_reused > 0


def test_embedding_batches_are_cut_by_count_and_by_tokens_in_length_order() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from kbsync.sync.embedding import token_batches

    @given(st.lists(st.integers(1, 400), max_size=200), st.integers(1, 70),
           st.integers(1, 2000))
    def check(lengths: list[int], count: int, tokens: int) -> None:
        items = [(i, n) for i, n in enumerate(lengths)]
        batches = list(token_batches(items, count, tokens))
        assert [i for b in batches for i in b] == list(range(len(lengths)))  # all, in order
        for b in batches:
            assert 1 <= len(b) <= count
            assert len(b) == 1 or sum(lengths[i] for i in b) <= tokens

    check()


class _LoadingEmbedder(CountingEmbedder):
    """A counting embedder that loads a model on its first batch, as the local one does."""

    def __init__(self) -> None:
        super().__init__(dimension=16)
        self.load_seconds: float | None = None

    def embed(self, texts: Any) -> Any:
        if self.load_seconds is None:
            self.load_seconds = 12.5
        return super().embed(texts)


def test_a_sync_s_report_keeps_the_model_load_it_saw_once() -> None:
    """A plan counts the load in the time its sync takes; only the run that loaded says so."""
    store, embedder = MemoryStore(), _LoadingEmbedder()
    first = _sync(_source(), store, embedder)
    assert first.model_load_seconds == 12.5
    assert first.to_dict()["model_load_seconds"] == 12.5
    assert SyncResult.from_dict(first.to_dict()).model_load_seconds == 12.5
    again = _sync(_source(8), store, embedder)
    assert again.sources[0].embeddings_computed
    assert again.model_load_seconds is None
