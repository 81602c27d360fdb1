"""The sync's steps composed by hand, every value they hand each other sent through pickle
(as a driver running them in other processes does), give the single-process driver's store
and report."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, TypeVar

from kbsync.core.plan import StoredDocument, Unchanged
from kbsync.extract.registry import extractor_for
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.sync.context import Context, ReadJob
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import list_source
from kbsync.sync.observe import count_unchanged, deriver
from kbsync.sync.scratch import Facts, Scratch, Waiting, facts_of
from kbsync.sync.steps import (
    apply_batch,
    decide,
    delete_gone,
    embed_batch,
    finish_source,
    gate,
    merge_results,
    observe_batch,
    plan_batch,
)
from kbsync.sync.tally import Clock, SourceTally, SyncReport
from kbsync.sync.vector_index import EmbeddedIndex
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore

CHUNKER = Chunker("tttd", {"min_tokens": 8, "max_tokens": 32, "primary_bits": 3,
                           "backup_bits": 2})
NOTICE = b" ".join(b"notice%d" % (n % 13) for n in range(40))
T = TypeVar("T")


def _sent(value: T) -> T:
    """``value`` as another process receives it."""
    return pickle.loads(pickle.dumps(value))  # type: ignore[no-any-return]


def _body(i: int) -> bytes:
    return b" ".join(b"w%dx%d" % (i, n % 17) for n in range(60)) + b"\n\n" + NOTICE


def _documents(edit: int) -> dict[str, bytes | None]:
    docs: dict[str, bytes | None] = {f"doc{i}.txt": _body(i) for i in range(8)}
    if edit:
        docs["doc1.txt"] = _body(1) + b" an added closing line"
        docs["renamed.txt"] = docs.pop("doc2.txt")
        del docs["doc3.txt"]
    return docs


def _by_hand(source: MemorySource, store: MemoryStore, embedder: CountingEmbedder,
             folder: Path) -> SourceTally:
    """List, gate, observe (a batch of two, sent), decide, then plan, embed and apply each
    batch of two with its tally made apart and sent back, delete, finish."""
    report = SyncReport(dry_run=False, started="now", embedder=embedder.identity)
    ctx = Context(store, embedder, extractor_for, CHUNKER, SyncOptions(), None,
                  EmbeddedIndex(store), Clock(report))
    out = SourceTally(source=source.name)
    memory = FailureMemory(store, source.name)
    derive = deriver(extractor_for, CHUNKER)
    with Scratch(folder) as scratch:
        listed = list_source(source, store, derive, False, scratch, out)
        stored = scratch.stored_count()
        count_unchanged(scratch, False, out)
        jobs: list[ReadJob] = []
        kept: dict[str, tuple[bytes, Facts]] = {}  # elsewhere: what a queue would hold

        def read(batch: list[ReadJob]) -> None:
            done = _sent(observe_batch(source, _sent(batch), extractor_for, CHUNKER))
            merge_results(ctx, out, [{**done.tally.to_dict(), "shapes": []}])
            ctx.tally.update(done.shapes)
            for seen, old in done.observations:
                if not isinstance(seen, Unchanged):
                    kept[seen.key] = (pickle.dumps((seen, old)), facts_of(seen, old))

        for entry, old in scratch.listing():
            seen = gate(ctx, entry, old, derive, memory, out)
            if isinstance(seen, ReadJob):
                jobs.append(seen)
                if len(jobs) == 2:
                    read(jobs)
                    jobs = []
            elif seen is not None and not isinstance(seen, Unchanged):
                kept[seen.key] = (pickle.dumps((seen, old)), facts_of(seen, old))
        if jobs:
            read(jobs)
        for _, (_, facts) in sorted(kept.items()):
            scratch.note(_sent(facts))
        decision = _sent(decide(ctx, source.name, scratch, listed.complete, out))
        origins = dict(scratch.moves())
        keys = sorted(kept)
        for start in range(0, len(keys), 2):
            batch = []
            for key in keys[start : start + 2]:
                observation, old = pickle.loads(kept[key][0])
                origin = _origin(store, source.name, origins.get(key))
                batch.append(Waiting(observation, old, origin))
            tally = SourceTally(source=source.name)
            the_plan, _ = plan_batch(ctx, source.name, batch, decision, tally)
            vectors, failed = embed_batch(ctx, _sent(the_plan), tally, None)
            apply_batch(ctx, the_plan, _sent(vectors), failed, decision.skip, tally, None)
            merge_results(ctx, out, [_sent(tally.to_dict())])
        delete_gone(ctx, source.name, scratch, stored, False, out)
    finish_source(ctx, source.name, listed, memory, decision, out)
    return out


def _origin(store: MemoryStore, source: str, key: str | None) -> StoredDocument | None:
    return None if key is None else store.manifest(source)[key]


def _state(store: MemoryStore) -> dict[tuple[str, str], StoredDocument]:
    return {(s, d.key): d for s in sorted(store.source_names())
            for d in store.with_digests(s, store.manifest(s).values())}


def _compared(tally: SourceTally) -> dict[str, object]:
    result = tally.result().to_dict()
    return {k: v for k, v in result.items() if k != "warnings"}


def test_steps_composed_by_hand_over_pickled_values_give_the_single_drivers_store(
        tmp_path: Path) -> None:
    driven, by_hand = MemoryStore(), MemoryStore()
    embedder = CountingEmbedder(dimension=16)
    expected: dict[str, Any] = {}
    for edit in (0, 1):
        result = sync_sources([MemorySource(_documents(edit))], driven, embedder,
                              extractor_for, CHUNKER, SyncOptions(scratch_dir=tmp_path))
        tally = _by_hand(MemorySource(_documents(edit)), by_hand, embedder, tmp_path)
        assert _state(by_hand) == _state(driven)
        assert by_hand.boilerplate("memory") == driven.boilerplate("memory") != frozenset()
        expected = result.sources[0].to_dict()
        assert {k: v for k, v in expected.items() if k != "warnings"} == _compared(tally)
    assert [c["action"] for c in expected["changes"]] == ["modified", "moved", "deleted"]
