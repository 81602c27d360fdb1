"""Vector sink kinds: the one place that maps a ``[vectors]`` table's ``kind`` to its sink.

A kind is a name, a frozen settings type (the table's keys, typed and checked before
anything runs, see :mod:`kbsync.settings`) and a build function; the sink's client
library (an extra) is imported inside :meth:`SinkKind.build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kbsync.errors import ConfigError, ParameterError
from kbsync.settings import parse_settings
from kbsync.vectors import VectorSink

__all__ = [
    "SINK_KINDS",
    "LanceDBSettings",
    "QdrantSettings",
    "SinkConfig",
    "SinkKind",
    "sink_kind",
]

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class QdrantSettings:
    """Qdrant: its embedded local mode in a folder (``path``) or a server (``url``), with
    the key in the environment variable ``api_key_env``."""

    path: str | None = None
    url: str | None = None
    collection: str = "kbsync"
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.url is None):
            raise ParameterError("qdrant needs exactly one of `path` or `url`")


@dataclass(frozen=True, slots=True)
class LanceDBSettings:
    """LanceDB: a database folder (``path``) and a table in it."""

    path: str
    table: str = "kbsync"


@dataclass(frozen=True, slots=True)
class SinkConfig:
    """The ``[vectors]`` table as the file has it, checked when made: its kind and settings."""

    table: Mapping[str, Any]
    kind: str = field(init=False)
    settings: Any = field(init=False)

    def __post_init__(self) -> None:
        kind = sink_kind(self.table.get("kind"))
        settings = parse_settings({k: v for k, v in self.table.items() if k != "kind"},
                                  kind.settings_type, f"[vectors] {kind.name}")
        object.__setattr__(self, "kind", kind.name)
        object.__setattr__(self, "settings", settings)


class SinkKind(Protocol[S]):
    """What kbsync needs to know of one kind of external vector store."""

    name: str
    settings_type: type[S]

    def build(self, settings: S, root: Path) -> VectorSink:
        """The sink (paths relative to ``root``); DependencyMissingError naming the extra."""
        ...


class _Qdrant:
    name = "qdrant"
    settings_type = QdrantSettings

    def build(self, settings: QdrantSettings, root: Path) -> VectorSink:
        from kbsync.vectors.qdrant import QdrantSink  # needs the `qdrant` extra

        return QdrantSink(path=None if settings.path is None else root / settings.path,
                          url=settings.url, collection=settings.collection,
                          api_key_env=settings.api_key_env)


class _LanceDB:
    name = "lancedb"
    settings_type = LanceDBSettings

    def build(self, settings: LanceDBSettings, root: Path) -> VectorSink:
        from kbsync.vectors.lancedb import LanceDBSink  # needs the `lancedb` extra

        return LanceDBSink(path=root / settings.path, table=settings.table)


SINK_KINDS: dict[str, SinkKind[Any]] = {kind.name: kind for kind in (_Qdrant(), _LanceDB())}
"""Every kind of external vector store, by the ``kind`` its table names."""


def sink_kind(name: object) -> SinkKind[Any]:
    """The kind ``name``; ConfigError listing the kinds for one kbsync does not know."""
    if isinstance(name, str) and name in SINK_KINDS:
        return SINK_KINDS[name]
    raise ConfigError(f"[vectors] kind must be one of {', '.join(sorted(SINK_KINDS))}")
