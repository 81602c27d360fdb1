"""kbsync keeps a retrieval knowledge base in sync with changing sources.

The facade: :class:`KnowledgeBase` and the results its methods return, and a
handful of names that reach the whole pure core. Everything else is importable
from its module, but only these are promised.
"""

from __future__ import annotations

from kbsync.chunking import ByteParams, LocalParams, TTTDParams, chunk_stream, chunk_text
from kbsync.chunking.bytecdc import byte_chunks
from kbsync.compare import compare
from kbsync.errors import KbsyncError, ParameterError
from kbsync.identity import IDENTITY_SCHEMA_VERSION
from kbsync.knowledge_base import (
    Collected,
    DocumentDiff,
    DocumentRef,
    Erased,
    Erasure,
    HistoryEntry,
    KnowledgeBase,
    SearchMode,
    Status,
    SyncResult,
    Verification,
)
from kbsync.model import (
    Boundary,
    ByteChunk,
    ChangeKind,
    ChangeReport,
    Chunk,
    ChunkingDiagnostics,
    ChunkingResult,
    Region,
    Verdict,
)
from kbsync.normalize import NORMALIZER_VERSION, NormalizedText, normalize
from kbsync.store import DocumentText, Hit, RunRecord

__version__ = "0.1.0"

__all__ = [
    "IDENTITY_SCHEMA_VERSION",
    "NORMALIZER_VERSION",
    "Boundary",
    "ByteChunk",
    "ByteParams",
    "ChangeKind",
    "ChangeReport",
    "Chunk",
    "ChunkingDiagnostics",
    "ChunkingResult",
    "Collected",
    "DocumentDiff",
    "DocumentRef",
    "DocumentText",
    "Erased",
    "Erasure",
    "HistoryEntry",
    "Hit",
    "KbsyncError",
    "KnowledgeBase",
    "LocalParams",
    "NormalizedText",
    "ParameterError",
    "Region",
    "RunRecord",
    "SearchMode",
    "Status",
    "SyncResult",
    "TTTDParams",
    "Verdict",
    "Verification",
    "__version__",
    "byte_chunks",
    "chunk_stream",
    "chunk_text",
    "compare",
    "normalize",
]
