"""reStructuredText titles split a plain-text page into sections, and nothing else does."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kbsync.extract.rest import rest_sections
from kbsync.extract.text import TextExtractor
from kbsync.model import Section

PAGE = """\
.. _topics-http:

==============
Handling HTTP
==============

Django serves requests.

Views
=====

A view takes a request.

Passing arguments
-----------------

Keyword arguments come from the URL.

    Indented code
    -------------

Decorators
==========

Wrap views.
"""


def test_a_page_is_split_at_its_titles_with_rest_levels() -> None:
    assert rest_sections(PAGE) == (
        Section(heading="Handling HTTP", text="Django serves requests.", level=1),
        Section(heading="Views", text="A view takes a request.", level=2),
        Section(heading="Passing arguments", text="Keyword arguments come from the URL.\n\n"
                "    Indented code\n    -------------", level=3),
        Section(heading="Decorators", text="Wrap views.", level=2),
    )


def test_the_labels_above_a_title_go_with_it_not_with_the_section_before() -> None:
    page = ("Manager names\n=============\n\nBy default a manager is objects.\n\n"
            ".. _custom-managers:\n\n.. _managers-custom:\n\nCustom managers\n"
            "===============\n\nYou can use a custom Manager.\n")
    assert rest_sections(page) == (
        Section(heading="Manager names", text="By default a manager is objects.", level=1),
        Section(heading="Custom managers", text="You can use a custom Manager.", level=1),
    )
    record = TextExtractor().extract(page.encode(), locator="managers.txt")
    assert ".. _" not in "".join(s.text for s in record.sections)


def test_a_title_s_inline_markup_is_left_out() -> None:
    page = ":setting:`SECRET_KEY` and ``DEBUG``\n====================================\n\nKeep it.\n"
    sections = rest_sections(page)
    assert sections is not None
    assert sections[0].heading == "SECRET_KEY and DEBUG"


def test_an_underline_shorter_than_its_title_is_no_title() -> None:
    assert rest_sections("A long title here\n=====\n\nText.\n") is None


def test_a_transition_between_blank_lines_and_a_table_border_are_no_titles() -> None:
    assert rest_sections("One paragraph.\n\n----------\n\nAnother.\n") is None
    assert rest_sections("=====  =====\nA      B\n=====  =====\n1      2\n=====  =====\n") is None


def test_a_title_must_follow_a_blank_line() -> None:
    assert rest_sections("A paragraph line\nStill the paragraph\n===================\n") is None


def test_a_text_file_with_titles_is_one_section_per_title_and_without_is_one() -> None:
    record = TextExtractor().extract(PAGE.encode(), locator="http.txt")
    assert [s.heading for s in record.sections] == [
        "Handling HTTP", "Views", "Passing arguments", "Decorators"]
    assert record.title == "Handling HTTP"
    plain = "Notes for the week.\nNothing here is a title.\n"
    assert TextExtractor().extract(plain.encode(), locator="notes.txt").sections == (
        Section(heading=None, text=plain),)


_LINE = st.text(st.sampled_from("ab =-~#.\t"), max_size=12)  # no inline markup


@given(st.lists(_LINE, max_size=30))
def test_a_page_keeps_every_word_but_the_adornments_of_its_titles(lines: list[str]) -> None:
    text = "\n".join(lines)
    sections = rest_sections(text)
    if sections is None:
        return
    kept = Counter(w for s in sections for w in f"{s.heading or ''} {s.text}".split())
    lost = Counter(text.split()) - kept
    assert not kept - Counter(text.split())  # nothing is made up
    assert all(len(set(word)) == 1 and len(word) >= 3 and not word.isalnum() for word in lost)
