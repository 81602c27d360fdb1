"""A parsed ``kbsync.toml``: every table as a typed, checked value, and the defaults ``kbsync
init`` writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from msgspec import Meta

from kbsync.core.costs import DEFAULT_CONFIRM_ABOVE_SECONDS, DEFAULT_CONFIRM_ABOVE_TOKENS
from kbsync.core.plan import BOILERPLATE_SHARE
from kbsync.engine.outline import CONFIG_NAME, Outline
from kbsync.errors import ParameterError
from kbsync.model import Fusion, SearchMode
from kbsync.sync import EMBEDDER_COUNTER, Chunker

if TYPE_CHECKING:
    from kbsync.vectors.kinds import SinkConfig

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_CHUNKER",
    "DEFAULT_CONTEXT_TOKENS",
    "MODEL_TAIL_ABOVE",
    "Config",
    "IndexSettings",
    "Outline",
    "SearchSettings",
    "chunker_choice",
    "default_chunker",
]

# Embed small, return big (DESIGN.md §7; benchmarks/retrieval): chunks of whole
# sentences and paragraphs, ~90 tokens on average, fit every model's window, retrieve
# better than word-level cuts and re-embed little after edits; a search returns each
# hit with its section neighbours up to 512 tokens.
DEFAULT_CHUNKER = Chunker("sentences", {"min_tokens": 48, "max_tokens": 192})


# With a model, `kbsync init` also cuts the closing sentences of long paragraphs into
# chunks of their own (SentenceParams.tail_above): a short sentence matches a question
# about it closely. On the long-document QA set it raised vector recall@5 with context
# from 92.4 to 94.8 and lowered full-text recall@5 from 95.0 to 93.8, so the hashing
# embedder, whose search is full text, keeps whole paragraphs.
MODEL_TAIL_ABOVE = 100

# Embedders with a tokenizer of their own: their chunks are limited in its tokens (an
# estimate of them can put a chunk of links or code past the model's window).
_MODEL_KINDS = ("local", "openai")


def default_chunker(embedder_kind: str) -> Chunker:
    """The chunker of a knowledge base whose ``[chunker]`` does not name a strategy, for the
    kind of its embedder: whatever way the embedder was chosen (``kbsync init``, a
    ``kbsync.toml`` written by hand, ``KnowledgeBase.create``), the same chunks.

    :data:`DEFAULT_CHUNKER`; with a model, counted in the model's own tokens, and the
    closing sentences of long paragraphs cut into chunks of their own
    (:data:`MODEL_TAIL_ABOVE`).
    """
    if embedder_kind in _MODEL_KINDS:
        return Chunker(DEFAULT_CHUNKER.strategy, {
            **DEFAULT_CHUNKER.params, "token_counter": EMBEDDER_COUNTER,
            "tail_above": MODEL_TAIL_ABOVE})
    return DEFAULT_CHUNKER


def chunker_choice(chunker: Chunker, embedder_kind: str) -> str:
    """Why a knowledge base chunks as it does, in a few words (what ``kbsync init`` says)."""
    if chunker != default_chunker(embedder_kind):
        return "as its [chunker] table says"
    if embedder_kind in _MODEL_KINDS:
        return ("the default with a model: counted in its own tokens, the closing sentences "
                "of long paragraphs apart (they match questions about them closely)")
    return ("the default with the hashing embedder: whole sentences and paragraphs, for its "
            "full-text search")


DEFAULT_CONTEXT_TOKENS = 512


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """The ``[index]`` table: how a sync indexes what it reads."""

    boilerplate_share: Annotated[float, Meta(gt=0, le=1)] = BOILERPLATE_SHARE
    """A chunk in more than this share of a source's documents is boilerplate: not indexed."""
    index_boilerplate: bool = False
    """Index boilerplate chunks all the same."""
    strict_decoding: bool = False
    """Refuse a text file with bytes invalid in its encoding instead of replacing them."""
    confirm_above_tokens: Annotated[int, Meta(ge=0)] = DEFAULT_CONFIRM_ABOVE_TOKENS
    """With a priced service, a source whose chunks to embed come to more tokens asks
    first; 0 never asks."""
    confirm_above_seconds: Annotated[int, Meta(ge=0)] = DEFAULT_CONFIRM_ABOVE_SECONDS
    """With a local model, a source whose embedding is estimated to take longer asks
    first; 0 never asks. The hashing embedder never asks."""
    read_workers: Annotated[int, Meta(ge=0)] = 0
    """Processes reading, extracting and chunking documents; 0 is one per core, at most 8."""


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """The ``[search]`` table: how a search ranks and what it returns."""

    context_tokens: Annotated[int, Meta(ge=0)] = 0
    """Return each hit with its section neighbours up to this many tokens (0: the chunk)."""
    mode: SearchMode | None = None
    """How a search ranks when it is not told; none follows the embedder
    (:attr:`Config.default_search_mode`)."""
    rerank: bool = False
    """Rerank the best ``rerank_candidates`` hits (their context windows) with the
    cross-encoder ``rerank_model`` (:mod:`kbsync.embed.providers.cross_encoder`)."""
    rerank_model: str | None = None
    """The cross-encoder: a folder (relative to ``kbsync.toml``) or a name in the offline
    Hugging Face cache."""
    rerank_candidates: Annotated[int, Meta(ge=1)] = 20
    """How many hits of the first ranking the cross-encoder reads."""
    fusion: Fusion = "scores"
    """How hybrid search fuses the vector and the text ranking: ``"scores"`` (each hit's
    score scaled between its list's last candidate
    and best, weighted) or ``"ranks"`` (reciprocal rank fusion)."""
    vector_weight: Annotated[float, Meta(ge=0, le=1)] = 0.5
    """The vector ranking's weight in hybrid search; the text ranking weighs the rest."""

    def __post_init__(self) -> None:
        if self.rerank and not self.rerank_model:
            raise ParameterError("rerank = true needs rerank_model, the cross-encoder's folder "
                                 "(no cross-encoder's weights come with kbsync)")


@dataclass(frozen=True, slots=True)
class Config(Outline):
    """A parsed ``kbsync.toml``: each table checked into its settings."""

    chunker: Chunker = field(default_factory=lambda: DEFAULT_CHUNKER)
    index: IndexSettings = field(default_factory=IndexSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    vectors: SinkConfig | None = None

    @property
    def default_search_mode(self) -> SearchMode:
        """How a search ranks when it is not told: ``[search] mode``, else full text over
        the hashing embedder, else hybrid.

        The hashing embedder's vectors are lexical: fused with full-text ranks they only
        add noise (on the long-document QA set recall@5 fell from 94.8 to 89.4).
        """
        if self.search.mode is not None:
            return self.search.mode
        return "text" if self.embedder.kind == "hashing" else "hybrid"
