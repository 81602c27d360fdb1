"""In-memory fakes of kbsync's protocols, public so users can test their setups too.

The store's roles each have a fake of their own (:mod:`kbsync.testing.roles`), so a test
of a step that uses one role needs only that one; :class:`MemoryStore` is all of them.
"""

from __future__ import annotations

from kbsync.testing.embedders import CountingEmbedder, WordReranker
from kbsync.testing.progress import ProgressRecorder
from kbsync.testing.roles import (
    MemoryEmbeddingCache,
    MemoryErasures,
    MemoryFrontier,
    MemoryMeta,
    MemoryRunLog,
)
from kbsync.testing.sinks import MemorySink
from kbsync.testing.sources import MemorySource
from kbsync.testing.store import MemoryStore

__all__ = [
    "CountingEmbedder",
    "MemoryEmbeddingCache",
    "MemoryErasures",
    "MemoryFrontier",
    "MemoryMeta",
    "MemoryRunLog",
    "MemorySink",
    "MemorySource",
    "MemoryStore",
    "ProgressRecorder",
    "WordReranker",
]
