"""The sync as steps over one context: every driver is a composition of these functions.

Each step is a plain function of a :class:`~kbsync.sync.context.Context` (the store's
roles, the embedder, the extractors, the chunker, the options, the vector index) and of
values that pickle (:mod:`kbsync.sync.context`), so a driver may run it in its own
process, in a worker process or on another machine; a driver only decides where the
values wait in between (a scratch file, the work queue of a PostgreSQL store, memory):

1. list a source (:func:`kbsync.sync.listing.list_source`): its listing and the store's
   manifest of it, into a :class:`~kbsync.sync.scratch.Scratch` file;
2. :func:`gate`: one listed entry against its stored document: settled (unchanged,
   refreshed, failed, still failing as before) or a :class:`ReadJob`;
3. :func:`observe_batch`: read, extract, normalize and chunk a batch of read jobs
   (:class:`ObservedBatch`; a :class:`~kbsync.sync.scratch.Facts` of each is what the
   next step needs of it);
4. :func:`decide`: what needs every document of the source, once they are all
   observed: what vanished, the boilerplate, the moves (each new document's origin),
   the bill guard (:class:`Decision`);
5. :func:`plan_batch`: screen a batch of observations (change reports, held
   replacements), find its cache misses, plan it;
6. :func:`embed_batch`: embed a plan's misses (deduplicated, shortest first, in model
   batches cut by a token budget);
7. :func:`apply_batch`: write a plan, its records and vectors, in one transaction;
8. :func:`delete_gone`: delete what vanished and moved nowhere, a page at a time, behind
   the mass-deletion guard;
9. :func:`merge_results` and :func:`finish_source`: add the tallies of batches made
   elsewhere, settle remembered failures, keep revisit schedules, backfill vectors.

The single-process driver (:mod:`kbsync.sync.single`) runs them in order, a batch's
embedding beside the apply of the one before (:class:`~kbsync.sync.batches.Pipeline`);
the PostgreSQL driver (:mod:`kbsync.sync.parallel`, :mod:`kbsync.sync.work`) runs
steps 3, 5, 6 and 7 in workers that claim batches from its work queue, and the others in
its coordinator; the Ray driver (:mod:`kbsync.sync.ray_driver`) runs steps 3, 6 and 7 on
Ray. All give the same store and the same report. What each does around the steps (the
sources of a run, one source's steps in order, the run's end) is written once, in
:mod:`kbsync.sync.run`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kbsync.core.chunking import ChunkShape, shape_of
from kbsync.core.plan import (
    Action,
    DocumentVersion,
    Failed,
    Observation,
    Plan,
    StoredDocument,
    Unchanged,
    plan,
)
from kbsync.extract import Extractor
from kbsync.model import ChangeReport, Chunk, ItemError, SourceItem
from kbsync.sources import Source
from kbsync.store import Manifest
from kbsync.sync.apply import apply_plan, count_plan, delete_documents, refuse_mass_deletion
from kbsync.sync.bill import confirm_bill
from kbsync.sync.chunker import Chunker
from kbsync.sync.context import Context, Decision, ObservedBatch, ReadJob, shapes_of_data
from kbsync.sync.embedding import (
    Embedding,
    Vectors,
    backfill,
    cached_vectors,
    embedded_meta_name,
)
from kbsync.sync.failures import FailureMemory
from kbsync.sync.listing import Listed, keep_schedules
from kbsync.sync.observe import (
    Derive,
    ExtractorFor,
    observe,
    stat_gate_passes,
    unchanged_observation,
)
from kbsync.sync.replacements import compare_stored, reports_change, screen
from kbsync.sync.scratch import Scratch, Waiting
from kbsync.sync.tally import REPORT_LIMIT, Counted, Progress, SourceTally

__all__ = ["apply_batch", "boilerplate", "decide", "delete_gone", "embed_batch",
           "finish_source", "gate", "merge_results", "observe_batch", "plan_batch"]


def gate(ctx: Context, entry: SourceItem | ItemError, old: StoredDocument | None,
         derive: Derive, memory: FailureMemory, out: SourceTally,
         ) -> Observation | ReadJob | None:
    """Gate 1 for one listed entry: what it comes to without a read, or the job of reading it.

    An entry the listing could not take fails (and keeps its stored version). One the
    stat gate passes is unchanged (counted in ``out`` here) or refreshed; one that failed
    before as it is now is not read (None: counted as still failing by ``memory``).
    """
    if isinstance(entry, ItemError):
        return Failed(entry.key, entry.message, missing=entry.missing)
    made_with = derive(entry.media_type)
    assert made_with is not None
    verify = ctx.options.verify
    if not verify and stat_gate_passes(entry, old, made_with):
        assert old is not None
        out.bytes_skipped += entry.stat.size if entry.stat else 0
        seen = unchanged_observation(entry, old)
        if isinstance(seen, Unchanged):
            out.documents[str(Action.UNCHANGED)] += 1
        return seen
    if not verify and memory.skip(entry, made_with, out):
        out.bytes_skipped += entry.stat.size if entry.stat else 0
        return None
    return ReadJob(entry, old, made_with)


def observe_batch(source: Source, jobs: Iterable[ReadJob], extractor_for: ExtractorFor,
                  chunker: Chunker) -> ObservedBatch:
    """Gates 2 and 3 for each job: read, extract, normalize and chunk (unchanged ones are
    counted in the batch's tally)."""
    tally = SourceTally(source=source.name)
    shapes: Counter[ChunkShape] = Counter()

    def count(chunk: Chunk) -> None:
        shapes[shape_of(chunk)] += 1

    observations: list[tuple[Observation, StoredDocument | None]] = []
    for job in jobs:
        extractor: Extractor | None = extractor_for(job.item.media_type)
        assert extractor is not None
        seen = observe(source, job.item, job.old, extractor, job.derivation, chunker, tally,
                       count)
        if isinstance(seen, Unchanged):
            tally.documents[str(Action.UNCHANGED)] += 1
        observations.append((seen, job.old))
    return ObservedBatch(tuple(observations), tally, shapes)


def boilerplate(store: Manifest, source: str, scratch: Scratch, vanished: int,
                share: float) -> frozenset[str] | None:
    """The source's boilerplate by the store's counts as this run will leave them, when it
    re-chunked or lost some documents (else None: as the store has it)."""
    if not (scratch.rechunked_count() or vanished):
        return None
    return store.boilerplate_counted(source, share, replaced=scratch.replaced(),
                                     added=scratch.added(), members=scratch.members())


def decide(ctx: Context, source: str, scratch: Scratch, complete: bool, out: SourceTally,
           observations: Callable[[], Iterable[Observation]] | None = None) -> Decision:
    """What needs every document of ``source``, once all are observed in ``scratch``.

    What vanished (with a complete listing), the boilerplate (counted before the moves
    are decided: an origin is counted gone, its new key fresh), each new document's
    origin (:meth:`~kbsync.sync.scratch.Scratch.decide_moves`); then, unless a dry
    run, the boilerplate kept, and the bill refused when over its bound
    (``observations``: where the chunks read wait, when not in ``scratch``).
    """
    store, options = ctx.store, ctx.options
    vanished = scratch.vanish() if complete else 0
    counted = boilerplate(store, source, scratch, vanished, options.boilerplate_share)
    shared = store.boilerplate(source) if counted is None else counted
    out.boilerplate_chunks = len(shared)
    scratch.decide_moves()
    skip = frozenset() if options.index_boilerplate else shared
    same = store.boilerplate(source) == skip
    # Whether every current chunk has its vector, as the last sync left it: then
    # nothing since has taken one away (a sync embeds what it applies), and the
    # query of every chunk against the cache is not needed, here or at the end.
    embedded = (not options.verify and same
                and store.get_meta(embedded_meta_name(source)) == ctx.embedder.identity)
    if not options.dry_run:
        store.set_boilerplate(source, skip)
        limit = options.confirm_above_tokens
        if limit is not None:
            confirm_bill(store, ctx.embedder, source, scratch, skip, limit, embedded=embedded,
                         setting=options.bound_setting,
                         observations=None if observations is None else observations())
    return Decision(skip, shared, same, embedded, options.accept_replacements)


def plan_batch(ctx: Context, source: str, batch: Sequence[Waiting], decision: Decision,
               out: SourceTally, assumed: Collection[str] = frozenset(),
               ) -> tuple[Plan, frozenset[str]]:
    """Plan one batch and count it in ``out``; the plan, and the digests it takes as
    embedded only because they are in ``assumed`` (those of earlier batches that are
    not in the cache yet: being embedded, or in a dry run never).

    Each new document moves from the origin :func:`decide` gave it, if any.
    """
    store, skip, write = ctx.store, decision.skip, not ctx.options.dry_run
    olds = {w.old.key: w.old for w in batch if w.old is not None}
    for w in batch:
        seen = w.observation
        if isinstance(seen, Failed) and seen.stat is not None \
                and len(out.unreadable) < REPORT_LIMIT:
            out.unreadable[seen.key] = (seen.stat, seen.derivation, seen.message)
    observations, changes = _screen(ctx, source, [w.observation for w in batch], olds,
                                    decision, out)
    versions = [o for o in observations if isinstance(o, DocumentVersion)]
    # By key, as one plan of the source offers the vanished documents of one text.
    offered = sorted((w.origin for w in batch if w.origin is not None), key=lambda d: d.key)
    filled = {d.key: d for d in store.with_digests(
        source, offered + [olds[v.key] for v in versions if v.key in olds])}
    local = {d.key: filled[d.key] for d in offered}
    for key, old in olds.items():
        local[key] = filled.get(key, old)
    chunks = [c for v in versions for c in v.chunks]
    cached = cached_vectors(store, ctx.embedder.identity, chunks, skip, write=write)
    borrowed = frozenset(c.digest for c in chunks if c.digest in assumed) - cached
    the_plan = plan(source, local, [o.key for o in observations], observations,
                    cached | borrowed, skip=skip, delete=False)
    tokens = {c.digest: c.tokens for c in chunks}
    out.embedding_tokens += sum(tokens[d] for d in the_plan.to_embed)
    out.embeddings_to_compute += len(the_plan.to_embed)
    count_plan(out, the_plan.documents)
    for d in the_plan.documents:
        change = changes.get(d.key)
        if d.edited and d.version is not None and d.previous_key is not None:
            # Compared now, while the origin's text is still stored at its old key.
            change = compare_stored(store, source, d.version, local[d.previous_key],
                                    decision.shared)
        if change is not None and reports_change(d):
            out.note_change(d.key, change)
    ctx.clock.lap("plan")
    return the_plan, borrowed


def _screen(ctx: Context, source: str, observations: list[Observation],
            olds: Mapping[str, StoredDocument], decision: Decision, out: SourceTally,
            ) -> tuple[list[Observation], dict[str, ChangeReport]]:
    """Every observation screened (:func:`~kbsync.sync.replacements.screen`): those to plan
    (a held document becomes :class:`~kbsync.core.plan.Held`) and the change report of
    each one compared."""
    screened: list[Observation] = []
    changes: dict[str, ChangeReport] = {}
    for o in observations:
        seen = screen(ctx.store, source, o, olds.get(o.key), decision.shared, out,
                      accept=decision.accept_replacements, write=not ctx.options.dry_run)
        screened.append(seen.observation)
        if seen.change is not None and isinstance(o, DocumentVersion):
            changes[o.key] = seen.change
    return screened, changes


def embed_batch(ctx: Context, the_plan: Plan, out: SourceTally, progress: Progress | None,
                job: Embedding | None = None) -> tuple[Vectors, set[str]]:
    """The vectors of a plan's misses (``job``: an embedding of it already started) and
    the digests that failed. They enter the embedding cache as they are computed; those
    of the last moments are returned, to be written with the plan (:func:`apply_batch`),
    and all of them when the index needs them (an external vector store)."""
    keep = ctx.index.keeps_fresh_vectors
    job = job or Embedding(the_plan, ctx.embedder, background=False)
    vectors, failed = job.collect(out, progress, ctx.store, keep=keep, hold=not keep,
                                  cache_seconds=ctx.options.batch.cache_seconds)
    ctx.clock.lap("embed")
    return vectors, failed


def apply_batch(ctx: Context, the_plan: Plan, vectors: Vectors, failed: set[str],
                skip: frozenset[str], out: SourceTally, progress: Progress | None) -> None:
    """Write a plan with the vectors :func:`embed_batch` returned, in one transaction of the
    index; a document holding a digest in ``failed`` keeps its previous version."""
    keep = ctx.index.keeps_fresh_vectors
    # The store's own index writes the batch's last vectors in its transaction.
    apply_plan(the_plan, vectors if keep else {}, failed, ctx.store, ctx.index, ctx.embedder,
               out, progress, skip, held=None if keep else vectors)
    ctx.clock.lap("apply")


def delete_gone(ctx: Context, source: str, scratch: Scratch, stored: int,
                allow_mass_delete: bool, out: SourceTally) -> None:
    """Delete what vanished and moved nowhere, a page at a time, unless that needs consent
    (the one policy: :func:`~kbsync.sync.apply.refuse_mass_deletion`)."""
    if refuse_mass_deletion(out, stored, scratch.gone_count(), allow_mass_delete):
        return
    counted = Counted(ctx.progress, scratch.gone_count())
    for page in scratch.gone(ctx.options.batch.documents):
        delete_documents(ctx.store, ctx.index, source, page, ctx.embedder, out,
                         counted.batch(len(page)), dry_run=ctx.options.dry_run)


def merge_results(ctx: Context, out: SourceTally,
                  results: Iterable[Mapping[str, object]]) -> None:
    """Add the tallies of batches done elsewhere (a worker's, as
    :meth:`~kbsync.sync.tally.SourceTally.to_dict` made them, with the shapes of the
    chunks they made) to ``out`` and the run's chunk shapes, in the order given."""
    for result in results:
        out.merge(SourceTally.from_dict(result))
        shapes = result.get("shapes")
        if isinstance(shapes, list):
            ctx.tally.update(shapes_of_data(shapes))


def finish_source(ctx: Context, source: str, listed: Listed, memory: FailureMemory,
                  decision: Decision, out: SourceTally) -> bool:
    """What follows a source's last batch and deletions: its failures sorted from those met
    before and remembered, its revisit schedules kept, the vectors its chunks lack
    computed (boilerplate gone, a new embedder). Whether the vectors of documents left
    alone changed (the index then rewrites them at the run's end)."""
    store, dry_run = ctx.store, ctx.options.dry_run
    memory.settle(out)
    if dry_run:
        if not decision.embedded:
            out.embeddings_backfill = len(store.unembedded(source, ctx.embedder.identity))
        out.embeddings_to_compute += out.embeddings_backfill
        return False
    keep_schedules(store, source, listed.revisited, out)
    if listed.complete:  # else failures of unlisted documents would be forgotten
        memory.save(store)
    if not decision.embedded and backfill(source, store, ctx.embedder, out):
        store.set_meta(embedded_meta_name(source), ctx.embedder.identity)
    ctx.clock.lap("apply")
    return not decision.same_boilerplate or out.embeddings_backfill > 0
