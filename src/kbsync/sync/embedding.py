"""Embed a plan's cache misses in batches, shortest texts together; backfill what lacks a vector.

Vectors enter the store's embedding cache as they are computed, committed at least
once per second of embedding (``BatchLimits.cache_seconds``) and whenever embedding
stops, an interruption included: a sync that is stopped loses none of them, and one
that is killed at most that second's work. Committing every batch of 64 instead
made a fast embedder wait on a disk sync per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kbsync.embed import Embedder
from kbsync.errors import ConfigError, ConfirmationRequiredError
from kbsync.identity import embedding_text_key
from kbsync.plan import ChunkDraft, Plan
from kbsync.store import EmbeddingCache
from kbsync.sync.options import CACHE_SECONDS
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import Progress, SourceTally, T

__all__ = [
    "EMBEDDED_PREFIX",
    "EMBED_BATCH",
    "backfill",
    "by_length",
    "cached_vectors",
    "confirm_bill",
    "count_reused",
    "embed_plan",
    "embedded_meta_name",
    "refuse_dimension_change",
]


EMBED_BATCH = 64
_CACHE_BYTES = 2 * 2**20
"""Bytes of vectors held for the cache at most: the bound that holds with a fast embedder,
whatever its dimension (512 vectors of 1,024 dimensions), so the memory a sync holds
does not depend on how many vectors the machine computes in a second."""


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
    writer = _CacheWriter(store, embedder.identity, out)
    _, failed = _embed_texts(embedder, list(missing), missing, out, None, writer, keep=False)
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
    texts = {c.digest: c.text for c in chunks}
    if not texts:
        return set()
    found = cache.cached(embedder, texts)
    missing = {d: t for d, t in texts.items() if d not in found and d not in skip}
    if missing:
        found |= cache.adopt_by_text(
            embedder, {d: embedding_text_key(t) for d, t in missing.items()}, write=write)
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
    cache: EmbeddingCache | None = None, keep: bool = True, *,
    cache_seconds: float = CACHE_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[dict[str, npt.NDArray[np.float32]], set[str]]:
    """Vectors of the plan's cache misses; digests whose batch failed are returned apart.

    Counts add up in ``out``. With a ``cache``,
    vectors enter the store's embedding cache as they are computed, committed
    every ``cache_seconds`` of ``clock`` (0: every batch) and when embedding
    stops; then only with ``keep`` are they returned too (an external vector
    store needs them; the store finds them in its cache), and memory does not
    grow with a document's chunks.
    """
    chunks = {c.digest: c for d in the_plan.documents if d.version is not None
              for c in d.version.chunks}
    texts = {digest: c.text for digest, c in chunks.items()}
    wanted = list(the_plan.to_embed)
    limit = embedder.max_input_tokens
    if limit is not None and wanted:
        lengths = embedder.count_tokens([texts[d] for d in wanted])
        out.embeddings_truncated += sum(n > limit for n in lengths)
    else:
        lengths = [chunks[d].tokens for d in wanted]
    wanted = by_length(wanted, lengths)
    writer = None if cache is None else _CacheWriter(cache, embedder.identity, out,
                                                     cache_seconds, clock)
    vectors, failed = _embed_texts(embedder, wanted, texts, out, progress, writer, keep)
    count_reused(the_plan, out)
    return vectors, failed


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


class _CacheWriter:
    """Vectors on their way into the embedding cache, committed together every
    ``seconds`` or once they reach :data:`_CACHE_BYTES` (and by a last :meth:`commit`);
    counted once committed."""

    def __init__(self, cache: EmbeddingCache, embedder: str, out: SourceTally,
                 seconds: float = CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._cache, self._embedder, self._out = cache, embedder, out
        self._seconds, self._clock = seconds, clock
        self._pending: dict[str, npt.NDArray[np.float32]] = {}
        self._bytes = 0
        self._since = clock()

    def add(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self._pending.update(vectors)
        self._bytes += sum(vector.nbytes for vector in vectors.values())
        if self._bytes >= _CACHE_BYTES or self._clock() - self._since >= self._seconds:
            self.commit()

    def commit(self) -> None:
        if self._pending:
            pending, self._pending, self._bytes = self._pending, {}, 0
            self._cache.put_vectors(self._embedder, pending)
            self._out.embeddings_computed += len(pending)
        self._since = self._clock()


def _embed_texts(
    embedder: Embedder, wanted: list[str], texts: Mapping[str, str], out: SourceTally,
    progress: Progress | None, writer: _CacheWriter | None = None, keep: bool = True,
) -> tuple[dict[str, npt.NDArray[np.float32]], set[str]]:
    """Vectors of ``wanted`` digests in batches; the digests that could not be embedded apart.

    ``out.embeddings_computed`` counts the vectors as they are done (with a
    ``writer``, as they are committed to the cache), so an interrupted run
    reports what it kept.
    """
    try:
        return _embed_batches(embedder, wanted, texts, out, progress, writer, keep)
    finally:  # an interruption (Ctrl-C, SIGTERM) keeps what was computed
        if writer is not None:
            writer.commit()


def _embed_batches(
    embedder: Embedder, wanted: list[str], texts: Mapping[str, str], out: SourceTally,
    progress: Progress | None, writer: _CacheWriter | None, keep: bool,
) -> tuple[dict[str, npt.NDArray[np.float32]], set[str]]:
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    failed: set[str] = set()
    for start in range(0, len(wanted), EMBED_BATCH):
        batch = wanted[start : start + EMBED_BATCH]
        done: dict[str, npt.NDArray[np.float32]] = {}
        try:
            done.update(_embed_batch(embedder, batch, texts))
        except Exception:  # a provider's failure must not half-apply anything
            # Retry one by one, so one bad chunk fails only its own document.
            for one in batch:
                try:
                    done.update(_embed_batch(embedder, [one], texts))
                except Exception as exc:
                    failed.add(one)
                    out.warnings.append(f"embedding failed for chunk {one[:12]}: {exc}")
        if writer is not None:
            writer.add(done)
        else:
            out.embeddings_computed += len(done)
        if keep or writer is None:
            vectors.update(done)
        if progress is not None:
            progress("embed", min(start + EMBED_BATCH, len(wanted)), len(wanted))
    return vectors, failed


def _embed_batch(embedder: Embedder, batch: list[str], texts: Mapping[str, str],
                 ) -> dict[str, npt.NDArray[np.float32]]:
    result = embedder.embed([texts[d] for d in batch])
    if result.shape != (len(batch), embedder.dimension):
        raise ValueError(f"the embedder returned shape {result.shape} for {len(batch)} texts")
    if not np.isfinite(result).all():
        raise ValueError("the embedder returned non-finite values")
    return dict(zip(batch, result, strict=True))


def confirm_bill(store: EmbeddingCache, embedder: Embedder, source: str, scratch: Scratch,
                 skip: frozenset[str], limit: int, *, embedded: bool) -> None:
    """Refuse, before anything of the source is embedded, a bill over ``limit`` tokens.

    The bill is the tokens of the chunks read in this run that are neither cached
    (under their digest or, as after a chunker change, their text) nor boilerplate,
    and of the stored chunks that have no vector for this embedder (a new embedder
    re-embeds every document); the cache is asked about the first only when all of
    them together exceed it. ``embedded`` says the stored chunks all have their
    vector (:func:`embedded_meta_name`).
    """
    identity = embedder.identity
    missing = {} if embedded else store.unembedded(source, identity)
    chunks = len(missing)
    tokens = sum(embedder.count_tokens(list(missing.values()))) if missing else 0
    if scratch.fresh_tokens() + tokens <= limit:
        return
    for page in scratch.fresh_chunks():
        cached = store.cached(identity, [d for d, _, _ in page])
        wanted = [(d, n, key) for d, n, key in page
                  if d not in cached and d not in skip and d not in missing]
        adopted = store.adopt_by_text(identity, {d: key for d, _, key in wanted}, write=False)
        for d, n, _ in wanted:
            if d not in adopted:
                chunks += 1
                tokens += n
    if tokens > limit:
        raise ConfirmationRequiredError(
            f"source {source}: this sync would embed {chunks:,} chunks ({tokens:,} tokens), "
            f"over [index] confirm_above_tokens = {limit:,}; nothing of it was embedded or "
            "written. See what with `kbsync plan`, or sync with --yes")
