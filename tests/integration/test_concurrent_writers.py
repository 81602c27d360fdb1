"""Writers at once on one PostgreSQL store (workers, Ray's store actors): transactions that
add the same new chunk texts in opposite orders both commit, never deadlocked."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import Action, ChunkDraft, DocumentPlan, DocumentVersion
from kbsync.store.postgres import PostgresStore
from tests.conftest import Backend

SOURCE = "s"
NOW = "2024-01-01T00:00:00Z"


def _new(key: str, digests: Sequence[str]) -> DocumentPlan:
    chunks = tuple(ChunkDraft(d, f"text of {d}", 0, None, 0, 1, 1, "end",
                              embedding_text_key(f"text of {d}")) for d in digests)
    version = DocumentVersion(key=key, locator=key, media_type="text/plain", stat=None,
                              bytes_hash="b", text_hash="t", derivation="d", title=None,
                              metadata="{}", text=f"text of {key}", chunks=chunks)
    return DocumentPlan(key, Action.NEW, version)


@pytest.fixture
def two_connections(postgres_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    backend = Backend("postgres", postgres_url)
    schema = backend.schema()
    first = PostgresStore(postgres_url, schema=schema)
    second = PostgresStore(postgres_url, schema=schema)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
        backend.drop()


def test_two_batches_adding_the_same_new_texts_in_opposite_orders_both_commit(
        two_connections: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two_connections
    # Each batch writes its first document, waits until the other has written its own,
    # then writes a document holding the text the other one added first.
    both_wrote_one = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    def batch(store: PostgresStore, keys: tuple[str, str], digests: tuple[str, str]) -> None:
        try:
            with store.batch():
                store.apply(SOURCE, _new(keys[0], [digests[0]]), {}, "e", NOW)
                store.get_meta("chunker")  # a read: what the batch wrote reaches the server
                both_wrote_one.wait()
                store.apply(SOURCE, _new(keys[1], [digests[1]]), {}, "e", NOW)
        except BaseException as exc:  # collected: a thread's error is the test's
            errors.append(exc)

    threads = [threading.Thread(target=batch, args=(first, ("a1", "a2"), ("d1", "d2"))),
               threading.Thread(target=batch, args=(second, ("b1", "b2"), ("d2", "d1")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(first.manifest(SOURCE)) == ["a1", "a2", "b1", "b2"]
    texts = {d.key: d.chunk_digests for d in first.with_digests(
        SOURCE, list(first.manifest(SOURCE).values()))}
    assert texts == {"a1": ("d1",), "a2": ("d2",), "b1": ("d2",), "b2": ("d1",)}
