"""Configuration -> components: the one place that knows concrete classes.

A knowledge base is a ``kbsync.toml`` file; every path in it is relative to the
file's folder. The engine reads it (:mod:`~kbsync.engine.loading`) and writes it
(:mod:`~kbsync.engine.writing`) as a :class:`~kbsync.engine.config.Config`, and builds
the sources, the store and the embedder it names (:mod:`~kbsync.engine.components`);
:class:`kbsync.app.knowledge_base.KnowledgeBase` receives them as protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.engine.components import (
        check_fit,
        embedder_token_counter,
        init_embedder,
        make_embedder,
        make_reranker,
        make_sink,
        make_sources,
        open_status,
        open_store,
        store_exists,
        writer_lock,
    )
    from kbsync.engine.config import (
        DEFAULT_CHUNKER,
        DEFAULT_CONTEXT_TOKENS,
        MODEL_TAIL_ABOVE,
        Config,
        IndexSettings,
        SearchSettings,
        chunker_choice,
        default_chunker,
    )
    from kbsync.engine.loading import load_config
    from kbsync.engine.outline import CONFIG_NAME, Outline, load_outline
    from kbsync.engine.writing import (
        add_source,
        init_config,
        missing_folders,
        refuse_missing_folders,
        remove_source,
    )
    from kbsync.sources.kinds import SourceConfig

# Where each name lives: imported when first asked for, so that reading a configuration
# does not import what builds the components it names.
_HOMES = {
    "kbsync.engine.components": (
        "check_fit", "embedder_token_counter", "init_embedder", "make_embedder", "make_reranker",
        "make_sink", "make_sources", "open_status", "open_store", "store_exists", "writer_lock",
    ),
    "kbsync.engine.outline": ("CONFIG_NAME", "Outline", "load_outline"),
    "kbsync.engine.config": (
        "DEFAULT_CHUNKER", "DEFAULT_CONTEXT_TOKENS", "MODEL_TAIL_ABOVE", "Config", "IndexSettings",
        "SearchSettings", "chunker_choice", "default_chunker",
    ),
    "kbsync.engine.loading": ("load_config",),
    "kbsync.engine.writing": (
        "add_source", "init_config", "missing_folders", "refuse_missing_folders", "remove_source",
    ),
    "kbsync.sources.kinds": ("SourceConfig",),
}

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CHUNKER",
    "DEFAULT_CONTEXT_TOKENS",
    "MODEL_TAIL_ABOVE",
    "Config",
    "IndexSettings",
    "Outline",
    "SearchSettings",
    "SourceConfig",
    "add_source",
    "check_fit",
    "chunker_choice",
    "default_chunker",
    "embedder_token_counter",
    "init_config",
    "init_embedder",
    "load_config",
    "load_outline",
    "make_embedder",
    "make_reranker",
    "make_sink",
    "make_sources",
    "missing_folders",
    "open_status",
    "open_store",
    "refuse_missing_folders",
    "remove_source",
    "store_exists",
    "writer_lock",
]


__getattr__ = names_on_first_use(__name__, _HOMES)
"""A name of the package, imported from its module on first use."""
