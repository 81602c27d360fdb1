"""Embedder kinds: the one place that maps an ``[embedder]`` table's ``kind`` to its embedder.

A kind is a name, a frozen settings type (every key of its table, typed and checked
before anything runs, see :mod:`kbsync.settings`) and a build function; a new kind of
embedder is one :class:`EmbedderKind` here and one entry in :data:`EMBEDDER_KINDS`.
Providers with an extra are imported inside :meth:`EmbedderKind.build`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

from msgspec import Meta

from kbsync.embed.providers.local_settings import LocalSettings
from kbsync.embed.providers.openai_settings import OpenAISettings
from kbsync.errors import ConfigError
from kbsync.settings import keys_of, parse_settings

if TYPE_CHECKING:
    from kbsync.core.costs import BillBasis
    from kbsync.embed import Embedder

__all__ = [
    "EMBEDDER_KINDS",
    "EmbedderConfig",
    "EmbedderKind",
    "HashingSettings",
    "LocalSettings",
    "embedder_kind",
]

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class HashingSettings:
    """The offline hashing embedder: lexical vectors of ``dimension`` buckets."""

    dimension: Annotated[int, Meta(ge=8)] = 1024


@dataclass(frozen=True, slots=True)
class _Common:
    """The keys of ``[embedder]`` that are kbsync's own, whatever the kind."""

    kind: str = "hashing"
    allow_truncation: bool = False
    """Allow chunks longer than the model's input window (their ends are never retrievable)."""
    price_per_million_tokens: Annotated[float, Meta(ge=0)] | None = None
    """What ``kbsync plan`` prices the embedding bill with."""


@dataclass(frozen=True, slots=True)
class EmbedderConfig:
    """An ``[embedder]`` table as the file has it, checked when made: its kind, the kind's
    settings and kbsync's own keys (:class:`~kbsync.errors.ConfigError` naming the key)."""

    table: Mapping[str, Any] = field(default_factory=lambda: {"kind": "hashing",
                                                              "dimension": 1024})
    kind: str = field(init=False)
    settings: Any = field(init=False)
    allow_truncation: bool = field(init=False)
    price_per_million_tokens: float | None = field(init=False)

    def __post_init__(self) -> None:
        common_keys = keys_of(_Common)
        common = parse_settings({k: v for k, v in self.table.items() if k in common_keys},
                                _Common, "[embedder]")
        kind = embedder_kind(common.kind)
        settings = parse_settings({k: v for k, v in self.table.items()
                                   if k not in common_keys},
                                  kind.settings_type, f"[embedder] {kind.name}")
        for name, value in (("kind", kind.name), ("settings", settings),
                            ("allow_truncation", common.allow_truncation),
                            ("price_per_million_tokens", common.price_per_million_tokens)):
            object.__setattr__(self, name, value)


class EmbedderKind(Protocol[S]):
    """What kbsync needs to know of one kind of embedder."""

    name: str
    settings_type: type[S]
    bill: BillBasis
    """What embedding costs, so what a sync asks before it embeds much
    (:func:`kbsync.core.costs.bill_bound`): nothing (computed here for free), the time of a
    local model, or the money of a priced remote service."""

    def build(self, settings: S) -> Embedder:
        """The embedder; DependencyMissingError naming the extra when it is not installed."""
        ...


class _Hashing:
    name = "hashing"
    settings_type = HashingSettings
    bill: BillBasis = "free"  # a million tokens a second: nothing worth asking about

    def build(self, settings: HashingSettings) -> Embedder:
        from kbsync.embed.hashing import HashingEmbedder

        return HashingEmbedder(settings.dimension)


class _Local:
    name = "local"
    settings_type = LocalSettings
    bill: BillBasis = "time"

    def build(self, settings: LocalSettings) -> Embedder:
        from kbsync.embed.providers.local import LocalEmbedder  # needs the `local` extra

        return LocalEmbedder(**dataclasses.asdict(settings))


class _OpenAI:
    name = "openai"
    settings_type = OpenAISettings
    bill: BillBasis = "money"

    def build(self, settings: OpenAISettings) -> Embedder:
        from kbsync.embed.providers.openai import OpenAIEmbedder  # needs the `openai` extra

        return OpenAIEmbedder(settings)


EMBEDDER_KINDS: dict[str, EmbedderKind[Any]] = {
    kind.name: kind for kind in (_Hashing(), _Local(), _OpenAI())}
"""Every kind of embedder, by the ``kind`` its table names."""


def embedder_kind(name: str) -> EmbedderKind[Any]:
    """The kind ``name``; ConfigError listing the kinds for one kbsync does not know."""
    try:
        return EMBEDDER_KINDS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(EMBEDDER_KINDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown embedder kind {name!r} (available: "
                          f"{', '.join(EMBEDDER_KINDS)}){hint}") from None
