from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from kbsync import NORMALIZER_VERSION, normalize
from kbsync.core.normalize import _scan_dirty, _scan_word_by_word, scan_words
from tests import reference

PIECES = [*list("ab c.\n\r\t\x00\x0c"), "\xa0", "\u2029", "\u2028", "é", "é", "�", "日"]
TEXT = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


def test_normalizer_is_versioned() -> None:
    assert NORMALIZER_VERSION == 1


def test_runs_of_whitespace_collapse_to_one_space() -> None:
    assert normalize("  alpha \t beta\ngamma  ").text == "alpha beta gamma"


def test_two_line_breaks_make_a_paragraph_mark_whatever_the_line_endings() -> None:
    for text in ("one\n\ntwo", "one\r\n\r\ntwo", "one\r\rtwo", "one \n \t\n two", "one\u2029two"):
        assert normalize(text).text == "one\n\ntwo"


def test_a_single_line_break_is_just_a_space() -> None:
    assert normalize("one\r\ntwo\rthree\nfour").text == "one two three four"


def test_nul_and_surrogates_are_removed_and_text_is_nfc() -> None:
    text = "cafe\u0301 x\x00y \ud800z"
    norm = normalize(text)
    assert norm.text == "café xy z"
    assert unicodedata.is_normalized("NFC", norm.text)


def test_unicode_spaces_separate_words() -> None:
    assert normalize("a\u00a0b\u3000c\u2003d").text == "a b c d"


def test_every_word_keeps_its_offsets_in_the_input() -> None:
    text = "  Hello,\u00a0wörld!\n\n\tNew paragraph.  "
    norm = normalize(text)
    words = [text[a:b] for a, b in zip(norm.word_starts, norm.word_ends, strict=True)]
    assert words == norm.words == ["Hello,", "wörld!", "New", "paragraph."]
    assert norm.paragraph_before.tolist() == [False, False, True, False]


def test_offsets_of_cleaned_words_point_at_the_original_words() -> None:
    text = "x\x00y  cafe\u0301"
    norm = normalize(text)
    assert [text[a:b] for a, b in zip(norm.word_starts, norm.word_ends, strict=True)] == [
        "x\x00y",
        "cafe\u0301",
    ]


@given(TEXT)
def test_normalizing_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once.text).text == once.text


@given(TEXT)
def test_the_vectorized_scan_matches_the_plain_reference(text: str) -> None:
    assert normalize(text).text == reference.canonical(reference.words_of(text))


@given(TEXT, st.integers(min_value=0, max_value=80))
def test_a_text_scanned_in_two_pieces_keeps_its_paragraph_marks(text: str, at: int) -> None:
    # Pieces are split before a word start, as the chunker's block splitter does.
    at = min(at, len(text))
    while 0 < at < len(text) and not (text[at - 1].isspace() and not text[at].isspace()):
        at -= 1
    if at == 0:
        return
    first = scan_words(text[:at])
    second = scan_words(text[at:], first.trailing_space)
    whole = scan_words(text)
    joined = first.paragraph.tolist() + second.paragraph.tolist()
    assert joined[1:] == whole.paragraph.tolist()[1:]


@given(TEXT, st.integers(min_value=1, max_value=12))
def test_the_canonical_text_in_blocks_is_the_canonical_text(text: str, block: int) -> None:
    from kbsync.core.normalize import canonical_pieces

    assert "".join(canonical_pieces([text], block_chars=block)) == normalize(text).text


@given(TEXT, st.integers(min_value=1, max_value=12))
def test_the_text_hash_of_pieces_is_the_text_hash_of_their_join(text: str, block: int) -> None:
    from kbsync.core.identity import normalized_pieces_hash, normalized_text_hash
    from kbsync.core.normalize import canonical_pieces

    whole = normalized_text_hash(normalize(text).text, NORMALIZER_VERSION, "text-v1")
    pieces = normalized_pieces_hash(canonical_pieces([text], block_chars=block),
                                    NORMALIZER_VERSION, "text-v1")
    assert pieces == whole


@given(TEXT, st.integers(min_value=1, max_value=12))
def test_a_text_normalized_in_blocks_is_normalized_as_a_whole(text: str, block: int) -> None:
    whole = normalize(text, block_chars=len(text) + 1)
    assert normalize(text, block_chars=block) == whole


# Pieces of text that is not NFC (decomposed accents, Hangul jamo, singletons such as
# U+2000 and U+2126 that NFC replaces) or holds NULs, mixed with every kind of whitespace.
UNCLEAN = st.lists(st.sampled_from(
    ["e", "\u0301", "\u0308", "\u0323", "\u0344", "\u0f73", "\u1100", "\u1161", "\u11a8",
     "\u2126", "\u2000", "é", "x", "\x00", " ", "\t", "\n", "\n\n", "\r", "\x0c", "\u2028",
     "\u2029"]), max_size=40).map("".join)


@given(UNCLEAN, st.sampled_from(["", " ", "\n", "\n\n"]))
def test_unclean_text_scans_as_cleaning_it_word_by_word_does(
        text: str, lead: str) -> None:
    fast, slow = _scan_dirty(text, lead), _scan_word_by_word(text, lead)
    assert (fast.source, fast.trailing_space) == (slow.source, slow.trailing_space)
    for name in ("text_starts", "text_ends", "input_starts", "input_ends", "paragraph"):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist(), name
    assert [bytes(fast.data[a:b]) for a, b in zip(fast.byte_starts, fast.byte_ends,
                                                  strict=True)] == \
        [bytes(slow.data[a:b]) for a, b in zip(slow.byte_starts, slow.byte_ends, strict=True)]
