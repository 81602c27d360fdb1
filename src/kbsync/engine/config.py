"""A parsed ``kbsync.toml``, and the defaults ``kbsync init`` writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbsync.model import SearchMode
from kbsync.source_kinds import SourceConfig
from kbsync.sync import Chunker

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CHUNKER",
    "DEFAULT_CONTEXT_TOKENS",
    "EMBEDDER_SETTINGS",
    "MODEL_TAIL_ABOVE",
    "Config",
]

CONFIG_NAME = "kbsync.toml"


# Embed small, return big (DESIGN.md §7; benchmarks/retrieval): chunks of whole
# sentences and paragraphs, ~90 tokens on average, fit every model's window, retrieve
# better than word-level cuts and re-embed little after edits; a search returns each
# hit with its section neighbours up to 512 tokens.
DEFAULT_CHUNKER = Chunker("sentences", {"min_tokens": 48, "max_tokens": 192})


# With a model, `kbsync init` also cuts the closing sentences of long paragraphs into
# chunks of their own (SentenceParams.tail_above): a short sentence matches a question
# about it closely. On the long-document QA set it raised vector recall@5 with context
# from 92.4 to 94.8 and lowered full-text recall@5 from 95.0 to 93.8, so the hashing
# embedder, whose search is full text, keeps whole paragraphs.
MODEL_TAIL_ABOVE = 100


DEFAULT_CONTEXT_TOKENS = 512


@dataclass(frozen=True, slots=True)


class Config:
    """A parsed ``kbsync.toml``."""

    file: Path
    store: str = ".kbsync/kbsync.db"
    chunker: Chunker = field(default_factory=Chunker)
    embedder: dict[str, Any] = field(default_factory=lambda: {"kind": "hashing",
                                                              "dimension": 1024})
    sources: tuple[SourceConfig, ...] = ()
    index: dict[str, Any] = field(default_factory=dict)
    context_tokens: int = 0
    # ``[search] mode``: None ranks by the embedder (see default_search_mode).
    search_mode: SearchMode | None = None
    vectors: dict[str, Any] = field(default_factory=dict)
    # A PostgreSQL store: ``[store] url`` (no password in it), the name of the environment
    # variable that holds the password (else libpq's pgpass or service file), a schema.
    store_url: str = ""
    store_password_env: str = ""
    store_schema: str = ""
    # ``[store] index_memory``: maintenance_work_mem for building a vector index ("1GB");
    # empty leaves the server's setting.
    store_index_memory: str = ""

    @property
    def root(self) -> Path:
        return self.file.parent

    @property
    def default_search_mode(self) -> SearchMode:
        """How a search ranks when it is not told: ``[search] mode``, else full text over
        the hashing embedder, else hybrid.

        The hashing embedder's vectors are lexical: fused with full-text ranks they only
        add noise (on the long-document QA set recall@5 fell from 94.8 to 89.4).
        """
        if self.search_mode is not None:
            return self.search_mode
        return "text" if self.embedder.get("kind", "hashing") == "hashing" else "hybrid"

    @property
    def store_path(self) -> Path:
        return self.root / self.store

    @property
    def lock_path(self) -> Path:
        return self.store_path.with_name(self.store_path.name + ".lock")


# [embedder] settings of kbsync's own, not options of the embedder's class: the check of
# chunk sizes against its window, and the price `kbsync plan` estimates with.
EMBEDDER_SETTINGS = ("kind", "allow_truncation", "price_per_million_tokens")
