"""A knowledge base's parts built again from its configuration, in another process.

A driver that spreads a sync over a cluster (:mod:`kbsync.sync.ray_driver`) sends each
worker what to build rather than what was built: a store connection, a model in
memory or a source's open handles cannot travel, a configuration can. Every worker
builds the parts it needs once and keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kbsync.embed import Embedder
from kbsync.embed.kinds import LocalSettings, embedder_kind
from kbsync.engine.components import open_store
from kbsync.engine.config import Config
from kbsync.errors import ConfigError
from kbsync.extract import Extractor
from kbsync.extract.registry import extractor_for
from kbsync.sources import Source
from kbsync.sources.kinds import source_kind
from kbsync.store import RecordStore
from kbsync.sync import Chunker

__all__ = ["ConfigRecipe"]


def _no_progress(url: str, done: int, total: int) -> None:
    """A worker's crawl reports no progress: the syncing process reports the run's."""


@dataclass(frozen=True, slots=True)
class ConfigRecipe:
    """The parts :class:`~kbsync.app.knowledge_base.KnowledgeBase` builds from ``config``,
    for a worker elsewhere (:class:`kbsync.sync.ray_pool.Recipe`).

    ``config`` is the knowledge base's, as it was adjusted when opened (the chunker
    counting in the embedder's tokens), so that workers chunk exactly as the syncing
    process derives. Paths in it are absolute: a worker on another machine needs the
    same folders at the same paths, as ``kbsync worker`` does.
    """

    config: Config

    @property
    def chunker(self) -> Chunker:
        return self.config.chunker

    @property
    def many_writers(self) -> bool:
        """Whether several connections may write the store at once (PostgreSQL)."""
        return self.config.store_kind.capabilities.workers

    def source(self, name: str) -> Source:
        """The configured source named ``name``; ConfigError when there is none."""
        for table in self.config.sources:
            if table.name == name:
                return source_kind(table.kind).build(table, self.config.root, _no_progress)
        raise ConfigError(f"{self.config.file}: no source named {name!r}: every worker of a "
                          "sync must read the same kbsync.toml")

    def extractor_for(self, media_type: str) -> Extractor | None:
        """The extractor of a media type, strict about decoding if ``[index]`` says so."""
        return extractor_for(media_type, strict_decoding=self.config.index.strict_decoding)

    def embedder(self, gpu: bool) -> Embedder:
        """The configured embedder; with ``gpu`` (a worker given a GPU), the local model on
        CUDA when its ``device`` is left at the CPU default."""
        table = self.config.embedder
        settings = table.settings
        if gpu and isinstance(settings, LocalSettings) and settings.device == "cpu":
            settings = replace(settings, device="auto")
        return embedder_kind(table.kind).build(settings)

    def store(self) -> RecordStore:
        """A new connection to the configured store, which exists already."""
        return open_store(self.config, create=False)
