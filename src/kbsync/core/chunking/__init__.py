"""Pure content-defined chunking: word-stream TTTD, a strictly local strategy, byte CDC.

``chunk_text`` is the one entry point for text; ``chunk_stream`` consumes text in
pieces and yields chunks as soon as they are final (TTTD), and ``byte_chunks``
runs the byte-level CDC used for change regions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields
from operator import attrgetter
from typing import Any, Literal

from kbsync.core.chunking import compiled
from kbsync.core.chunking.bytecdc import byte_chunks, iter_byte_chunks, text_byte_chunks
from kbsync.core.chunking.diagnostics import ChunkShape, diagnose_tally, shape_of
from kbsync.core.chunking.local import local_chunks
from kbsync.core.chunking.params import ByteParams, LocalParams, SentenceParams, TTTDParams
from kbsync.core.chunking.sentences import sentence_chunks
from kbsync.core.chunking.stream import word_blocks
from kbsync.core.chunking.tokens import (
    EstimatingCounter,
    TiktokenCounter,
    TokenCounter,
    token_counter,
)
from kbsync.core.chunking.tttd import tttd_chunks
from kbsync.core.identity import ChunkIdentity, params_hash
from kbsync.core.normalize import NORMALIZER_VERSION
from kbsync.errors import ChunkingError, ParameterError
from kbsync.model import Chunk, ChunkingDiagnostics, ChunkingResult

__all__ = [
    "STRATEGY_PARAMS",
    "ByteParams",
    "ChunkShape",
    "EstimatingCounter",
    "LocalParams",
    "SentenceParams",
    "Strategy",
    "TTTDParams",
    "TextChunker",
    "TiktokenCounter",
    "TokenCounter",
    "byte_chunks",
    "chunk_stream",
    "chunk_text",
    "identity_for",
    "iter_byte_chunks",
    "make_params",
    "parameters_hash",
    "shape_of",
    "token_counter",
]

Strategy = Literal["tttd", "local", "sentences", "bytes"]
_SHAPE = attrgetter("token_count", "boundary", "snapped")  # shape_of, without a Python call
Params = TTTDParams | LocalParams | SentenceParams | ByteParams
STRATEGY_PARAMS: Mapping[str, type[Params]] = {
    "tttd": TTTDParams, "local": LocalParams, "sentences": SentenceParams, "bytes": ByteParams,
}


def make_params(strategy: str, **params: Any) -> Params:
    """Validated parameters of ``strategy``; an unknown name is a clear error."""
    cls = STRATEGY_PARAMS.get(strategy)
    if cls is None:
        raise ParameterError(
            f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGY_PARAMS)}"
        )
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ParameterError(
            f"unknown parameter(s) for strategy {strategy!r}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    return cls(**params)


class TextChunker:
    """A validated chunker configuration, ready to chunk many texts.

    Validation, the token counter and the identity prefix are set up once, so
    chunking many small documents does not pay for them each time.
    """

    def __init__(
        self, strategy: str = "tttd", *, counter: TokenCounter | None = None, **params: Any
    ) -> None:
        self.settings = make_params(strategy, **params)
        if counter is None:
            counter = (EstimatingCounter() if isinstance(self.settings, ByteParams)
                       else token_counter(self.settings.token_counter))
        self.counter = counter
        self.params_hash = _params_hash(self.settings, counter.identity)
        self.identity = ChunkIdentity(NORMALIZER_VERSION, self.settings.chunker_id,
                                      self.params_hash)

    def chunks(self, pieces: Iterable[str]) -> Iterator[Chunk]:
        """Chunks of the concatenation of ``pieces``; TTTD yields each as soon as it is final."""
        s = self.settings
        if isinstance(s, TTTDParams):
            fused = compiled.tttd_chunks(pieces, self.counter, s, self.identity)
            if fused is not None:  # the compiled kernel, from bytes to chunks
                return fused
            blocks = word_blocks(pieces, self.counter, s.window_words, with_sentences=s.snap)
            return tttd_chunks(blocks, s, self.identity)
        if isinstance(s, LocalParams | SentenceParams):
            fused = compiled.local_chunks(pieces, self.counter, s, self.identity)
            if fused is not None:
                return fused
        if isinstance(s, LocalParams):
            return local_chunks(word_blocks(pieces, self.counter, s.window_words), s,
                                self.identity)
        if isinstance(s, SentenceParams):
            blocks = word_blocks(pieces, self.counter, s.window_words, with_sentences=True)
            return sentence_chunks(blocks, s, self.identity)
        return text_byte_chunks("".join(pieces), s, self.identity, self.counter)

    def chunk(self, text: str) -> ChunkingResult:
        """Chunks of ``text`` with the diagnostics of the run."""
        chunks = tuple(self.chunks([text]))
        return ChunkingResult(chunks=chunks, diagnostics=self.diagnose(chunks))

    def diagnose(self, chunks: Iterable[Chunk]) -> ChunkingDiagnostics:
        """Diagnostics of chunks made by this chunker (of one text or of many)."""
        return self.diagnose_tally(Counter(map(_SHAPE, chunks)))

    def diagnose_tally(self, tally: Mapping[ChunkShape, int]) -> ChunkingDiagnostics:
        """Diagnostics of chunks made by this chunker, counted by :func:`shape_of`."""
        s = self.settings
        return diagnose_tally(
            tally,
            strategy=s.chunker_id.split("-")[0],
            chunker_id=s.chunker_id,
            params_hash=self.params_hash,
            normalizer_version=NORMALIZER_VERSION,
            token_counter=self.counter.identity,
            snapping=isinstance(s, TTTDParams) and s.snap,
        )


def chunk_text(
    text: str, *, strategy: Strategy = "tttd", counter: TokenCounter | None = None, **params: Any
) -> ChunkingResult:
    """Chunk ``text`` with ``strategy`` and report diagnostics.

    Offsets of the chunks index ``text``; each chunk's ``text`` is canonical
    (normalized) and its ``identity`` commits to the normalizer, the chunker and
    its parameters. ``counter`` overrides the token counter named in the parameters.
    """
    if not isinstance(text, str):
        raise ChunkingError(f"chunk_text takes a str, not {type(text).__name__} "
                            "(decode bytes first, or extract the document)")
    return TextChunker(strategy, counter=counter, **params).chunk(text)


def chunk_stream(
    pieces: Iterable[str], *, strategy: Strategy = "tttd", counter: TokenCounter | None = None,
    **params: Any,
) -> Iterator[Chunk]:
    """Chunks of text given in pieces, each yielded as soon as it is final.

    The chunks equal those of ``chunk_text("".join(pieces), strategy=strategy, **params)``.
    Memory does not grow with the input for the word strategies (``tttd``, ``local``,
    ``sentences``); ``bytes`` joins the pieces first.
    """
    return TextChunker(strategy, counter=counter, **params).chunks(pieces)


def identity_for(strategy: str, **params: Any) -> ChunkIdentity:
    """The chunk-identity function of a chunker configuration (what ``verify`` recomputes)."""
    return TextChunker(strategy, **params).identity


def parameters_hash(strategy: str, **params: Any) -> str:
    """The parameter hash that chunk identities of this configuration commit to."""
    return TextChunker(strategy, **params).params_hash


def _params_hash(settings: Params, counter_id: str) -> str:
    """Hash of the parameters, with the identity of the counter actually used."""
    canonical = settings.canonical()
    if "token_counter" in canonical:
        canonical["token_counter"] = counter_id
    return params_hash({"chunker": settings.chunker_id, **canonical})
