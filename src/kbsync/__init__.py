"""kbsync keeps a retrieval knowledge base in sync with changing sources.

The facade: :class:`KnowledgeBase` and the results its methods return, and a
handful of names that reach the whole pure core. Everything else is importable
from its module, but only these are promised.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbsync.app.knowledge_base import (
        Collected,
        DocumentDiff,
        DocumentRef,
        Erased,
        Erasure,
        HistoryEntry,
        KnowledgeBase,
        SearchMode,
        SearchResults,
        Status,
        SyncResult,
        Verification,
    )
    from kbsync.app.results import ChangedRegion, Rebuilt
    from kbsync.app.status import RunSummary
    from kbsync.core.chunking import ByteParams, LocalParams, TTTDParams, chunk_stream, chunk_text
    from kbsync.core.chunking.bytecdc import byte_chunks
    from kbsync.core.compare import compare
    from kbsync.core.costs import BillBound, EmbeddingCost, SyncTime
    from kbsync.core.identity import IDENTITY_SCHEMA_VERSION
    from kbsync.core.normalize import NORMALIZER_VERSION, NormalizedText, normalize
    from kbsync.errors import KbsyncError, ParameterError
    from kbsync.model import (
        Boundary,
        ByteChunk,
        ChangeKind,
        ChangeReport,
        Chunk,
        ChunkingDiagnostics,
        ChunkingResult,
        FieldChange,
        Region,
        Verdict,
    )
    from kbsync.report import DocumentChange, SourceResult
    from kbsync.store import DocumentText, Hit, RunRecord
    from kbsync.sync.mirror import Reconciliation

# Where each public name lives: imported when first asked for, so that importing a part
# of kbsync (``kbsync.sync``, ``kbsync.core.chunking``) or starting a command that needs
# little loads only what it uses.
_HOMES = {
    "compare": "kbsync.core.compare",
    "normalize": "kbsync.core.normalize",
    "ByteParams": "kbsync.core.chunking",
    "LocalParams": "kbsync.core.chunking",
    "TTTDParams": "kbsync.core.chunking",
    "chunk_stream": "kbsync.core.chunking",
    "chunk_text": "kbsync.core.chunking",
    "byte_chunks": "kbsync.core.chunking.bytecdc",
    "KbsyncError": "kbsync.errors",
    "ParameterError": "kbsync.errors",
    "IDENTITY_SCHEMA_VERSION": "kbsync.core.identity",
    "Collected": "kbsync.app.knowledge_base",
    "DocumentDiff": "kbsync.app.knowledge_base",
    "DocumentRef": "kbsync.app.knowledge_base",
    "Erased": "kbsync.app.knowledge_base",
    "Erasure": "kbsync.app.knowledge_base",
    "HistoryEntry": "kbsync.app.knowledge_base",
    "KnowledgeBase": "kbsync.app.knowledge_base",
    "SearchMode": "kbsync.app.knowledge_base",
    "SearchResults": "kbsync.app.knowledge_base",
    "Status": "kbsync.app.knowledge_base",
    "SyncResult": "kbsync.app.knowledge_base",
    "Verification": "kbsync.app.knowledge_base",
    "Boundary": "kbsync.model",
    "ByteChunk": "kbsync.model",
    "ChangeKind": "kbsync.model",
    "ChangeReport": "kbsync.model",
    "Chunk": "kbsync.model",
    "ChunkingDiagnostics": "kbsync.model",
    "ChunkingResult": "kbsync.model",
    "Region": "kbsync.model",
    "Verdict": "kbsync.model",
    "NORMALIZER_VERSION": "kbsync.core.normalize",
    "NormalizedText": "kbsync.core.normalize",
    "DocumentText": "kbsync.store",
    "Hit": "kbsync.store",
    "RunRecord": "kbsync.store",
    "BillBound": "kbsync.core.costs",
    "EmbeddingCost": "kbsync.core.costs",
    "SyncTime": "kbsync.core.costs",
    "FieldChange": "kbsync.model",
    "Reconciliation": "kbsync.sync.mirror",
    "DocumentChange": "kbsync.report",
    "SourceResult": "kbsync.report",
    "ChangedRegion": "kbsync.app.results",
    "Rebuilt": "kbsync.app.results",
    "RunSummary": "kbsync.app.status",
}

__version__ = "0.1.0"

__all__ = [
    "IDENTITY_SCHEMA_VERSION",
    "NORMALIZER_VERSION",
    "BillBound",
    "Boundary",
    "ByteChunk",
    "ByteParams",
    "ChangeKind",
    "ChangeReport",
    "ChangedRegion",
    "Chunk",
    "ChunkingDiagnostics",
    "ChunkingResult",
    "Collected",
    "DocumentChange",
    "DocumentDiff",
    "DocumentRef",
    "DocumentText",
    "EmbeddingCost",
    "Erased",
    "Erasure",
    "FieldChange",
    "HistoryEntry",
    "Hit",
    "KbsyncError",
    "KnowledgeBase",
    "LocalParams",
    "NormalizedText",
    "ParameterError",
    "Rebuilt",
    "Reconciliation",
    "Region",
    "RunRecord",
    "RunSummary",
    "SearchMode",
    "SearchResults",
    "SourceResult",
    "Status",
    "SyncResult",
    "SyncTime",
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


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kbsync' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
