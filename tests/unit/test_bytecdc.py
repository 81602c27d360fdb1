from __future__ import annotations

import hashlib
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbsync import ByteParams, Verdict, byte_chunks, chunk_text, compare, normalize
from kbsync.core.chunking.bytecdc import MODULUS, iter_byte_chunks, rolling_hashes

SENTENCE = "The keeper climbed the stairs again at dusk to trim the wick. "


def _fixed_block_similarity(old: bytes, new: bytes, size: int = 2048) -> float:
    def digests(data: bytes) -> set[str]:
        return {hashlib.blake2b(data[i : i + size]).hexdigest() for i in range(0, len(data), size)}

    a, b = digests(old), digests(new)
    return len(a & b) / len(a | b)


def test_the_rolling_hash_matches_a_plain_rolling_polynomial() -> None:
    data = bytes(random.Random(1).randrange(256) for _ in range(500))
    expected, h = [], 0
    top = pow(257, 48, MODULUS)
    for i, byte in enumerate(data):
        h = (h * 257 + byte) % MODULUS
        if i >= 48:
            h = (h - data[i - 48] * top) % MODULUS
        expected.append(h)
    assert rolling_hashes(np.frombuffer(data, dtype=np.uint8), 48).tolist() == expected


def test_one_inserted_sentence_keeps_similarity_high_where_fixed_blocks_fail(prose: str) -> None:
    old = prose.encode()
    assert len(old) >= 60_000
    at = prose.index(". ", 500) + 2
    new = (prose[:at] + SENTENCE + prose[at:]).encode()
    report = compare(old, new)
    assert report.similarity > 0.9
    assert 1 <= len(report.regions) <= 2
    region = report.regions[0]
    assert region.offset <= at < region.end
    assert _fixed_block_similarity(old, new) < 0.1
    # Under 2 % of the bytes changed, yet a sentence: bytes are never cosmetic.
    assert report.verdict is Verdict.REPROCESS


def test_identical_content_is_unchanged(prose: str) -> None:
    report = compare(prose, prose)
    assert not report.changed
    assert report.similarity == 1.0
    assert report.regions == ()
    assert report.verdict is Verdict.UNCHANGED


def test_a_long_run_of_one_byte_stays_within_the_size_limits() -> None:
    chunks = byte_chunks(b"a" * 100_000)
    assert all(512 <= c.length <= 8192 for c in chunks[:-1])
    assert sum(c.length for c in chunks) == 100_000


def test_a_complete_rewrite_scores_low_and_asks_to_reexamine_extraction(prose: str) -> None:
    rewritten = " ".join(reversed(prose.split()))
    report = compare(prose, rewritten)
    assert report.similarity < 0.1
    assert report.verdict is Verdict.REEXAMINE_EXTRACTION


def test_short_periodic_text_has_no_boundary_yet_compare_still_finds_the_edit() -> None:
    # A documented limit of the byte CDC: 200 copies of a 15-byte sentence have no
    # content-defined boundary. compare() diffs the differing chunks word by word.
    text = "The cat sat on " * 200
    assert len(byte_chunks(text.encode())) == 1
    edited = text[:1500] + "X" + text[1500:]
    report = compare(text, edited)
    assert report.similarity > 0.5
    assert any("XThe" in edited[r.offset:r.end] for r in report.regions)


def test_a_typo_fix_is_cosmetic(corpus: str) -> None:
    big = corpus
    at = big.index(" the ", 20_000) + 1
    assert compare(big, big[:at] + "teh " + big[at + 4 :]).verdict is Verdict.COSMETIC


def test_moved_paragraphs_are_reported_as_moved_not_changed(prose: str) -> None:
    half = len(prose) // 2
    cut = prose.index("\n\n", half)
    swapped = prose[cut + 2 :] + "\n\n" + prose[: cut + 2]
    report = compare(prose, swapped)
    assert report.moved > 0
    # Like a line diff, similarity counts the half that left its place as changed.
    assert 0.4 < report.similarity < 0.9


def test_regions_of_text_are_in_characters() -> None:
    base = ("Zoë’s café — naïve “quotes” and ümlauts. " * 400)
    at = 9000
    new = base[:at] + "Brand new words arrive here. " + base[at:]
    for region in compare(base, new).regions:
        assert 0 <= region.offset < region.end <= len(new)
    assert any(r.offset <= at < r.end for r in compare(base, new).regions)


@given(st.binary(max_size=30_000), st.lists(st.integers(1, 5000), min_size=1, max_size=10))
def test_streaming_bytes_in_any_pieces_gives_the_one_shot_chunks(
    data: bytes, sizes: list[int]
) -> None:
    params = ByteParams(min_size=64, avg_size=256, max_size=1024)
    pieces, pos, k = [], 0, 0
    while pos < len(data):
        pieces.append(data[pos : pos + sizes[k % len(sizes)]])
        pos, k = pos + sizes[k % len(sizes)], k + 1
    assert list(iter_byte_chunks(pieces, params)) == byte_chunks(data, params)


def test_byte_strategy_chunks_decode_and_point_into_the_input(corpus: str) -> None:
    result = chunk_text(corpus, strategy="bytes")
    assert "".join(c.text for c in result.chunks).split() == corpus.split()
    for c in result.chunks:
        assert 0 <= c.start <= c.end <= len(corpus)


def test_ignored_boilerplate_does_not_count_in_similarity(prose: str) -> None:
    footer = " ".join(f"Footer line {i} with legal words and links." for i in range(400))
    old_text = prose[:20_000] + footer
    new_text = prose[:20_000].replace("the", "THE") + footer
    plain = compare(old_text, new_text)
    ignoring = compare(old_text, new_text, ignore=[footer])
    assert ignoring.similarity < plain.similarity
    assert ignoring.regions == plain.regions


@pytest.mark.parametrize("form", ["NFD", "NFC"])
def test_byte_chunks_of_decomposed_text_map_back_to_the_text_they_came_from(form: str) -> None:
    # Normalizing composes "e" + U+0301 into one character: a cut inside such a word
    # must be mapped by what each piece of the word became, not character for character.
    base = ("Élève, café, naïve, déjà vu. Tiếng Việt: người, được, nghệ thuật. "
            "한국어 문장은 자모로 분해될 수 있습니다. ") * 200
    text = unicodedata.normalize(form, base)
    chunks = chunk_text(text, strategy="bytes", min_size=64, avg_size=128, max_size=512).chunks
    assert len(chunks) > 20
    for c in chunks:
        assert normalize(text[c.start:c.end]).text == c.text.strip()
