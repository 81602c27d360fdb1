"""Pure content-defined chunking: word-stream TTTD, a strictly local strategy, byte CDC.

``chunk_text`` is the one entry point for text; ``chunk_stream`` consumes text in
pieces and yields chunks as soon as they are final (TTTD), and ``byte_chunks``
runs the byte-level CDC used for change regions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import fields
from typing import Any, Literal

from kbsync.chunking.bytecdc import byte_chunks, iter_byte_chunks, text_byte_chunks
from kbsync.chunking.diagnostics import diagnose
from kbsync.chunking.local import local_chunks
from kbsync.chunking.params import ByteParams, LocalParams, TTTDParams
from kbsync.chunking.stream import word_blocks
from kbsync.chunking.tokens import (
    EstimatingCounter,
    TiktokenCounter,
    TokenCounter,
    token_counter,
)
from kbsync.chunking.tttd import tttd_chunks
from kbsync.errors import ParameterError
from kbsync.identity import ChunkIdentity, params_hash
from kbsync.model import Chunk, ChunkingResult
from kbsync.normalize import NORMALIZER_VERSION

__all__ = [
    "ByteParams",
    "EstimatingCounter",
    "LocalParams",
    "Strategy",
    "TTTDParams",
    "TiktokenCounter",
    "TokenCounter",
    "byte_chunks",
    "chunk_stream",
    "chunk_text",
    "identity_for",
    "iter_byte_chunks",
    "make_params",
    "parameters_hash",
    "token_counter",
]

Strategy = Literal["tttd", "local", "bytes"]
Params = TTTDParams | LocalParams | ByteParams
_PARAMS: dict[str, type[Params]] = {"tttd": TTTDParams, "local": LocalParams, "bytes": ByteParams}


def make_params(strategy: str, **params: Any) -> Params:
    """Validated parameters of ``strategy``; an unknown name is a clear error."""
    cls = _PARAMS.get(strategy)
    if cls is None:
        raise ParameterError(f"unknown strategy {strategy!r}: use one of {', '.join(_PARAMS)}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ParameterError(
            f"unknown parameter(s) for strategy {strategy!r}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    return cls(**params)


def chunk_text(
    text: str, *, strategy: Strategy = "tttd", counter: TokenCounter | None = None, **params: Any
) -> ChunkingResult:
    """Chunk ``text`` with ``strategy`` and report diagnostics.

    Offsets of the chunks index ``text``; each chunk's ``text`` is canonical
    (normalized) and its ``identity`` commits to the normalizer, the chunker and
    its parameters. ``counter`` overrides the token counter named in the parameters.
    """
    settings = make_params(strategy, **params)
    return _run(settings, [text], counter)


def chunk_stream(
    pieces: Iterable[str], *, counter: TokenCounter | None = None, **params: Any
) -> Iterator[Chunk]:
    """TTTD chunks of text given in pieces, each yielded as soon as it is final.

    Memory does not grow with the input; the chunks equal those of
    ``chunk_text("".join(pieces), strategy="tttd", **params)``.
    """
    settings = TTTDParams(**params)
    counter = counter or token_counter(settings.token_counter)
    yield from _tttd(settings, pieces, counter)


def _params_hash(settings: Params, counter_id: str) -> str:
    """Hash of the parameters, with the identity of the counter actually used."""
    canonical = settings.canonical()
    if "token_counter" in canonical:
        canonical["token_counter"] = counter_id
    return params_hash({"chunker": settings.chunker_id, **canonical})


def _identity(settings: Params, counter_id: str) -> ChunkIdentity:
    phash = _params_hash(settings, counter_id)
    return ChunkIdentity(NORMALIZER_VERSION, settings.chunker_id, phash)


def identity_for(strategy: str, **params: Any) -> ChunkIdentity:
    """The chunk-identity function of a chunker configuration (what ``verify`` recomputes)."""
    settings = make_params(strategy, **params)
    return _identity(settings, _counter_identity(settings))


def parameters_hash(strategy: str, **params: Any) -> str:
    """The parameter hash that chunk identities of this configuration commit to."""
    settings = make_params(strategy, **params)
    return _params_hash(settings, _counter_identity(settings))


def _counter_identity(settings: Params) -> str:
    if isinstance(settings, ByteParams):
        return EstimatingCounter.identity
    return token_counter(settings.token_counter).identity


def _tttd(settings: TTTDParams, pieces: Iterable[str], counter: TokenCounter) -> Iterator[Chunk]:
    blocks = word_blocks(pieces, counter, settings.window_words, with_sentences=settings.snap)
    return tttd_chunks(blocks, settings, _identity(settings, counter.identity))


def _run(settings: Params, pieces: list[str], counter: TokenCounter | None) -> ChunkingResult:
    if isinstance(settings, ByteParams):
        counter = counter or EstimatingCounter()
        counter_id = counter.identity
        phash = _params_hash(settings, counter_id)
        identity = ChunkIdentity(NORMALIZER_VERSION, settings.chunker_id, phash)
        chunks = tuple(text_byte_chunks("".join(pieces), settings, identity, counter))
        snapping = False
    else:
        counter = counter or token_counter(settings.token_counter)
        counter_id = counter.identity
        phash = _params_hash(settings, counter_id)
        if isinstance(settings, TTTDParams):
            chunks = tuple(_tttd(settings, pieces, counter))
            snapping = settings.snap
        else:
            blocks = word_blocks(pieces, counter, settings.window_words)
            chunks = tuple(local_chunks(blocks, settings, _identity(settings, counter_id)))
            snapping = False
    diagnostics = diagnose(
        chunks,
        strategy=settings.chunker_id.split("-")[0],
        chunker_id=settings.chunker_id,
        params_hash=phash,
        normalizer_version=NORMALIZER_VERSION,
        token_counter=counter_id,
        snapping=snapping,
    )
    return ChunkingResult(chunks=chunks, diagnostics=diagnostics)

