"""A worker of a parallel sync: the work queue it claims batches of documents from, and
each batch synced start to finish inside the transaction of its claim
(:mod:`kbsync.sync.parallel`): read, planned, embedded (the misses of the whole batch,
in model batches across its documents) and applied in one transaction.

A worker that dies loses nothing: the server rolls its transaction back and the
batch goes back to the queue.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from kbsync.core.plan import DocumentVersion, Observation, StoredDocument, plan
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import ChangeReport, SourceItem, SourceStat, Validators
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.apply import apply_plan, count_plan
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import cached_vectors, embed_plan
from kbsync.sync.observe import ExtractorFor, derivation, observe
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.tally import Progress, SourceTally
from kbsync.sync.vector_index import EmbeddedIndex

__all__ = ["CLAIM_BATCH", "ClaimedDocument", "WorkQueue", "drain", "job_data", "job_item",
           "process_batch"]

CLAIM_BATCH = 128
"""Documents a worker claims at once: one claim, one transaction and one embedding pass per
batch, where one per document made a worker wait on the server most of its time."""


class ClaimedDocument(Protocol):
    """A document of a run that this worker holds until its transaction ends."""

    @property
    def run(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def item(self) -> Mapping[str, Any]: ...


@runtime_checkable
class WorkQueue(RecordStore, Protocol):
    """A record store that also holds the work queue of parallel runs (PostgreSQL)."""

    def enqueue(self, run: str, source: str, items: Sequence[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int: ...

    def claim_batch(self, run: str,
                    limit: int) -> AbstractContextManager[Sequence[ClaimedDocument]]: ...

    def finish_batch(self, run: str, source: str, keys: Sequence[str],
                     result: Mapping[str, Any]) -> None: ...

    def stored_many(self, source: str, keys: Sequence[str]) -> dict[str, StoredDocument]: ...

    def claim_vanished(self, run: str, source: str, text_hash: str,
                       derivation: str) -> StoredDocument | None: ...

    def claim_vanished_at(self, run: str, source: str, key: str) -> StoredDocument | None: ...

    def stored(self, source: str, key: str) -> StoredDocument | None: ...

    def vanished(self, run: str, source: str) -> list[str]: ...

    def results(self, run: str, source: str) -> Iterator[dict[str, Any]]: ...

    def abandon_runs(self) -> int: ...

    def open_runs(self) -> list[str]: ...

    def pending(self, run: str) -> int: ...

    def end_run(self, run: str) -> None: ...

    def prepare_vectors(self, dimension: int) -> None: ...

    def finish_vectors(self, dimension: int) -> None: ...


def drain(run: str, sources: Sequence[Source], store: WorkQueue, embedder: Embedder,
          extractor_for: ExtractorFor, chunker: Chunker, *,
          progress: Progress | None = None, batch: int = CLAIM_BATCH) -> int:
    """Claim and process batches of ``run`` until none is left unclaimed; how many
    documents."""
    by_name = {s.name: s for s in sources}
    skips: dict[str, frozenset[str]] = {}
    done = 0
    while True:
        with store.claim_batch(run, batch) as jobs:
            if not jobs:
                return done
            name = jobs[0].source
            source = by_name.get(name)
            if source is None:
                raise ConfigError(f"this worker has no source named {name!r}: workers "
                                  "must use the same kbsync.toml as the sync they serve")
            if name not in skips:
                skips[name] = store.boilerplate(name)
            result = process_batch(jobs, source, store, embedder, extractor_for, chunker,
                                   skips[name])
            store.finish_batch(run, name, [j.key for j in jobs], result)
        done += len(jobs)
        if progress is not None:
            progress("documents", done, 0)


def process_batch(jobs: Sequence[ClaimedDocument], source: Source, store: WorkQueue,
                  embedder: Embedder, extractor_for: ExtractorFor, chunker: Chunker,
                  skip: frozenset[str]) -> dict[str, Any]:
    """A claimed batch of one source, start to finish, inside its claim's transaction: each
    document read and screened, moves matched with this run's vanished documents, then the
    batch planned, its misses embedded together and applied; its report as data."""
    out = SourceTally(source=source.name)
    olds = store.stored_many(source.name, [j.key for j in jobs])
    stored: dict[str, StoredDocument] = dict(olds)
    observations: list[Observation] = []
    changes: dict[str, ChangeReport] = {}
    origins: dict[str, StoredDocument] = {}
    for job in jobs:
        observation, change, origin = _observe(job, source, store, embedder, extractor_for,
                                               chunker, skip, olds.get(job.key), out)
        observations.append(observation)
        if change is not None:
            changes[job.key] = change
        if origin is not None:  # a rename: the origin's chunks and vectors are kept
            stored[origin.key] = origin
            origins[job.key] = origin
    chunks = [c for o in observations if isinstance(o, DocumentVersion) for c in o.chunks]
    the_plan = plan(source.name, stored, [j.key for j in jobs], observations,
                    cached_vectors(store, embedder.identity, chunks, skip), skip=skip)
    for d in the_plan.documents:
        origin = origins.get(d.key)
        if origin is not None and d.edited and d.version is not None:
            # Compared now, while the origin's text is still stored at its old key.
            moved = compare_stored(store, source.name, d.version, origin, skip)
            if moved is not None:
                changes[d.key] = moved
    count_plan(out, the_plan.documents)
    tokens = {c.digest: c.tokens for c in chunks}
    out.embedding_tokens = sum(tokens[d] for d in the_plan.to_embed)
    held, failed = embed_plan(the_plan, embedder, out, None, cache=store, keep=False, hold=True)
    apply_plan(the_plan, {}, failed, store, EmbeddedIndex(store), embedder, out, None, held=held)
    for d in the_plan.documents:
        change = changes.get(d.key)
        if change is not None and reports_change(d):
            out.note_change(d.key, change)
    return out.to_dict()


def _observe(job: ClaimedDocument, source: Source, store: WorkQueue, embedder: Embedder,
             extractor_for: ExtractorFor, chunker: Chunker, skip: frozenset[str],
             old: StoredDocument | None, out: SourceTally,
             ) -> tuple[Observation, ChangeReport | None, StoredDocument | None]:
    """One claimed document read and screened, and the vanished document of this run it
    moved from, if any: what planning the batch needs of it."""
    item = job_item(job.key, job.item)
    extractor = extractor_for(item.media_type)
    made_with = job.item["derivation"]
    if extractor is None or derivation(chunker, extractor.identity) != made_with \
            or job.item["embedder"] != embedder.identity:
        raise ConfigError("this worker's chunker, extractors or embedder differ from those of "
                          "the sync it serves: use the same kbsync.toml and kbsync version")
    observation = observe(source, item, old, extractor, made_with, chunker, out)
    observation, change = screen(store, job.source, observation, old, skip, out,
                                 accept=job.item.get("accept_replacements", False), write=True)
    origin: StoredDocument | None = None
    # Without vanished documents in the run (a first sync, say) there is no move to look for.
    if isinstance(observation, DocumentVersion) and old is None and job.item.get("moves", True):
        origin = store.claim_vanished(job.run, job.source, observation.text_hash,
                                      observation.derivation)
        if origin is None and observation.renamed_from is not None:  # edited, says the source
            origin = store.claim_vanished_at(job.run, job.source, observation.renamed_from)
    return observation, change, origin


def job_data(item: SourceItem, derivation: str, embedder: str,
               moves: bool = True, accept_replacements: bool = False) -> dict[str, Any]:
    """A queued document; ``moves``: whether documents of its source vanished in this run."""
    stat = item.stat
    validators = item.validators
    return {
        "locator": item.locator, "media_type": item.media_type,
        "stat": None if stat is None else [stat.size, stat.mtime_ns, stat.inode, stat.racy],
        "validators": None if validators is None
        else [validators.etag, validators.last_modified],
        "not_modified": item.not_modified, "derivation": derivation, "embedder": embedder,
        "moves": moves, "accept_replacements": accept_replacements,
        "metadata": [list(pair) for pair in item.metadata],
        "renamed_from": item.renamed_from,
    }


def job_item(key: str, data: Mapping[str, Any]) -> SourceItem:
    stat, validators = data["stat"], data["validators"]
    return SourceItem(key=key, locator=data["locator"], media_type=data["media_type"],
                      stat=None if stat is None else SourceStat(*stat),
                      validators=None if validators is None else Validators(*validators),
                      not_modified=data["not_modified"],
                      metadata=tuple((str(k), str(v)) for k, v in data.get("metadata", ())),
                      renamed_from=data.get("renamed_from"))
