"""Reading ``kbsync.toml``: every table and key typed and checked before anything runs.

Each table is converted into its settings type by :func:`kbsync.settings.parse_settings`
(the kinded ones, sources, embedder, store and vectors, by their kind's): a misspelt key
is refused with the name it resembles, a wrong type names the table, the key, the type
expected and the value found. Nothing is read, written or deleted before the whole file
passes. A status reads the tables it shows (:func:`load_outline`), checked the same way,
without loading the chunking core that checking ``[chunker]`` needs.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kbsync.embed.kinds import EmbedderConfig
from kbsync.engine.config import (
    CONFIG_NAME,
    Config,
    IndexSettings,
    Outline,
    SearchSettings,
    default_chunker,
)
from kbsync.errors import ConfigError, KbsyncError
from kbsync.settings import parse_settings, shown
from kbsync.sources.kinds import SourceConfig, infer_kind
from kbsync.store.kinds import StoreConfig
from kbsync.sync import Chunker

__all__ = ["load_config", "load_outline", "parse_chunker"]


def load_config(path: str | Path = CONFIG_NAME) -> Config:
    """Read and check a configuration file (a folder means its ``kbsync.toml``)."""
    file, data = _read(path)
    try:
        return _parsed(file.resolve(), data)
    except KbsyncError as exc:  # the table is in the file: say which file
        raise ConfigError(f"{file}: {exc}") from None


def load_outline(path: str | Path = CONFIG_NAME) -> Outline:
    """The store, embedder and sources of a configuration file, checked as
    :func:`load_config` checks them; its other tables are not read."""
    file, data = _read(path)
    try:
        _known_tables(data)
        return _outline(file.resolve(), data)
    except KbsyncError as exc:
        raise ConfigError(f"{file}: {exc}") from None


def _read(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The configuration file of ``path`` (a folder means its ``kbsync.toml``) and its tables."""
    file = Path(path)
    if file.is_dir():
        file = file / CONFIG_NAME
    try:
        return file, tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no knowledge base here ({file} does not exist); run `kbsync init` "
                          "first") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the configuration: {exc}") from exc


# What kbsync.toml may hold; anything else is a misspelling (a table that is silently
# ignored, such as `[[source]]`, could otherwise drop every source and, with it, every
# document).
_TABLES = ("store", "chunker", "embedder", "index", "search", "vectors", "sources")


def _known_tables(data: Mapping[str, Any]) -> None:
    for name in data:
        if name not in _TABLES:
            close = difflib.get_close_matches(name, _TABLES, n=1)
            hint = (f"; did you mean {_shown_table(close[0])}?" if close
                    else f" (known: {', '.join(map(_shown_table, _TABLES))})")
            raise ConfigError(f"unknown table {_shown_table(name, data[name])}{hint}")


def _outline(file: Path, data: Mapping[str, Any]) -> Outline:
    sources = _sources(data.get("sources", []))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError("two sources share a name")
    return Outline(file=file, store=StoreConfig(_table(data, "store")),
                   embedder=EmbedderConfig(_table(data, "embedder")), sources=sources)


def _parsed(file: Path, data: Mapping[str, Any]) -> Config:
    from kbsync.vectors.kinds import SinkConfig

    _known_tables(data)
    outline = _outline(file, data)
    vectors = _table(data, "vectors")
    return Config(
        file=file, store=outline.store,
        chunker=parse_chunker(_table(data, "chunker"), outline.embedder.kind),
        embedder=outline.embedder, sources=outline.sources,
        index=parse_settings(_table(data, "index"), IndexSettings, "[index]"),
        search=parse_settings(_table(data, "search"), SearchSettings, "[search]"),
        vectors=SinkConfig(vectors) if vectors else None)


def _table(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The table ``name`` (empty when the file has none); ConfigError when it is not a table."""
    table = data.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[{name}] must be a table, got {shown(table)}")
    return table


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


def _sources(tables: object) -> tuple[SourceConfig, ...]:
    """The ``[[sources]]`` tables, each checked by its kind's settings."""
    if not isinstance(tables, list):
        raise ConfigError(f"[[sources]] must be an array of tables, got {shown(tables)}")
    return tuple(_source(table, n) for n, table in enumerate(tables, 1))


def _source(table: object, number: int) -> SourceConfig:
    """One ``[[sources]]`` table; one without ``kind`` (older files) is inferred."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"[[sources]] number {number} must be a table, got {shown(table)}")
    options = dict(table)
    name, kind = options.pop("name", None), options.pop("kind", None)
    shown_as = f"[[sources]] {name!r}" if name is not None else f"[[sources]] number {number}"
    for key, value in (("name", name), ("kind", kind)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{shown_as} {key}: expected a non-empty string, got "
                              f"{shown(value)}")
    try:
        config = SourceConfig(name=str(name or ""), kind=str(kind or infer_kind(options)),
                              options=options)
        config = replace(config, name=config.name or config.location.split(", ", 1)[0]
                         or f"source {number}")
        config.settings  # noqa: B018 - checks every key against the kind's settings
    except ConfigError as exc:
        message = str(exc)  # one that names its table already is not prefixed twice
        raise ConfigError(message if "[[sources]]" in message
                          else f"{shown_as}: {message}") from None
    return config


def _shown_table(name: str, value: Any = None) -> str:
    """A table's name as kbsync.toml writes it: ``[[sources]]`` is an array of tables."""
    return f"[[{name}]]" if name == "sources" or isinstance(value, list) else f"[{name}]"
