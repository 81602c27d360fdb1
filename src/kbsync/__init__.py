"""kbsync keeps a retrieval knowledge base in sync with changing sources.

The facade: :class:`KnowledgeBase` and the results its methods return, and a
handful of names that reach the whole pure core. Everything else is importable
from its module, but only these are promised.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbsync.chunking import ByteParams, LocalParams, TTTDParams, chunk_stream, chunk_text
    from kbsync.chunking.bytecdc import byte_chunks
    from kbsync.compare import compare
    from kbsync.costs import BillBound, EmbeddingCost
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
    from kbsync.mirror import Reconciliation
    from kbsync.model import (
        Boundary,
        ByteChunk,
        ChangeReport,
        Chunk,
        ChunkingDiagnostics,
        ChunkingResult,
        Region,
        Verdict,
    )
    from kbsync.normalize import NORMALIZER_VERSION, NormalizedText, normalize
    from kbsync.report import DocumentChange, SourceResult
    from kbsync.results import ChangedRegion, Rebuilt, RunSummary
    from kbsync.store import DocumentText, Hit, RunRecord

# Where each public name lives: imported when first asked for, so that importing a part
# of kbsync (``kbsync.sync``, ``kbsync.chunking``) or starting a command that needs
# little loads only what it uses.
_HOMES = {
    "compare": "kbsync.compare",
    "normalize": "kbsync.normalize",
    "ByteParams": "kbsync.chunking",
    "LocalParams": "kbsync.chunking",
    "TTTDParams": "kbsync.chunking",
    "chunk_stream": "kbsync.chunking",
    "chunk_text": "kbsync.chunking",
    "byte_chunks": "kbsync.chunking.bytecdc",
    "KbsyncError": "kbsync.errors",
    "ParameterError": "kbsync.errors",
    "IDENTITY_SCHEMA_VERSION": "kbsync.identity",
    "Collected": "kbsync.knowledge_base",
    "DocumentDiff": "kbsync.knowledge_base",
    "DocumentRef": "kbsync.knowledge_base",
    "Erased": "kbsync.knowledge_base",
    "Erasure": "kbsync.knowledge_base",
    "HistoryEntry": "kbsync.knowledge_base",
    "KnowledgeBase": "kbsync.knowledge_base",
    "SearchMode": "kbsync.knowledge_base",
    "Status": "kbsync.knowledge_base",
    "SyncResult": "kbsync.knowledge_base",
    "Verification": "kbsync.knowledge_base",
    "Boundary": "kbsync.model",
    "ByteChunk": "kbsync.model",
    "ChangeReport": "kbsync.model",
    "Chunk": "kbsync.model",
    "ChunkingDiagnostics": "kbsync.model",
    "ChunkingResult": "kbsync.model",
    "Region": "kbsync.model",
    "Verdict": "kbsync.model",
    "NORMALIZER_VERSION": "kbsync.normalize",
    "NormalizedText": "kbsync.normalize",
    "DocumentText": "kbsync.store",
    "Hit": "kbsync.store",
    "RunRecord": "kbsync.store",
    "BillBound": "kbsync.costs",
    "EmbeddingCost": "kbsync.costs",
    "Reconciliation": "kbsync.mirror",
    "DocumentChange": "kbsync.report",
    "SourceResult": "kbsync.report",
    "ChangedRegion": "kbsync.results",
    "Rebuilt": "kbsync.results",
    "RunSummary": "kbsync.results",
}

__version__ = "0.1.0"

__all__ = [
    "IDENTITY_SCHEMA_VERSION",
    "NORMALIZER_VERSION",
    "BillBound",
    "Boundary",
    "ByteChunk",
    "ByteParams",
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
    "SourceResult",
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


_SHADOWED = frozenset({"compare", "normalize"})
"""Functions that share their names with their modules: ``kbsync.compare`` is the function."""


class _Facade(types.ModuleType):
    """The package, whose attributes ``compare`` and ``normalize`` stay the functions when
    their modules are imported (which would set the attribute to the module), so
    neither needs importing, with NumPy, before it is used."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
