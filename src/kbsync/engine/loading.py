"""Reading ``kbsync.toml``: every table and key typed and checked before anything runs.

Each table is converted into its settings type by :func:`kbsync.settings.parse_settings`
(the kinded ones, sources, embedder, store and vectors, by their kind's): a misspelt key
is refused with the name it resembles, a wrong type names the table, the key, the type
expected and the value found. Nothing is read, written or deleted before the whole file
passes. A status reads the tables it shows (:func:`~kbsync.engine.outline.load_outline`),
checked the same way, without loading the chunking core that checking ``[chunker]`` needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbsync.engine.config import Config, IndexSettings, SearchSettings, default_chunker
from kbsync.engine.outline import (
    CONFIG_NAME,
    Outline,
    known_tables,
    load_outline,
    outline_of,
    read_tables,
    table_of,
)
from kbsync.errors import ConfigError, KbsyncError
from kbsync.settings import parse_settings, shown
from kbsync.sync import Chunker

__all__ = ["load_config", "load_outline", "parse_chunker"]


def load_config(path: str | Path = CONFIG_NAME) -> Config:
    """Read and check a configuration file (a folder means its ``kbsync.toml``)."""
    file, data = read_tables(path)
    try:
        return _parsed(file.resolve(), data)
    except KbsyncError as exc:  # the table is in the file: say which file
        raise ConfigError(f"{file}: {exc}") from None


def _parsed(file: Path, data: Mapping[str, Any]) -> Config:
    from kbsync.vectors.kinds import SinkConfig

    known_tables(data)
    outline: Outline = outline_of(file, data)
    vectors = table_of(data, "vectors")
    return Config(
        file=file, store=outline.store,
        chunker=parse_chunker(table_of(data, "chunker"), outline.embedder.kind),
        embedder=outline.embedder, sources=outline.sources,
        index=parse_settings(table_of(data, "index"), IndexSettings, "[index]"),
        search=parse_settings(table_of(data, "search"), SearchSettings, "[search]"),
        vectors=SinkConfig(vectors) if vectors else None)


def parse_chunker(table: Mapping[str, Any], embedder_kind: str = "hashing") -> Chunker:
    """A ``[chunker]`` table checked into a :class:`~kbsync.sync.Chunker`: its strategy's
    parameters typed and in range, its token counter one kbsync knows.

    A table that names no strategy (or no table) is the default chunker of the embedder's
    kind (:func:`~kbsync.engine.config.default_chunker`) with the keys it sets over the
    default's.
    """
    from kbsync.core.chunking import STRATEGY_PARAMS  # the chunking core, with NumPy

    if "strategy" not in table:
        default = default_chunker(embedder_kind)
        table = {"strategy": default.strategy, **default.params, **table}
    strategy = table["strategy"]
    params_type = STRATEGY_PARAMS.get(strategy) if isinstance(strategy, str) else None
    if params_type is None:
        raise ConfigError(f"[chunker] strategy: expected one of "
                          f"{', '.join(map(repr, STRATEGY_PARAMS))}, got {shown(strategy)}")
    params = {k: v for k, v in table.items() if k != "strategy"}
    parse_settings(params, params_type, "[chunker]")
    chunker = Chunker(strategy, params)
    try:
        chunker.validate()
    except (KbsyncError, ValueError) as exc:  # ParameterError is a ValueError
        raise ConfigError(f"[chunker]: {exc}") from exc
    return chunker


