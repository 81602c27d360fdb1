"""In-memory fakes of kbsync's protocols, public so users can test their setups too."""

from __future__ import annotations

from kbsync.testing.embedders import CountingEmbedder, WordReranker
from kbsync.testing.sinks import MemorySink
from kbsync.testing.sources import MemorySource
from kbsync.testing.store import MemoryStore

__all__ = ["CountingEmbedder", "MemorySink", "MemorySource", "MemoryStore", "WordReranker"]
