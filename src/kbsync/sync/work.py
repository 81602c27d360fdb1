"""A worker of a parallel sync: the work queue it claims documents from, and each document
synced start to finish inside the transaction of its claim (:mod:`kbsync.sync.parallel`).

A worker that dies loses nothing: the server rolls its transaction back and the
document goes back to the queue.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from kbsync.core.plan import DocumentVersion, StoredDocument, plan
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.model import SourceItem, SourceStat, Validators
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.apply import apply_plan, count_plan
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import cached_vectors, embed_plan
from kbsync.sync.observe import ExtractorFor, derivation, observe
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.tally import Progress, SourceTally
from kbsync.sync.vector_index import EmbeddedIndex

__all__ = ["ClaimedDocument", "WorkQueue", "drain", "job_data", "job_item", "process"]


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

    def claim(self, run: str) -> AbstractContextManager[ClaimedDocument | None]: ...

    def finish(self, claim: Any, result: Mapping[str, Any]) -> None: ...

    def claim_vanished(self, run: str, source: str, text_hash: str,
                       derivation: str) -> StoredDocument | None: ...

    def claim_vanished_at(self, run: str, source: str, key: str) -> StoredDocument | None: ...

    def stored(self, source: str, key: str) -> StoredDocument | None: ...

    def vanished(self, run: str, source: str) -> list[str]: ...

    def results(self, run: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]: ...

    def abandon_runs(self) -> int: ...

    def open_runs(self) -> list[str]: ...

    def pending(self, run: str) -> int: ...

    def end_run(self, run: str) -> None: ...

    def prepare_vectors(self, dimension: int) -> None: ...

    def finish_vectors(self, dimension: int) -> None: ...


def drain(run: str, sources: Sequence[Source], store: WorkQueue, embedder: Embedder,
          extractor_for: ExtractorFor, chunker: Chunker, *,
          progress: Progress | None = None) -> int:
    """Claim and process documents of ``run`` until none is left unclaimed; how many."""
    by_name = {s.name: s for s in sources}
    skips: dict[str, frozenset[str]] = {}
    done = 0
    while True:
        with store.claim(run) as job:
            if job is None:
                return done
            source = by_name.get(job.source)
            if source is None:
                raise ConfigError(f"this worker has no source named {job.source!r}: workers "
                                  "must use the same kbsync.toml as the sync they serve")
            if job.source not in skips:
                skips[job.source] = store.boilerplate(job.source)
            result = process(job, source, store, embedder, extractor_for, chunker,
                              skips[job.source])
            store.finish(job, result)
        done += 1
        if progress is not None:
            progress("documents", done, 0)


def process(job: ClaimedDocument, source: Source, store: WorkQueue, embedder: Embedder,
             extractor_for: ExtractorFor, chunker: Chunker,
             skip: frozenset[str]) -> dict[str, Any]:
    """One document, start to finish, inside its claim's transaction; its report as data."""
    item = job_item(job.key, job.item)
    extractor = extractor_for(item.media_type)
    made_with = job.item["derivation"]
    if extractor is None or derivation(chunker, extractor.identity) != made_with \
            or job.item["embedder"] != embedder.identity:
        raise ConfigError("this worker's chunker, extractors or embedder differ from those of "
                          "the sync it serves: use the same kbsync.toml and kbsync version")
    out = SourceTally(source=job.source)
    old = store.stored(job.source, job.key)
    observation = observe(source, item, old, extractor, made_with, chunker, out)
    observation, change = screen(store, job.source, observation, old, skip, out,
                                 accept=job.item.get("accept_replacements", False), write=True)
    stored = {job.key: old} if old is not None else {}
    origin: StoredDocument | None = None
    # Without vanished documents in the run (a first sync, say) there is no move to look for.
    if isinstance(observation, DocumentVersion) and old is None and job.item.get("moves", True):
        origin = store.claim_vanished(job.run, job.source, observation.text_hash,
                                      observation.derivation)
        if origin is None and observation.renamed_from is not None:  # edited, says the source
            origin = store.claim_vanished_at(job.run, job.source, observation.renamed_from)
        if origin is not None:  # a rename: the origin's chunks and vectors are kept
            stored[origin.key] = origin
    chunks = observation.chunks if isinstance(observation, DocumentVersion) else ()
    the_plan = plan(job.source, stored, [job.key], [observation],
                    cached_vectors(store, embedder.identity, chunks, skip), skip=skip)
    if origin is not None and any(d.edited for d in the_plan.documents):
        change = compare_stored(store, job.source, observation, origin, skip)
    count_plan(out, the_plan.documents)
    tokens = {c.digest: c.tokens for c in observation.chunks} \
        if isinstance(observation, DocumentVersion) else {}
    out.embedding_tokens = sum(tokens[d] for d in the_plan.to_embed)
    held, failed = embed_plan(the_plan, embedder, out, None, cache=store, keep=False, hold=True)
    apply_plan(the_plan, {}, failed, store, EmbeddedIndex(store), embedder, out, None, held=held)
    if change is not None and any(reports_change(d) for d in the_plan.documents):
        out.note_change(job.key, change)
    return out.to_dict()


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
