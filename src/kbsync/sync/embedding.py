"""Embed a plan's cache misses in batches, shortest texts together; backfill what lacks a vector.

The vectors go to the store's embedding cache as they are computed, or are held for
the transaction that applies the plan (:mod:`kbsync.sync.collect`). A plan can be
embedded in a thread of its own (:class:`Embedding`) while the sync
goes on with the store: the model (or the remote service) and the store's writes
then share the machine instead of taking turns. Only that thread calls the embedder
while it runs; the store is touched by the sync's thread alone.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kbsync.core.plan import ChunkDraft, Plan
from kbsync.embed import Embedder
from kbsync.errors import ConfigError
from kbsync.store import EmbeddingCache
from kbsync.sync.collect import CACHE_BYTES, CacheWriter, Collector, Done, Vectors
from kbsync.sync.options import CACHE_SECONDS
from kbsync.sync.tally import Progress, SourceTally, T

__all__ = [
    "EMBEDDED_PREFIX",
    "EMBED_BATCH",
    "EMBED_BATCH_TOKENS",
    "Embedding",
    "Vectors",
    "backfill",
    "by_length",
    "cached_vectors",
    "count_reused",
    "embed_plan",
    "embedded_meta_name",
    "in_background",
    "refuse_dimension_change",
    "token_batches",
]


EMBED_BATCH = 64
"""Texts in one call of the embedder at most."""
EMBED_BATCH_TOKENS = 8192
"""Tokens in one call of the embedder at most (a text longer than that goes alone): texts
go shortest first, so a batch of short chunks holds up to :data:`EMBED_BATCH` of them and
one of long chunks fewer, and a model padding each batch to its longest text does about
the same work per call, whatever the lengths (a GPU is fed batches of one size)."""
_STOP_WAIT = 30.0
"""Seconds a stopping sync waits for the model batch in hand to end (a local model's takes
a few at most)."""
_STOP_POLL = 0.05
EMBEDDED_PREFIX = "embedded "
"""Prefix of the meta entries of :func:`embedded_meta_name`."""


def backfill(source: str, store: EmbeddingCache, embedder: Embedder, out: SourceTally) -> bool:
    """Embed current chunks that have no vector for this embedder; whether all have now.

    That happens when the embedder changes (unchanged documents keep their chunks
    but need new vectors) and when a chunk stops being boilerplate.
    """
    missing = store.unembedded(source, embedder.identity)
    if not missing:
        return True
    before = out.embeddings_computed
    out.embeddings_to_compute += len(missing)
    collect = Collector(out, None, len(missing),
                         CacheWriter(store, embedder.identity, out), keep=False)
    digests = list(missing)
    lengths = embedder.count_tokens([missing[d] for d in digests])
    collect.all(_batches(embedder, by_length(list(zip(digests, lengths, strict=True)), lengths),
                         missing))
    _, failed = collect.finish(hold=False)
    out.embeddings_backfill = out.embeddings_computed - before
    return not failed


def cached_vectors(cache: EmbeddingCache, embedder: str, chunks: Iterable[ChunkDraft],
                   skip: Collection[str] = frozenset(), *, write: bool = True) -> set[str]:
    """The digests of ``chunks`` whose vector for ``embedder`` the cache holds: under
    their own digest, or under another of the same text, adopted
    (:meth:`~kbsync.store.EmbeddingCache.adopt_by_text`; only with ``write`` is the
    vector stored under theirs). ``skip`` (boilerplate, never embedded) is not adopted.

    After a chunker setting changed, most chunks have new identities and old texts: on
    Django's docs, ``max_tokens`` 192 -> 256 gave 16,088 chunks new identities, and 284
    of them new texts (``benchmarks/chunker_change.py``).
    """
    keys = {c.digest: c.embedding_key for c in chunks}
    if not keys:
        return set()
    found = cache.cached(embedder, keys)
    missing = {d: k for d, k in keys.items() if d not in found and d not in skip}
    if missing:
        found |= cache.adopt_by_text(embedder, missing, write=write)
    return found


def refuse_dimension_change(store: EmbeddingCache, embedder: Embedder) -> None:
    """The same model id with another dimension would mix vectors that cannot be compared."""
    model = embedder.identity.rsplit(":", 1)[0]
    for identity, dimension in store.embedder_dimensions().items():
        if identity.rsplit(":", 1)[0] == model and dimension != embedder.dimension:
            raise ConfigError(
                f"the embedder {model} now gives {embedder.dimension}-dimensional vectors, but "
                f"the store holds {dimension}-dimensional ones under the same model id; "
                "give the model a new name or `kbsync erase '*'` and sync again"
            )


def embedded_meta_name(source: str) -> str:
    """The store's meta entry naming the embedder that every current chunk of ``source``
    had a vector for when the last sync of it ended (``sync --verify`` checks again)."""
    return EMBEDDED_PREFIX + source


def embed_plan(
    the_plan: Plan, embedder: Embedder, out: SourceTally, progress: Progress | None,
    cache: EmbeddingCache | None = None, keep: bool = True, *, hold: bool = False,
    cache_seconds: float = CACHE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Vectors, set[str]]:
    """Vectors of the plan's cache misses; digests whose batch failed are returned apart.

    Counts add up in ``out``. With a ``cache``,
    vectors enter the store's embedding cache as they are computed, committed
    every ``cache_seconds`` of ``clock`` (0: every batch) and when embedding
    stops; then only with ``keep`` are they returned too (an external vector
    store needs them; the store finds them in its cache), and memory does not
    grow with a document's chunks. With ``hold`` (and without ``keep``), those not
    committed when embedding ends normally are returned instead, for the caller to
    write with the plan's records (and :func:`save_held` should that write fail).
    """
    return Embedding(the_plan, embedder, background=False).collect(
        out, progress, cache, keep=keep, hold=hold, cache_seconds=cache_seconds, clock=clock)


def in_background(embedder: Embedder) -> bool:
    """Whether a sync embeds with ``embedder`` in a thread of its own, beside the store's
    writes: unless the embedder says its work holds the interpreter lock (``holds_gil``,
    as the hashing embedder's does), when the two would only wait on each other. A
    model or a remote service computes without it."""
    return not getattr(embedder, "holds_gil", False)


class Embedding:
    """A plan's cache misses embedded in a thread of its own, started at once (or, for an
    embedder that holds the interpreter lock, in the sync's thread when collected:
    :func:`in_background`).

    :meth:`collect` takes the vectors in the sync's thread as :func:`embed_plan`
    returns them, committing them to the cache on the way as it does; until then
    the sync may plan and write other batches. Only this thread calls ``embedder``
    while it runs, so an embedder need not be safe to share between threads, and it
    runs ahead of the sync by :data:`CACHE_BYTES` of vectors at most.
    """

    def __init__(self, the_plan: Plan, embedder: Embedder, *,
                 background: bool | None = None) -> None:
        self.plan = the_plan
        self._embedder = embedder
        self._stop = threading.Event()
        self._ended = False  # the thread's last item is taken
        batch_bytes = EMBED_BATCH * 4 * max(1, embedder.dimension)
        self._results: queue.Queue[Done | _Misses | BaseException | None] = queue.Queue(
            maxsize=max(2, CACHE_BYTES // batch_bytes))
        self._thread: threading.Thread | None = None
        if background is None:
            background = in_background(embedder)
        if the_plan.to_embed and background:
            self._thread = threading.Thread(target=self._run, name="kbsync-embedding",
                                            daemon=True)
            self._thread.start()

    def collect(self, out: SourceTally, progress: Progress | None,
                cache: EmbeddingCache | None, *, keep: bool, hold: bool,
                cache_seconds: float = CACHE_SECONDS,
                clock: Callable[[], float] = time.monotonic) -> tuple[Vectors, set[str]]:
        """The vectors and the digests that failed, as :func:`embed_plan` says. Should
        the sync stop meanwhile, what was computed is committed first."""
        if hold and keep:
            raise ValueError("held vectors are returned alone: hold takes keep=False")
        writer = None if cache is None else CacheWriter(cache, self._embedder.identity, out,
                                                         cache_seconds, clock)
        collect = Collector(out, progress, 0, writer, keep)
        try:
            for item in self._taken():
                if isinstance(item, _Misses):
                    out.embeddings_truncated += item.truncated
                    collect = Collector(out, progress, item.count, writer, keep)
                    if not item.count and progress is not None:
                        progress("embed", 0, 0)  # nothing to embed: the batch is done
                else:
                    collect.add(item)
        except BaseException:
            self._halt(writer)
            raise
        count_reused(self.plan, out)
        return collect.finish(hold)

    def stop(self, out: SourceTally, cache: EmbeddingCache) -> None:
        """Stop embedding, committing to ``cache`` (and counting in ``out``) what is
        computed; for a sync that stops before collecting."""
        self._halt(CacheWriter(cache, self._embedder.identity, out))

    def _items(self) -> Iterator[Done | _Misses]:
        """What embedding the plan comes to, in order: how much, then each model batch."""
        if not self.plan.to_embed:
            yield _Misses(0, 0)
            return
        wanted, texts, truncated = _misses(self.plan, self._embedder)
        yield _Misses(len(wanted), truncated)
        for done in _batches(self._embedder, wanted, texts):
            yield done
            if self._stop.is_set():
                return

    def _run(self) -> None:
        try:
            for item in self._items():
                self._results.put(item)
        except BaseException as exc:  # handed to the sync's thread, which raises it
            self._results.put(exc)
        finally:
            self._results.put(None)

    def _taken(self) -> Iterator[Done | _Misses]:
        """The items in the sync's thread: from the embedding thread, or made here."""
        if self._thread is None:
            yield from self._items()
            return
        while (item := self._results.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        self._ended = True

    def _halt(self, writer: CacheWriter | None) -> None:
        """Stop the thread after the model batch in hand, waiting for it at most
        :data:`_STOP_WAIT`, and commit all it has computed.

        Waited for: a process that ends while a thread is inside a native model (torch)
        is aborted on its way out. Not for ever: a remote service may stall.
        """
        self._stop.set()
        deadline = time.monotonic() + _STOP_WAIT
        while self._thread is not None and not self._ended:
            self._take_done(writer)  # a full queue would keep the thread from ending
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                break
            self._thread.join(_STOP_POLL)
        self._take_done(writer)
        if writer is not None:
            writer.commit()

    def _take_done(self, writer: CacheWriter | None) -> None:
        """Take what the thread has queued, its vectors to ``writer``."""
        with contextlib.suppress(queue.Empty):
            while not self._ended:
                item = self._results.get_nowait()
                if item is None:
                    self._ended = True
                elif isinstance(item, Done) and writer is not None:
                    writer.add(item.vectors)


def by_length(items: Sequence[T], lengths: Sequence[int]) -> list[T]:
    """``items`` ordered by their ``lengths`` (in tokens), ties in their given order.

    A batch is padded to its longest text, so batches of texts of about one length
    waste least of the model's work: on real documentation the model was fed 1.39
    times the real word pieces in plan order and 1.06 times in this one
    (``benchmarks/embed.py``).
    """
    return [items[i] for i in sorted(range(len(items)), key=lengths.__getitem__)]


def count_reused(the_plan: Plan, out: SourceTally) -> None:
    """Count the plan's added chunks that need no embedding: the cache holds their vector,
    or another added chunk of the same digest has it embedded, or they are boilerplate.

    Counted like ``chunks["added"]``, one per chunk of a document, so that every added
    chunk is embedded, reused (a digest embedded once for two documents is one of each)
    or boilerplate.
    """
    added = sum(doc.ops.added for doc in the_plan.documents)
    out.embeddings_reused += added - len(the_plan.to_embed) - the_plan.boilerplate_added
    out.boilerplate_added += the_plan.boilerplate_added


@dataclass(frozen=True, slots=True)
class _Misses:
    """What a plan has to embed: how many texts, and how many of them the model truncates."""

    count: int
    truncated: int


def _misses(the_plan: Plan, embedder: Embedder,
            ) -> tuple[list[tuple[str, int]], dict[str, str], int]:
    """The plan's texts to embed (digest, tokens), shortest first, with every text by digest
    and how many of them are over the embedder's input limit (it truncates them)."""
    chunks = {c.digest: c for d in the_plan.documents if d.version is not None
              for c in d.version.chunks}
    texts = {digest: c.text for digest, c in chunks.items()}
    wanted = list(the_plan.to_embed)
    limit = embedder.max_input_tokens
    truncated = 0
    if limit is not None and wanted:
        lengths = embedder.count_tokens([texts[d] for d in wanted])
        truncated = sum(n > limit for n in lengths)
    else:
        lengths = [chunks[d].tokens for d in wanted]
    return by_length(list(zip(wanted, lengths, strict=True)), lengths), texts, truncated


def token_batches(items: Sequence[tuple[T, int]], count: int = EMBED_BATCH,
                  tokens: int = EMBED_BATCH_TOKENS) -> Iterator[list[T]]:
    """``items`` (each with its tokens) cut in order into batches of at most ``count`` items
    and ``tokens`` tokens; an item over ``tokens`` makes a batch of its own."""
    batch: list[T] = []
    held = 0
    for item, n in items:
        if batch and (len(batch) == count or held + n > tokens):
            yield batch
            batch, held = [], 0
        batch.append(item)
        held += n
    if batch:
        yield batch


def _batches(embedder: Embedder, wanted: list[tuple[str, int]],
             texts: Mapping[str, str]) -> Iterator[Done]:
    """The vectors of ``wanted`` digests, a model batch at a time (:func:`token_batches`).

    A batch that fails is tried again one text at a time, so one bad chunk fails
    only its own document.
    """
    start = 0
    for batch in token_batches(wanted):
        start += len(batch)
        done = Done({}, done=start)
        try:
            done.vectors.update(_embed_batch(embedder, batch, texts))
        except Exception:  # a provider's failure must not half-apply anything
            for one in batch:
                try:
                    done.vectors.update(_embed_batch(embedder, [one], texts))
                except Exception as exc:
                    done.failed.add(one)
                    done.warnings.append(f"embedding failed for chunk {one[:12]}: {exc}")
        yield done


def _embed_batch(embedder: Embedder, batch: list[str], texts: Mapping[str, str]) -> Vectors:
    result = embedder.embed([texts[d] for d in batch])
    if result.shape != (len(batch), embedder.dimension):
        raise ValueError(f"the embedder returned shape {result.shape} for {len(batch)} texts")
    if not np.isfinite(result).all():
        raise ValueError("the embedder returned non-finite values")
    return dict(zip(batch, result, strict=True))
