"""The embedding bill of a sync: refuse, before anything is embedded, one over its bound."""

from __future__ import annotations

from collections.abc import Iterable

from kbsync.core.plan import Observation
from kbsync.embed import Embedder
from kbsync.errors import ConfirmationRequiredError
from kbsync.store import EmbeddingCache
from kbsync.sync.scratch import Scratch

__all__ = ["confirm_bill"]


def confirm_bill(store: EmbeddingCache, embedder: Embedder, source: str, scratch: Scratch,
                 skip: frozenset[str], limit: int, *, embedded: bool,
                 setting: str = "", observations: Iterable[Observation] | None = None) -> None:
    """Refuse, before anything of the source is embedded, a bill over ``limit`` tokens.

    The bill is the tokens of the chunks read in this run that are neither cached
    (under their digest or, as after a chunker change, their text) nor boilerplate,
    and of the stored chunks that have no vector for this embedder (a new embedder
    re-embeds every document); the cache is asked about the first only when all of
    them together may exceed it. ``embedded`` says the stored chunks all have their
    vector (:func:`~kbsync.sync.embedding.embedded_meta_name`). ``setting`` names where
    the bound comes from (``[index] confirm_above_tokens = {limit}`` when empty);
    ``observations`` are the source's observations when ``scratch`` only noted them.
    """
    identity = embedder.identity
    missing = {} if embedded else store.unembedded(source, identity)
    chunks = len(missing)
    tokens = sum(embedder.count_tokens(list(missing.values()))) if missing else 0
    if scratch.fresh_tokens_at_most() + tokens <= limit:
        return
    for page in scratch.fresh_chunks(observations):
        cached = store.cached(identity, [d for d, _, _ in page])
        wanted = [(d, n, key) for d, n, key in page
                  if d not in cached and d not in skip and d not in missing]
        adopted = store.adopt_by_text(identity, {d: key for d, _, key in wanted}, write=False)
        for d, n, _ in wanted:
            if d not in adopted:
                chunks += 1
                tokens += n
    if tokens > limit:
        bound = setting or f"[index] confirm_above_tokens = {limit:,}"
        raise ConfirmationRequiredError(
            f"source {source}: this sync would embed {chunks:,} chunks ({tokens:,} tokens), "
            f"over {bound}; nothing of it was embedded or written. See what with "
            "`kbsync plan`, or sync with --yes")
