"""The metadata both adapters attach: one vocabulary for chunks and search hits."""

from __future__ import annotations

from typing import Any

from kbsync.model import Chunk
from kbsync.store import Hit

__all__ = ["CHUNK_KEYS", "HIT_KEYS", "chunk_metadata", "hit_metadata"]

CHUNK_KEYS = ("start", "end", "chunk_index", "chunk_identity", "token_count", "boundary")
HIT_KEYS = ("source", "key", "title", "heading", "start", "end", "chunk_index",
            "chunk_identity", "score", "relevance", "raw_score", "rank", "changed",
            "context_first", "context_last", "context_tokens")


def chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    """A chunk's offsets in the split text, its index, identity, size and boundary kind."""
    return {"start": chunk.start, "end": chunk.end, "chunk_index": chunk.index,
            "chunk_identity": chunk.identity, "token_count": chunk.token_count,
            "boundary": str(chunk.boundary)}


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """What kbsync knows of a search hit: the document's own metadata (front matter, HTML
    meta, PDF info, with their types), then where the hit is (source, key, title, heading,
    the chunk's offsets, index and identity, the chunk range of its context window), when
    the document last changed, its rank, and its relevance from 0 to 1 as ``score`` (and
    ``relevance``) beside the ranking's raw value (``raw_score``: cosine, BM25 or the
    hybrid fusion's, up to 1 by scores or about 0.03 by reciprocal rank, neither of which
    a score threshold can read). kbsync's
    keys win over document metadata of the same name."""
    return {**hit.metadata,
            "source": hit.source, "key": hit.key, "title": hit.title, "heading": hit.heading,
            "start": hit.start, "end": hit.end, "chunk_index": hit.index,
            "chunk_identity": hit.digest, "score": hit.relevance, "relevance": hit.relevance,
            "raw_score": hit.score, "rank": hit.rank, "changed": hit.changed,
            "context_first": hit.first, "context_last": hit.last,
            "context_tokens": hit.context_tokens}
