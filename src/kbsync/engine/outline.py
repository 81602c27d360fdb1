"""What a status reads of ``kbsync.toml``: its store, embedder and sources, each checked into
its settings, and how the file is found and its tables read.

Why a module of its own: ``kbsync status`` runs in shell prompts and cron checks and must
start at once, and the rest of a configuration (``[chunker]``, ``[index]``, ``[search]``,
``[vectors]``, :mod:`~kbsync.engine.config`) names the sync's and the pure core's types;
reading an outline imports only the kinds' registries.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kbsync.embed.kinds import EmbedderConfig
from kbsync.errors import ConfigError, KbsyncError
from kbsync.settings import shown
from kbsync.sources.kinds import SourceConfig, infer_kind
from kbsync.store.kinds import StoreConfig, StoreKind, store_kind

__all__ = [
    "CONFIG_NAME",
    "TABLES",
    "Outline",
    "known_tables",
    "load_outline",
    "outline_of",
    "read_tables",
    "table_of",
]

CONFIG_NAME = "kbsync.toml"

# What kbsync.toml may hold; anything else is a misspelling (a table that is silently
# ignored, such as `[[source]]`, could otherwise drop every source and, with it, every
# document).
TABLES = ("store", "chunker", "embedder", "index", "search", "vectors", "sources")


@dataclass(frozen=True, slots=True)
class Outline:
    """What a status shows of a ``kbsync.toml``: its file, store, embedder and sources, each
    checked into its settings (:func:`load_outline`)."""

    file: Path
    store: StoreConfig = field(default_factory=StoreConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    sources: tuple[SourceConfig, ...] = ()

    @property
    def root(self) -> Path:
        """The folder of ``kbsync.toml``: every path in it is relative to this."""
        return self.file.parent

    @property
    def store_kind(self) -> StoreKind[Any]:
        return store_kind(self.store.kind)

    @property
    def state_dir(self) -> Path:
        """Where the knowledge base keeps its local state (scratch files, the writer lock)."""
        return self.store_kind.state_dir(self.store.settings, self.root)

    @property
    def store_location(self) -> str:
        """The store in a few words: its file, or its URL."""
        return self.store_kind.describe(self.store.settings, self.root)


def load_outline(path: str | Path = CONFIG_NAME) -> Outline:
    """The store, embedder and sources of a configuration file, checked as
    :func:`~kbsync.engine.loading.load_config` checks them; its other tables are not read."""
    file, data = read_tables(path)
    try:
        known_tables(data)
        return outline_of(file.resolve(), data)
    except KbsyncError as exc:
        raise ConfigError(f"{file}: {exc}") from None


def read_tables(path: str | Path) -> tuple[Path, dict[str, Any]]:
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


def known_tables(data: Mapping[str, Any]) -> None:
    """ConfigError for a table kbsync.toml may not hold, naming the one it resembles."""
    for name in data:
        if name not in TABLES:
            import difflib  # only to name a misspelt table

            close = difflib.get_close_matches(name, TABLES, n=1)
            hint = (f"; did you mean {_shown_table(close[0])}?" if close
                    else f" (known: {', '.join(map(_shown_table, TABLES))})")
            raise ConfigError(f"unknown table {_shown_table(name, data[name])}{hint}")


def outline_of(file: Path, data: Mapping[str, Any]) -> Outline:
    """The outline of the tables ``data`` of ``file``, each checked into its settings."""
    sources = _sources(data.get("sources", []))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError("two sources share a name")
    return Outline(file=file, store=StoreConfig(table_of(data, "store")),
                   embedder=EmbedderConfig(table_of(data, "embedder")), sources=sources)


def table_of(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The table ``name`` (empty when the file has none); ConfigError when it is not a table."""
    table = data.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[{name}] must be a table, got {shown(table)}")
    return table


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
