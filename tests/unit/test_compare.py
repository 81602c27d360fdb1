"""compare(): similarity as the unchanged share of the normalized text, word-exact regions."""

from __future__ import annotations

import random
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from kbsync import Verdict, compare, normalize
from kbsync.core.chunking import bytecdc
from kbsync.model import Region

ASYNC_TESTS = """\
# Async Tests

You have already seen how to test your **FastAPI** applications using the provided
`TestClient`. Up to now, you have only seen how to write synchronous tests, without
using `async` functions.

Being able to use asynchronous functions in your tests could be useful, for example,
when you're querying your database asynchronously. Imagine you want to test sending
requests to your FastAPI application and then verify that your backend successfully
wrote the correct data in the database, while using an async database library.

## Run it

You can run your tests as usual via:

<div class="termy">

```console
$ pytest

---> 100%
```

</div>

## In Detail

The marker `@pytest.mark.anyio` tells pytest that this test function should be called
asynchronously. Note that the test function is now `async def` instead of just `def`
as before when using the `TestClient`.

## Other Asynchronous Function Calls

As the testing function is now asynchronous, you can now also call (and `await`)
other `async` functions apart from sending requests to your FastAPI application in
your tests, exactly as you would call them anywhere else in your code.
"""

PARAGRAPHS = [
    " ".join(f"{w}{i}" for w in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
             for i in range(k, k + 9))
    for k in range(0, 90, 9)
]


def texts(regions: tuple[Region, ...], text: str) -> list[str]:
    return [text[r.offset:r.end] for r in regions]


def test_a_one_line_change_in_a_short_document_is_not_reexamined_and_marks_only_its_words(
) -> None:
    new = ASYNC_TESTS.replace("$ pytest", "$ uv run pytest")
    assert len(ASYNC_TESTS) < 2048
    report = compare(ASYNC_TESTS, new)
    assert report.verdict is not Verdict.REEXAMINE_EXTRACTION
    assert report.similarity > 0.95
    assert texts(report.regions, new) == ["uv run"]
    assert report.removed_regions == ()


def test_a_rewrapped_file_with_one_word_changed_is_nearly_unchanged() -> None:
    prose = "\n\n".join(PARAGRAPHS)
    old = "\n\n".join(textwrap.fill(p, 72) for p in PARAGRAPHS)
    new = "\n\n".join(textwrap.fill(p, 40, initial_indent="  ", subsequent_indent="  ")
                      for p in prose.replace("delta40", "DELTA").split("\n\n"))
    report = compare(old, new)
    assert report.similarity > 0.98
    assert texts(report.regions, new) == ["DELTA"]
    assert texts(report.removed_regions, old) == ["delta40"]


def test_whitespace_alone_is_no_change() -> None:
    old = "\n\n".join(textwrap.fill(p, 72) for p in PARAGRAPHS)
    new = "\r\n\r\n".join(textwrap.fill(p, 30) for p in PARAGRAPHS) + "\n"
    report = compare(old, new)
    assert report.verdict is Verdict.UNCHANGED
    assert report.similarity == 1.0
    assert report.regions == report.removed_regions == ()


def test_regions_never_cut_a_word_and_never_mark_unchanged_sentences() -> None:
    old = ("Set up your tests first. " * 3 + "Then run your tests with the runner. "
           + "Read the report at the end. " * 3)
    new = old.replace("Then run your tests with", "Then run you r tests with")
    report = compare(old, new)
    assert texts(report.regions, new) == ["you r"]
    assert texts(report.removed_regions, old) == ["your"]
    for r in report.regions:
        assert not new[r.offset].isspace()
        assert not new[r.end - 1].isspace()
        assert r.offset == 0 or new[r.offset - 1].isspace()
        assert r.end == len(new) or new[r.end].isspace()


def test_regions_point_into_the_text_as_given_not_the_normalized_one() -> None:
    old = "Intro   line\n\n\n\n    indented   words here\r\nand   the end."
    new = old.replace("words", "terms")
    (region,) = compare(old, new).regions
    assert new[region.offset:region.end] == "terms"


def long_page(paragraphs: int) -> str:
    return "Harbour ledgers\n\n" + "\n\n".join(
        f"Paragraph {n} tells how the harbour keeps its ledgers in order, how the clerks copy "
        "every entry twice and why the night shift checks the totals before dawn."
        for n in range(paragraphs)) + "\n"


def test_a_changed_number_in_a_long_page_is_never_cosmetic() -> None:
    page = long_page(40)
    report = compare(page, page.replace("Paragraph 17 ", "Paragraph 18 "))
    assert report.similarity > 0.99
    assert report.verdict is Verdict.REPROCESS


def test_a_paragraph_removed_from_a_long_page_is_never_cosmetic() -> None:
    paragraphs = long_page(80).split("\n\n")
    report = compare("\n\n".join(paragraphs), "\n\n".join(paragraphs[:30] + paragraphs[31:]))
    assert report.similarity > 0.98
    assert report.verdict is Verdict.REPROCESS


def test_a_short_page_replaced_by_an_error_page_that_shares_a_few_words_is_reexamined() -> None:
    page = ("Harbour ledgers\n\nThe clerks copy every entry twice.\n\n"
            "The night shift checks the totals.\n")
    report = compare(page, "404 Not Found\n\nThe page you requested could not be found.")
    assert 0.05 < report.similarity <= 0.1
    assert report.verdict is Verdict.REEXAMINE_EXTRACTION


def test_a_mark_added_at_the_end_of_a_word_changes_that_word_in_both_versions() -> None:
    old = "of each the the each address"
    new = old + "."
    report = compare(old, new)
    assert texts(report.regions, new) == ["address."]
    assert texts(report.removed_regions, old) == ["address"]


def test_a_word_whose_case_changed_is_paired_with_itself() -> None:
    old = "the the the the the"
    new = "the the the THE the"
    report = compare(old, new)
    assert texts(report.regions, new) == ["THE"]
    assert report.removed_regions == (Region(12, 3),)
    assert report.verdict is Verdict.COSMETIC


def test_a_login_wall_in_place_of_a_page_is_reexamined() -> None:
    page = "\n\n".join(PARAGRAPHS)
    report = compare(page, "Please sign in to continue. Forgot your password?")
    assert report.similarity <= 0.05
    assert report.verdict is Verdict.REEXAMINE_EXTRACTION


def test_a_stub_that_grows_into_a_page_keeping_its_lines_is_an_edit_not_a_collapse() -> None:
    # Django's releases/5.2.11.txt: a 184-byte stub that became a 3,749-byte page.
    stub = "Django 5.2.11 release notes\n\nExpected February 3, 2026\n\nDjango 5.2.11 fixes " \
           "a security issue with severity moderate and several bugs in 5.2.10."
    page = stub.replace("Expected February 3, 2026", "February 3, 2026") + "\n\n" + \
        "\n\n".join(PARAGRAPHS * 3)
    report = compare(stub, page)
    assert report.similarity <= 0.05
    assert report.verdict is Verdict.REPROCESS
    # The same page the other way round lost nearly all of it: that is a collapse.
    assert compare(page, "Please sign in.\n\n" + stub).verdict is Verdict.REEXAMINE_EXTRACTION


def test_chunk_sizes_scale_so_a_short_document_gets_at_least_16_chunks() -> None:
    for length in (300, 1000, 3000, 8000, 50_000):
        params = bytecdc.params_for_length(length)
        assert params.window_bytes == 48
        assert 1.25 * params.avg_size * 16 <= max(length, 16 * 1.25 * 16)
    assert bytecdc.params_for_length(10**9).avg_size == 512
    assert bytecdc.params_for_length(0).avg_size == 16


WORDS = st.sampled_from(["the", "tests", "run", "your", "app", "é", "naïve", "x", "日本",
                         "pytest", "uv", "a", "b", "c"])
SPACE = st.sampled_from([" ", " ", " ", "\n", "\n\n", "  ", "\t", "\r\n"])


@st.composite
def documents(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, max_size=300))
    return "".join(w + draw(SPACE) for w in words)


@st.composite
def edited(draw: st.DrawFn) -> tuple[str, str]:
    old = draw(documents())
    words = old.split()
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(words)))
        cut = draw(st.integers(0, 3))
        words[at:at + cut] = draw(st.lists(WORDS, max_size=4))
    return old, " ".join(words)


def on_word_boundaries(text: str, regions: tuple[Region, ...]) -> bool:
    return all(
        0 <= r.offset < r.end <= len(text)
        and not text[r.offset].isspace() and not text[r.end - 1].isspace()
        and (r.offset == 0 or text[r.offset - 1].isspace())
        and (r.end == len(text) or text[r.end].isspace())
        for r in regions)


def unmarked_words(text: str, regions: tuple[Region, ...]) -> list[str]:
    pieces, at = [], 0
    for r in regions:
        pieces.append(text[at:r.offset])
        at = r.end
    pieces.append(text[at:])
    return " ".join(pieces).split()


@given(documents())
def test_identical_text_has_similarity_one_and_no_regions(text: str) -> None:
    report = compare(text, text)
    assert report.similarity == 1.0
    assert report.verdict is Verdict.UNCHANGED
    assert report.regions == report.removed_regions == ()


@given(edited())
def test_regions_lie_on_word_boundaries_and_what_they_leave_is_shared(
    pair: tuple[str, str],
) -> None:
    old, new = pair
    report = compare(old, new)
    assert on_word_boundaries(new, report.regions)
    assert on_word_boundaries(old, report.removed_regions)
    assert unmarked_words(new, report.regions) == unmarked_words(old, report.removed_regions)
    assert 0.0 <= report.similarity <= 1.0
    assert report.changed == (normalize(old).text != normalize(new).text)


@given(edited())
def test_similarity_is_nearly_symmetric(pair: tuple[str, str]) -> None:
    old, new = pair
    there, back = compare(old, new), compare(new, old)
    assert (there.verdict is Verdict.UNCHANGED) == (back.verdict is Verdict.UNCHANGED)
    # The word diff picks one of several equally long alignments, so the two
    # directions may differ, by a few words' worth of bytes at most.
    size = len(normalize(old).text.encode()) + len(normalize(new).text.encode())
    assert abs(there.similarity - back.similarity) <= max(0.1, 40 / max(size, 1))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400_000), max_size=12))
def test_long_texts_compared_in_pieces_get_the_report_of_the_whole_texts(
        cuts: list[int]) -> None:
    from kbsync.core.compare import compare_long
    from kbsync.core.normalize import BLOCK_CHARS

    words = "harbour crane tide lantern café Straße quay ledger".split()
    old = " ".join(random.Random(5).choices(words, k=50_000))
    assert len(old) > 2 * BLOCK_CHARS  # the canonical text is made in several blocks
    new = old[:200_000] + " a sentence inserted in the middle. " + old[200_000:]
    bounds = sorted({min(c, len(new)) for c in cuts})
    pieces = [new[a:b] for a, b in zip([0, *bounds], [*bounds, len(new)], strict=True)]
    whole = compare_long([old], [new])
    assert compare_long([old[:7_000], old[7_000:150_001], old[150_001:]], pieces) == whole
    assert whole.changed
    assert 0.9 < whole.similarity < 1.0
    assert (whole.regions, whole.removed_regions) == ((), ())
