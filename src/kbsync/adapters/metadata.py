"""The metadata both adapters attach: one vocabulary for chunks and search hits."""

from __future__ import annotations

from typing import Any

from kbsync.model import Chunk
from kbsync.store import Hit

__all__ = ["CHUNK_KEYS", "HIT_KEYS", "chunk_metadata", "hit_metadata"]

CHUNK_KEYS = ("start", "end", "chunk_index", "chunk_identity", "token_count", "boundary")
HIT_KEYS = ("source", "key", "title", "heading", "start", "end", "chunk_index",
            "chunk_identity", "score", "context_first", "context_last", "context_tokens")


def chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    """A chunk's offsets in the split text, its index, identity, size and boundary kind."""
    return {"start": chunk.start, "end": chunk.end, "chunk_index": chunk.index,
            "chunk_identity": chunk.identity, "token_count": chunk.token_count,
            "boundary": str(chunk.boundary)}


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """Where a search hit comes from: document, heading, chunk offsets and identity, score,
    and the chunk range of its context window (the chunk itself when returned without one)."""
    return {"source": hit.source, "key": hit.key, "title": hit.title, "heading": hit.heading,
            "start": hit.start, "end": hit.end, "chunk_index": hit.index,
            "chunk_identity": hit.digest, "score": hit.score, "context_first": hit.first,
            "context_last": hit.last, "context_tokens": hit.context_tokens}
