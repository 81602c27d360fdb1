"""Configuration -> components: the one place that knows concrete classes.

A knowledge base is a ``kbsync.toml`` file; every path in it is relative to the
file's folder. The engine reads it (:mod:`~kbsync.engine.loading`) and writes it
(:mod:`~kbsync.engine.writing`) as a :class:`~kbsync.engine.config.Config`, and builds
the sources, the store and the embedder it names (:mod:`~kbsync.engine.components`);
:class:`kbsync.app.knowledge_base.KnowledgeBase` receives them as protocols.
"""

from __future__ import annotations

from kbsync.engine.components import (
    check_fit,
    embedder_token_counter,
    init_embedder,
    make_embedder,
    make_reranker,
    make_sink,
    make_sources,
    open_store,
    store_exists,
    writer_lock,
)
from kbsync.engine.config import (
    CONFIG_NAME,
    DEFAULT_CHUNKER,
    DEFAULT_CONTEXT_TOKENS,
    MODEL_TAIL_ABOVE,
    Config,
    IndexSettings,
    SearchSettings,
)
from kbsync.engine.loading import load_config
from kbsync.engine.writing import (
    add_source,
    init_config,
    missing_folders,
    refuse_missing_folders,
    remove_source,
)
from kbsync.sources.kinds import SourceConfig

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CHUNKER",
    "DEFAULT_CONTEXT_TOKENS",
    "MODEL_TAIL_ABOVE",
    "Config",
    "IndexSettings",
    "SearchSettings",
    "SourceConfig",
    "add_source",
    "check_fit",
    "embedder_token_counter",
    "init_config",
    "init_embedder",
    "load_config",
    "make_embedder",
    "make_reranker",
    "make_sink",
    "make_sources",
    "missing_folders",
    "open_store",
    "refuse_missing_folders",
    "remove_source",
    "store_exists",
    "writer_lock",
]
