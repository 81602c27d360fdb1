"""The compiled kernel and the NumPy reference give identical output, on random and real text.

Each check runs the same call twice, once with ``kbsync.core.native.kernel`` as loaded and
once with it set to None (the reference), and requires equal results: WordScan arrays,
normalize(), WordBlocks, chunks (text, offsets, boundary kinds, token counts,
identities, snapped flags) and byte-CDC cuts.
"""

from __future__ import annotations

import gzip
import json
import os
import unicodedata
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbsync import byte_chunks, chunk_stream, chunk_text, normalize
from kbsync.core import native
from kbsync.core.chunking import EstimatingCounter, TextChunker, TTTDParams, compiled
from kbsync.core.chunking.bytecdc import rolling_hashes
from kbsync.core.chunking.local import KINDS, cut_positions, local_chunks, select_cuts
from kbsync.core.chunking.params import LocalParams, SentenceParams
from kbsync.core.chunking.sentences import sentence_chunks
from kbsync.core.chunking.stream import word_blocks
from kbsync.core.chunking.tttd import tttd_chunks
from kbsync.core.normalize import canonical_pieces, scan_words
from kbsync.errors import ChunkingError
from tests.conftest import corpora_file

T = TypeVar("T")
KERNEL = native.kernel

needs_kernel = pytest.mark.skipif(
    KERNEL is None and os.environ.get("CI") != "true",
    reason=f"the compiled kernel is not loaded: {native.load_error}",
)
pytestmark = needs_kernel


def both(call: Callable[[], T]) -> tuple[T, T]:
    """``call()`` with the compiled kernel, then with the NumPy reference."""
    if KERNEL is None:
        pytest.fail(f"the compiled kernel must be built under CI: {native.load_error}")
    try:
        native.kernel = KERNEL
        compiled = call()
        native.kernel = None
        reference = call()
    finally:
        native.kernel = KERNEL
    return compiled, reference


def same_arrays(a: object, b: object) -> None:
    for name in a.__slots__:  # type: ignore[attr-defined]
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, name
            assert np.array_equal(x, y), name
        else:
            assert x == y, name


def test_the_compiled_kernel_is_importable() -> None:
    # Under CI (CI=true) this fails rather than skips, so CI really tests the compiled path.
    assert KERNEL is not None, native.load_error
    assert native.describe().startswith("chunking core: compiled")


# Characters that take every branch of the scanners: each whitespace kind (ASCII and
# Unicode, line and paragraph breaks, CR/LF mixes), NUL, surrogates, characters that
# need NFC (a combining accent, Hangul jamo), multi-byte and astral characters, and
# sentence ends with closers.
PIECES = [
    "a", "b", "Zz", "7", "42", "-", "_", "don't", "x.", "y!", "(z)?", 'q."', "e.”", "f!’", "])",
    " ", "  ", "\t", "\n", "\n\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f",
    "\x85", "\xa0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000", "\x00", "\ud800", "\udfff", "e\u0301", "\u0301", "é", "\u1100\u1161", "日本",
    "\U0001f600", "ŉ", "\x01", "\x7f", "word", "Word.",
]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    st.text(max_size=80),
    st.builds(lambda w, n, s: (w * n + s) * 3, st.sampled_from(["ab", "é", "x1"]),
              st.integers(1, 400), st.sampled_from([" ", "\n\n", "\r\n"])),
)
leading = st.sampled_from(["", " ", "\n", "\r", "\r\n\n", "\x00 ", "\u2029"])
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(texts, leading)
def test_a_scan_gives_the_same_word_arrays(text: str, lead: str) -> None:
    compiled, reference = both(lambda: scan_words(text, lead))
    same_arrays(compiled, reference)


@fast
@given(texts)
def test_normalize_gives_the_same_text_and_offsets(text: str) -> None:
    compiled, reference = both(lambda: normalize(text, block_chars=64))
    assert compiled == reference
    pieces = both(lambda: "".join(canonical_pieces([text], 32)))
    assert pieces[0] == pieces[1] == reference.text


@fast
@given(texts, st.integers(1, 9), st.sampled_from([24, 64, 1 << 17]))
def test_word_blocks_are_the_same(text: str, window: int, block: int) -> None:
    def blocks() -> list[object]:
        return list(word_blocks([text], EstimatingCounter(), window, with_sentences=True,
                                block_chars=block))

    compiled, reference = both(blocks)
    assert len(compiled) == len(reference)
    for a, b in zip(compiled, reference, strict=True):
        same_arrays(a, b)


TTTD_SMALL = {"min_tokens": 4, "max_tokens": 12, "primary_bits": 3, "backup_bits": 1,
              "window_words": 3}


@fast
@given(texts, st.sampled_from([{}, TTTD_SMALL, {**TTTD_SMALL, "snap": True,
                                                "snap_window_words": 3}]))
def test_tttd_chunks_are_the_same(text: str, params: dict[str, object]) -> None:
    compiled, reference = both(lambda: chunk_text(text, **params))  # type: ignore[arg-type]
    assert compiled.chunks == reference.chunks
    assert compiled.diagnostics == reference.diagnostics


@fast
@given(st.lists(texts, max_size=6), st.sampled_from([{}, TTTD_SMALL]))
def test_streamed_tttd_chunks_are_the_same_however_the_text_is_split(
    pieces: list[str], params: dict[str, object]
) -> None:
    compiled, reference = both(lambda: list(chunk_stream(pieces, **params)))  # type: ignore[arg-type]
    assert compiled == reference
    assert compiled == list(chunk_text("".join(pieces), **params).chunks)  # type: ignore[arg-type]


@fast
@given(texts, st.sampled_from([{}, {"min_tokens": 3, "max_tokens": 9, "window_words": 2}]),
       st.sampled_from(["local", "sentences", "sentences with tails"]))
def test_local_chunks_are_the_same(text: str, params: dict[str, object], strategy: str) -> None:
    if strategy == "sentences with tails":
        strategy, params = "sentences", {**params, "tail_above": 5 if params else 100}
    compiled, reference = both(lambda: chunk_text(text, strategy=strategy, **params))  # type: ignore[arg-type]
    assert compiled.chunks == reference.chunks


@fast
@given(st.binary(max_size=3000), st.integers(1, 64))
def test_byte_cdc_hashes_and_cuts_are_the_same(data: bytes, window: int) -> None:
    raw = np.frombuffer(data, dtype=np.uint8)
    compiled, reference = both(lambda: rolling_hashes(raw, window))
    assert np.array_equal(
        np.frombuffer(KERNEL.rolling_hashes(data, window), dtype=np.int64)  # type: ignore[union-attr]
        if len(data) else compiled, reference)
    params = {"window_bytes": window, "min_size": 8, "avg_size": 32, "max_size": 128}
    from kbsync.core.chunking import ByteParams

    chunks = both(lambda: byte_chunks(data, ByteParams(**params)))
    assert chunks[0] == chunks[1]


@fast
@given(texts)
def test_byte_cdc_of_text_is_the_same(text: str) -> None:
    params = {"min_size": 4, "avg_size": 16, "max_size": 64}
    compiled, reference = both(lambda: chunk_text(text, strategy="bytes", **params))  # type: ignore[arg-type]
    assert compiled.chunks == reference.chunks


def _history_texts(name: str, every: int, limit: int) -> Iterator[str]:
    path = corpora_file(f"{name}-history.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        snapshot = json.loads(next(lines))
        texts = list(snapshot["files"].values())
        for line in islice(lines, 0, None, 25):
            texts += [c["content"] for c in json.loads(line)["changes"] if c["content"]]
    yield from islice(sorted(texts, key=len)[::every], limit)


@pytest.mark.parametrize("name", ["django-docs", "fastapi-docs"])
def test_real_documentation_chunks_the_same_with_both_implementations(name: str) -> None:
    # A sample of the files and their later versions, every size, small to large.
    for text in _history_texts(name, every=7, limit=60):
        _same_everything(text)


def _same_everything(text: str) -> None:
    for params in ({}, TTTD_SMALL, {"snap": True}):
        compiled, reference = both(lambda p=params: chunk_text(text, **p))  # type: ignore[arg-type]
        assert compiled.chunks == reference.chunks
    for strategy in ("local", "sentences"):
        compiled, reference = both(lambda s=strategy: chunk_text(text, strategy=s))  # type: ignore[misc, arg-type]
        assert compiled.chunks == reference.chunks
    compiled, reference = both(lambda: chunk_text(text, strategy="sentences", tail_above=100))
    assert compiled.chunks == reference.chunks
    compiled_text, reference_text = both(lambda: normalize(text))
    assert compiled_text == reference_text
    data = text.encode()
    compiled_cuts, reference_cuts = both(lambda: byte_chunks(data))
    assert compiled_cuts == reference_cuts


@fast
@given(st.lists(texts, min_size=1, max_size=8), st.sampled_from([16, 40, 128]),
       st.sampled_from([TTTD_SMALL, {**TTTD_SMALL, "snap": True, "snap_window_words": 2}]))
def test_tttd_chunks_are_the_same_across_small_blocks_of_clean_and_unclean_text(
    parts: list[str], block: int, params: dict[str, object]
) -> None:
    # Small blocks make clean and cleaned-word-by-word blocks follow each other, so the
    # whitespace carried between them (paragraph marks, CR then LF) is exercised.
    chunker = TextChunker("tttd", **params)  # type: ignore[arg-type]
    s = chunker.settings
    assert isinstance(s, TTTDParams)
    text = "".join(parts)
    fused = compiled.tttd_chunks([text], chunker.counter, s, chunker.identity, block_chars=block)
    assert fused is not None
    native.kernel = None
    try:
        reference = list(tttd_chunks(
            word_blocks([text], chunker.counter, s.window_words, with_sentences=s.snap,
                        block_chars=block), s, chunker.identity))
    finally:
        native.kernel = KERNEL
    assert list(fused) == reference


@fast
@given(st.lists(texts, min_size=1, max_size=8), st.sampled_from([16, 40, 128]),
       st.sampled_from(["local", "sentences", "sentences with tails"]),
       st.sampled_from([(2, 6), (4, 12)]))
def test_local_chunks_are_the_same_across_small_blocks_of_clean_and_unclean_text(
    parts: list[str], block: int, strategy: str, limits: tuple[int, int]
) -> None:
    # The kernel's local cutters decide once per block, the reference once per word block:
    # small blocks with cleaned ones among them make both keep and drop margins often.
    tails = {"tail_above": limits[0] + 1} if strategy.endswith("tails") else {}
    chunker = TextChunker(strategy.split()[0], min_tokens=limits[0],  # type: ignore[arg-type]
                          max_tokens=limits[1], window_words=3, **tails)
    s = chunker.settings
    assert isinstance(s, LocalParams | SentenceParams)
    text = "".join(parts)
    fused = compiled.local_chunks([text], chunker.counter, s, chunker.identity, block_chars=block)
    assert fused is not None
    native.kernel = None
    try:
        blocks = word_blocks([text], chunker.counter, s.window_words,
                             with_sentences=isinstance(s, SentenceParams), block_chars=block)
        reference = list(sentence_chunks(blocks, s, chunker.identity)
                         if isinstance(s, SentenceParams) else local_chunks(blocks, s,
                                                                           chunker.identity))
    finally:
        native.kernel = KERNEL
    assert list(fused) == reference


WIDE = {"min_tokens": 8, "max_tokens": 40, "primary_bits": 4, "backup_bits": 1, "window_words": 3}


@pytest.mark.parametrize("text", [
    # Blocks of 16 characters: the first one ends with the mark, and needs cleaning.
    "x\x00y zz ww abc\n\n" + "abc " * 12,
    "x\u0301y zz ww ab\r\n\r\n" + "abc " * 12,
    "x\x00y zz ww abc\r" + "\nabc " * 12,
    "aa bb\x00 cc dd\n" + " " * 40 + "\n" + "ee " * 10,
])
def test_a_paragraph_mark_after_a_cleaned_block_is_kept(text: str) -> None:
    chunker = TextChunker("tttd", **WIDE)  # type: ignore[arg-type]
    s = chunker.settings
    assert isinstance(s, TTTDParams)
    fused = compiled.tttd_chunks([text], chunker.counter, s, chunker.identity, block_chars=16)
    assert fused is not None
    chunks = list(fused)
    native.kernel = None
    try:
        reference = list(chunk_text(text, **WIDE).chunks)  # type: ignore[arg-type]
    finally:
        native.kernel = KERNEL
    assert chunks == reference


def test_parameters_beyond_the_kernels_bounds_run_on_the_reference() -> None:
    text = "alpha beta gamma. " * 50
    huge = {"min_tokens": 3, "max_tokens": 1 << 50, "window_words": 3, "snap": True,
            "snap_window_words": 1 << 62}
    compiled_result, reference = both(lambda: chunk_text(text, **huge))  # type: ignore[arg-type]
    assert compiled_result.chunks == reference.chunks
    wide = both(lambda: chunk_text(text, strategy="bytes", window_bytes=5000, min_size=8,
                                   avg_size=16, max_size=64))
    assert wide[0].chunks == wide[1].chunks


def test_the_kernel_splits_words_at_exactly_the_characters_python_calls_whitespace() -> None:
    # The block cuts (normalize.iter_blocks) and the trailing whitespace the TTTD driver
    # recovers with str.rstrip use str.isspace; the kernel's classes must be the same set.
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    text = "a" + "a".join(spaces) + "a"
    compiled, reference = both(lambda: scan_words(text))
    same_arrays(compiled, reference)
    assert len(compiled) == len(spaces) + 1
    # Every other character of the first two planes (NFC, no NUL, no surrogate) is a word
    # character for both implementations.
    others = "".join(chr(c) for c in range(1, 0x20000)
                     if not (0xD800 <= c <= 0xDFFF) and not chr(c).isspace())
    others = unicodedata.normalize("NFC", others)
    compiled, reference = both(lambda: scan_words(others))
    assert len(compiled) == len(reference) == 1


@fast
@given(texts, st.integers(0, 3))
def test_chunks_built_from_local_cuts_by_the_kernel_are_those_of_the_reference(
    text: str, skip: int
) -> None:
    # local.local_chunks builds its chunks in Python; compiled.build_chunks is the same
    # construction for the strictly local cuts, from any first word and chunk number.
    chunker = TextChunker("local", min_tokens=3, max_tokens=9, window_words=2)
    native.kernel = None
    try:
        reference = list(chunker.chunks([text]))
        blocks = list(word_blocks([text], chunker.counter, 2))
    finally:
        native.kernel = KERNEL
    if not blocks:
        return
    source = blocks[0].source if len(blocks) == 1 else None
    if source is None:
        return
    b = blocks[0]
    cuts, kinds = cut_positions(b.fingerprint, b.tokens, 3, 9)
    first = min(skip, len(cuts))
    start = int(cuts[first - 1]) + 1 if first else 0
    codes = np.array([KINDS.index(kind) for kind in kinds[first:]], dtype=np.uint8)
    built = compiled.build_chunks(source, b.text_starts, b.text_ends, b.input_starts,
                                  b.input_ends, np.cumsum(b.tokens), cuts[first:],
                                  codes, chunker.identity, start=start, index=first)
    assert built == reference[first:]


def _long_text(seed: int, size: int) -> str:
    """Random text from PIECES (and runs of plain words) of about ``size`` characters."""
    import random

    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        part = rng.choice(PIECES) if rng.random() < 0.3 else rng.choice(["lorem", "ipsum.", "x"])
        parts.append(part)
        parts.append(rng.choice([" ", " ", " ", "\n", "\n\n", "  ", "\r\n"]))
        length += len(part) + 1
    return "".join(parts)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("clean", [True, False])
def test_long_blocks_cut_in_pieces_by_the_kernel_give_the_reference_chunks(
    seed: int, clean: bool
) -> None:
    # The kernel scans a long block in pieces and cuts after each; the chunks must not
    # change, with or without text the reference cleans (NUL, surrogates, non-NFC).
    text = _long_text(seed, 300_000)
    if clean:
        text = unicodedata.normalize("NFC", text.replace("\x00", "").encode(
            "utf-8", "ignore").decode("utf-8"))
    for params in ({}, TTTD_SMALL, {**TTTD_SMALL, "snap": True, "snap_window_words": 3}):
        compiled_result, reference = both(lambda p=params: chunk_text(text, **p))  # type: ignore[arg-type]
        assert compiled_result.chunks == reference.chunks
    for strategy in ("local", "sentences"):
        compiled_result, reference = both(lambda s=strategy: chunk_text(text, strategy=s))  # type: ignore[misc, arg-type]
        assert compiled_result.chunks == reference.chunks


@fast
@given(st.lists(st.tuples(st.integers(0, 15), st.integers(1, 6), st.integers(0, 4)),
                min_size=1, max_size=300),
       st.integers(1, 12), st.integers(1, 30), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([64, 3]))
def test_local_cut_selection_by_the_kernel_is_that_of_the_reference(
    words: list[tuple[int, int, int]], radius: int, span: int, ranked: bool, first: bool,
    last: bool, bits: int,
) -> None:
    # Few distinct fingerprints (ties), giant words, every rank: each rule's edge cases.
    fingerprint = np.array([(v * 0x9E3779B97F4A7C15) % (1 << 64) if bits == 64 else v % 8
                            for v, _, _ in words], dtype=np.uint64)
    tokens = np.array([t for _, t, _ in words], dtype=np.int64)
    ranks = np.array([r for _, _, r in words], dtype=np.uint8) if ranked else None

    def cuts() -> tuple[list[int], list[object]]:
        positions, kinds = select_cuts(fingerprint, tokens, radius=radius, span=span,
                                       ranks=ranks, eligible_below=4, first=first, last=last)
        return positions.tolist(), list(kinds)

    compiled_cuts, reference = both(cuts)
    assert compiled_cuts == reference


@fast
@given(st.lists(st.binary(max_size=700), max_size=8), st.sampled_from([None, (4, 8, 16, 64)]))
def test_byte_chunks_made_by_the_kernel_are_the_same_however_the_bytes_are_split(
    pieces: list[bytes], sizes: tuple[int, int, int, int] | None
) -> None:
    from kbsync.core.chunking import ByteParams
    from kbsync.core.chunking.bytecdc import iter_byte_chunks

    params = None if sizes is None else ByteParams(*sizes)
    compiled_chunks, reference = both(lambda: list(iter_byte_chunks(pieces, params)))
    assert compiled_chunks == reference
    assert compiled_chunks == byte_chunks(b"".join(pieces), params)


@fast
@given(texts, texts)
def test_compare_reads_the_same_words_from_the_kernel(old: str, new: str) -> None:
    from kbsync import compare
    from kbsync.core.compare import _Side

    sides = both(lambda: _Side.of(new))
    same_arrays(*sides)
    reports = both(lambda: compare(old, new))
    assert reports[0] == reports[1]


@pytest.mark.parametrize("strategy", ["tttd", "local", "sentences", "bytes"])
def test_chunk_stream_gives_each_strategy_s_chunks_of_the_joined_text(strategy: str) -> None:
    text = _long_text(7, 200_000)
    pieces = [text[i : i + 7_919] for i in range(0, len(text), 7_919)]
    streamed = list(chunk_stream(pieces, strategy=strategy))  # type: ignore[arg-type]
    assert streamed == list(chunk_text(text, strategy=strategy).chunks)  # type: ignore[arg-type]


def test_chunking_bytes_is_a_chunking_error_that_says_what_to_do() -> None:
    with pytest.raises(ChunkingError, match="takes a str, not bytes"):
        chunk_text(b"abc")  # type: ignore[arg-type]


# Words of every branch of the hashing embedder's terms: stop words in either case, each
# suffix with two, three and four letters before it, underscores and digits, letters that
# lower() turns into more than one character or into a final sigma.
HASHING_PIECES = [
    "The", "and", "WORK", "works", "retries", "retried", "retrying", "flying", "cities",
    "boxes", "boxed", "cats", "abcy", "aby", "ed", "ses", "ing", "tying", "snake_case",
    "_x", "x1", "2024", "ünïcode", "wörds", "İstanbul", "ΣΟΦΙΑΣ", "straße", "ﬁles", "日本",
    " ", ", ", ".\n\n", "-", "\t", "\u2029",
]
hashing_texts = st.one_of(
    st.lists(st.sampled_from(HASHING_PIECES), max_size=30).map(" ".join),
    st.lists(st.sampled_from(HASHING_PIECES), max_size=30).map("".join),
    st.text(max_size=80),
)


@fast
@given(st.lists(hashing_texts, max_size=8))
def test_the_hashing_embedder_finds_the_same_terms_and_vectors(texts: list[str]) -> None:
    from kbsync.embed.hashing import HashingEmbedder, term_keys

    compiled_keys, reference_keys = both(lambda: term_keys(texts))
    assert compiled_keys.dtype == reference_keys.dtype == np.uint64
    assert np.array_equal(np.sort(compiled_keys), np.sort(reference_keys))
    vectors = both(lambda: HashingEmbedder(64).embed(texts))
    assert vectors[0].tobytes() == vectors[1].tobytes()
