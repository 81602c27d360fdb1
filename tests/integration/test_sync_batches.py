"""A sync plans, embeds and applies a source in bounded batches, with the result of one plan."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbsync.embed import Vectors
from kbsync.extract.registry import extractor_for
from kbsync.report import SyncResult
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import BatchLimits, Chunker, SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, ProgressRecorder
from tests.reliability.harness import dump

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
DISCLAIMER = ("Legal notice. Quarterly figures are unaudited and the zorblax clause applies "
              "to every reader in every jurisdiction without exception. ") * 12


def _text(i: int) -> bytes:
    return (f"Document {i} talks about topic {i} and the unique word w{i}x. " * 30
            + "\n\n" + DISCLAIMER).encode()


def _first() -> dict[str, bytes | None]:
    return {f"doc{i:02}.txt": _text(i) for i in range(14)}


def _second() -> dict[str, bytes | None]:
    """Renames at both ends of the key order, two new copies of one vanished text,
    an edit, a deletion and a new document."""
    docs = _first()
    docs["a-renamed.txt"] = docs.pop("doc01.txt")
    docs["z-renamed.txt"] = docs.pop("doc00.txt")
    gone = docs.pop("doc02.txt")
    docs["b-copy.txt"] = docs["y-copy.txt"] = gone
    docs["doc03.txt"] = _text(3).replace(b"talks about", b"now writes about", 5)
    del docs["doc04.txt"]
    docs["doc99.txt"] = _text(99)
    return docs


def _comparable(result: SyncResult) -> dict[str, Any]:
    """A report without what depends on the clock."""
    report = result.to_dict()
    for key in ("started", "finished", "seconds"):
        report.pop(key, None)
    return report


def _sync(source: MemorySource, store: SqliteStore, limits: BatchLimits,
          *, dry_run: bool = False) -> SyncResult:
    return sync_sources([source], store, CountingEmbedder(), extractor_for, CHUNKER,
                        options=SyncOptions(dry_run=dry_run, batch=limits))


def test_a_sync_in_tiny_batches_gives_the_store_and_report_of_one_batch(tmp_path: Path) -> None:
    stores = {name: SqliteStore(tmp_path / f"{name}.db") for name in ("tiny", "whole")}
    limits = {"tiny": BatchLimits(documents=2), "whole": BatchLimits(documents=10_000)}
    sources = {name: MemorySource(_first()) for name in stores}
    try:
        for step in (_first, _second):
            reports: dict[str, dict[str, Any]] = {}
            for name, store in stores.items():
                sources[name].documents = step()
                planned = _sync(sources[name], store, limits[name], dry_run=True)
                done = _sync(sources[name], store, limits[name])
                reports[name] = {"plan": _comparable(planned), "sync": _comparable(done)}
            assert reports["tiny"] == reports["whole"]
            assert dump(tmp_path / "tiny.db") == dump(tmp_path / "whole.db")
        sync = reports["tiny"]["sync"]
        actions = {c["key"]: c["action"] for c in sync["sources"][0]["changes"]}
        assert actions == {"a-renamed.txt": "moved", "z-renamed.txt": "moved",
                           "b-copy.txt": "moved", "y-copy.txt": "new",
                           "doc03.txt": "modified", "doc04.txt": "deleted",
                           "doc99.txt": "new"}
        assert sync["sources"][0]["boilerplate_chunks"] > 0
        assert stores["tiny"].verify(CountingEmbedder().identity, None) == []
    finally:
        for store in stores.values():
            store.close()


class _WatchingEmbedder(CountingEmbedder):
    """Notes, at every call, how many documents the store file already holds, and which
    documents the texts are of (each document's texts hold its word ``q<i>z``)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.seen: list[tuple[int, int, set[int]]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            (stored,) = db.execute("SELECT count(*) FROM documents").fetchone()
        finally:
            db.close()
        docs = {int(m) for t in texts for m in re.findall(r"q(\d)z", t)}
        self.seen.append((stored, len(texts), docs))
        return super().embed(texts)


def test_each_batch_is_embedded_while_at_most_the_one_before_it_is_applied(
        tmp_path: Path) -> None:
    docs: dict[str, bytes | None] = {
        f"doc{i}.txt": f"Document {i} is about subject {i} alone, word q{i}z. ".encode() * 20
        for i in range(9)}
    store = SqliteStore(tmp_path / "kb.db")
    embedder = _WatchingEmbedder(tmp_path / "kb.db")
    ticks: dict[str, list[tuple[int, int]]] = {}
    try:
        report = sync_sources([MemorySource(docs)], store, embedder, extractor_for, CHUNKER,
                              options=SyncOptions(batch=BatchLimits(documents=3)),
                              progress=lambda stage, done, total:
                              ticks.setdefault(stage, []).append((done, total)))
    finally:
        store.close()
    assert report.total("new") == 9
    # Three batches of three documents, embedded in order, each in calls of its own, while
    # the batch before it is applied (or once it is): never while an older one is not.
    batches = [{d // 3 for d in docs} for _, _, docs in embedder.seen]
    assert all(len(b) == 1 for b in batches)
    order = [b.pop() for b in batches]
    assert order == sorted(order)
    assert set(order) == {0, 1, 2}
    for (stored, _, _), batch in zip(embedder.seen, order, strict=True):
        assert 3 * max(0, batch - 1) <= stored <= 3 * batch
    assert sum(size for _, size, _ in embedder.seen) == report.sources[0].embeddings_computed
    # Progress goes on from batch to batch against the source's total: in documents, and
    # the embedding in chunks (those of the documents chunked in this run).
    chunks = report.sources[0].chunks["added"]
    assert chunks > 9
    assert ticks["apply"][-1] == (9, 9)
    assert ticks["embed"][-1] == (chunks, chunks)
    for stage, total in (("read", 9), ("embed", chunks), ("apply", 9)):
        done = [d for d, _ in ticks[stage]]
        assert done == sorted(done)
        assert {of for _, of in ticks[stage]} == {total}


class _Recording(CountingEmbedder):
    """Remembers the texts of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        return super().embed(texts)


def test_the_embedding_progress_advances_with_the_chunks_of_each_batch(tmp_path: Path) -> None:
    """A batch of one long document and batches of short ones: the embedding's progress
    moves by each batch's chunks, not by its one document (it read 1/5 once the long
    document, most of the work, was embedded)."""
    docs: dict[str, bytes | None] = {
        "a-long.txt": b" ".join(f"Paragraph {i} of the long report, on tide {i}z.".encode()
                                for i in range(300)),
        **{f"short{i}.txt": f"A short note {i} on lantern q{i}.".encode() for i in range(4)}}
    ticks: list[tuple[int, int]] = []
    store = SqliteStore(tmp_path / "kb.db")
    try:
        report = sync_sources([MemorySource(docs)], store, CountingEmbedder(), extractor_for,
                              CHUNKER, options=SyncOptions(batch=BatchLimits(documents=1)),
                              progress=lambda stage, done, total:
                              ticks.append((done, total)) if stage == "embed" else None)
    finally:
        store.close()
    chunks = report.sources[0].chunks["added"]
    assert chunks > 20
    assert {total for _, total in ticks} == {chunks}
    assert ticks[-1] == (chunks, chunks)
    # The long document's batch came first: once embedded, all but the short notes' four.
    assert (chunks - 4, chunks) in ticks, ticks


def test_chunks_are_embedded_in_batches_of_about_one_length(tmp_path: Path) -> None:
    words = "tide harbour crane lantern quay ledger rope gull".split()
    docs = {f"doc{i:02d}.txt": " ".join(f"{words[(i + j) % 8]}{i}x{j}"
                                        for j in range(20 + 37 * i)).encode()
            for i in range(24)}
    embedder = _Recording()
    store = SqliteStore(tmp_path / "kb.db")
    try:
        sync_sources([MemorySource(docs)], store, embedder, extractor_for,
                     Chunker("tttd", {"min_tokens": 8, "max_tokens": 64}))
    finally:
        store.close()
    lengths = [embedder.count_tokens([t])[0] for batch in embedder.batches for t in batch]
    assert len(embedder.batches) > 1
    assert lengths == sorted(lengths)  # shortest first, so no batch pads short texts far


def _deleting(count: int) -> dict[str, bytes | None]:
    """The first documents less the first ``count`` (a sync that deletes that many)."""
    return {key: text for n, (key, text) in enumerate(sorted(_first().items())) if n >= count}


def test_every_stage_knows_its_total_before_its_first_tick_and_never_goes_back(
        tmp_path: Path) -> None:
    """In batches of three, a first sync, then one that deletes and edits, of two sources:
    each stage of each source is one bar whose total never changes, counting up to it (it
    read 757/757, then 821/1,025: each batch added its own total)."""
    store = SqliteStore(tmp_path / "kb.db")
    try:
        first = ProgressRecorder()
        sources = [MemorySource(_first(), name="docs"), MemorySource(_deleting(0), name="wiki")]
        sync_sources(sources, store, CountingEmbedder(), extractor_for, CHUNKER,
                     options=SyncOptions(batch=BatchLimits(documents=3)), progress=first)
        again = ProgressRecorder()
        edited = _deleting(5) | {"doc07.txt": _text(77), "doc08.txt": _text(88)}
        report = sync_sources([MemorySource(edited, name="docs"), sources[1]], store,
                              CountingEmbedder(), extractor_for, CHUNKER,
                              options=SyncOptions(batch=BatchLimits(documents=3),
                                                  allow_mass_delete=True), progress=again)
    finally:
        store.close()
    assert report.sources[0].documents["deleted"] == 5
    for recorder, stages in ((first, {"read", "embed", "apply"}),
                             (again, {"read", "embed", "apply", "delete"})):
        assert recorder.stages() == stages
        for stage in stages:
            for run in recorder.runs(stage):
                (total,) = {t for _, t in run}
                assert [d for d, _ in run] == sorted(d for d, _ in run)
                assert run[-1] == (total, total), (stage, run)
    assert [run[0][1] for run in first.runs("apply")] == [14, 14]  # one bar per source
    assert [run[0][1] for run in again.runs("apply")] == [2]  # the two edits; wiki unchanged
    assert [run[0][1] for run in again.runs("delete")] == [5]
