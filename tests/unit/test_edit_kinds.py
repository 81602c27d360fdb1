"""Edit kinds: cosmetic means whitespace, punctuation, case or a few spelling fixes; a changed
number, negation, modal word, heading, metadata field or identifier is substantive."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from kbsync import ChangeKind, ChangeReport, Verdict, compare
from kbsync.core.compare import with_metadata
from kbsync.core.edits import FEW_WORDS, HUNK_WORDS, Hunk, changed_fields, classify
from kbsync.report import DocumentChange

PAGE = """\
# Rate limits

The gateway accepts up to 950 requests per minute from one client. Clients that go
over the limit get an answer with status 429 and a Retry-After header; they should wait
that long before they try again.

## Configuration

Set `max_requests` in the `[limits]` table. The value must be a whole number; a value of
zero turns the limit off, which is not recommended on a public address.

Example::

    limits = load_limits(path)
    gateway.apply(limits)

Each worker keeps its own counter, so the limit holds per worker and not per cluster.
"""

WORDS = st.sampled_from(
    "the gateway accepts requests from clients that wait before they try again while each "
    "worker keeps its own counter and table of values for every address".split())


def edit(old: str, new: str) -> ChangeReport:
    return compare(old, new)


def long_page(paragraphs: int = 40) -> str:
    """A long page of ordinary prose: one number, and paragraphs of sentences."""
    body = [f"Paragraph {n} tells how the harbour keeps its ledgers in order, how the clerks "
            "copy every entry twice and why the night shift checks the totals before dawn."
            for n in range(paragraphs)]
    return "Harbour ledgers\n\n" + "\n\n".join(body) + "\n"


# -- the rules -------------------------------------------------------------------------------

def test_a_changed_number_in_a_long_page_is_named_in_the_reason() -> None:
    page = long_page()
    report = edit(page, page.replace("Paragraph 17 ", "Paragraph 18 "))
    assert (report.kind, report.reason) == (ChangeKind.SUBSTANTIVE, "number 17 → 18")


def test_the_reason_names_a_changed_number_date_or_version() -> None:
    assert edit(PAGE, PAGE.replace("950", "975")).reason == "number 950 → 975"
    dated = PAGE.replace("per minute", "per minute (since 2026-01-05)")
    assert edit(PAGE, dated).reason == "date 2026-01-05 added"
    versioned = PAGE.replace("per minute", "per minute in 2.4.1")
    assert edit(versioned, versioned.replace("2.4.1", "2.5.0")).reason == "version 2.4.1 → 2.5.0"
    assert edit(PAGE, PAGE.replace("one client", "two clients")).reason.startswith("number")


def test_a_negation_added_or_removed_is_substantive() -> None:
    report = edit(PAGE, PAGE.replace("which is not recommended", "which is recommended"))
    assert (report.kind, report.reason) == (ChangeKind.SUBSTANTIVE, 'negation: removed "not"')
    report = edit(PAGE, PAGE.replace("they should wait", "they should never wait"))
    assert report.reason == 'negation: added "never"'


def test_a_modal_word_changed_is_substantive() -> None:
    assert edit(PAGE, PAGE.replace("they should wait", "they must wait")).reason == \
        'modal "should" → "must"'
    assert edit(PAGE, PAGE.replace("The value must", "The value may")).reason == \
        'modal "must" → "may"'
    report = edit(PAGE, PAGE.replace("Each worker keeps", "Each worker (deprecated) keeps"))
    assert report.reason == 'modal: added "deprecated"'


def test_a_heading_changed_even_by_a_spelling_fix_is_substantive() -> None:
    report = edit(PAGE, PAGE.replace("## Configuration", "## Settings"))
    assert report.reason == 'heading "Configuration" → "Settings"'
    report = edit(PAGE, PAGE.replace("## Configuration", "## Configuraton"))
    assert report.kind is ChangeKind.SUBSTANTIVE
    assert report.reason.startswith('heading "Configuration"')
    underlined = "Install\n=======\n\nRun the installer.\n"
    assert edit(underlined, underlined.replace("Install\n", "Installation\n")).reason == \
        'heading "Install" → "Installation"'


def test_a_heading_set_apart_as_an_extracted_record_sets_it_is_a_heading() -> None:
    # Extracted text holds each heading alone in its paragraph, without its # marks.
    record = "Rate limits\n\nThe gateway accepts requests.\n\nConfiguration\n\nSet the value.\n"
    report = edit(record, record.replace("Configuration", "Settings"))
    assert report.reason == 'heading "Configuration" → "Settings"'
    # A sentence alone in its paragraph is not a heading.
    prose = "Intro.\n\nThe gateway accepts requests.\n\nMore text follows here.\n"
    assert edit(prose, prose.replace("accepts", "takes")).reason == \
        'word "accepts" → "takes"'


def test_a_heading_whose_case_changed_stays_cosmetic() -> None:
    assert edit(PAGE, PAGE.replace("## Configuration", "## CONFIGURATION")).kind is \
        ChangeKind.COSMETIC


def test_a_metadata_field_in_a_header_or_front_matter_is_substantive_with_its_name() -> None:
    header = ("PEP: 9999\nTitle: Rate limits\nStatus: Draft\nType: Process\n\n"
              "Body text of the proposal.\n")
    report = edit(header, header.replace("Status: Draft", "Status: Accepted"))
    assert (report.kind, report.reason) == (ChangeKind.SUBSTANTIVE, "metadata field Status")
    front = "---\ntitle: Limits\nstatus: draft\n---\n\nBody text of the page.\n"
    assert edit(front, front.replace("draft", "Draft")).reason == "metadata field status"


def test_a_changed_identifier_is_substantive_even_by_one_letter_or_a_mark() -> None:
    assert edit(PAGE, PAGE.replace("`max_requests`", "`max_request`")).reason == \
        'identifier "`max_requests`" → "`max_request`"'
    assert edit(PAGE, PAGE.replace("`max_requests`", "`max.requests`")).kind is \
        ChangeKind.SUBSTANTIVE
    # In a code block, a word is an identifier too.
    report = edit(PAGE, PAGE.replace("gateway.apply(limits)", "gateway.apply(limit)"))
    assert report.reason.startswith("identifier")
    report = edit(PAGE, PAGE.replace("    limits = load_limits", "    limit = load_limits"))
    assert report.reason == 'identifier "limits" → "limit"'


def test_a_link_target_changed_is_substantive() -> None:
    page = "Read [the guide](https://www.example.org/guide/) first.\n"
    report = edit(page, page.replace("www.example.org", "example.org"))
    assert report.kind is ChangeKind.SUBSTANTIVE
    assert report.reason.startswith("identifier")


def test_a_few_spelling_fixes_are_cosmetic_and_more_are_substantive() -> None:
    typos = {"gateway": "gatway", "requests": "reqeusts", "client": "cleint",
             "header": "haeder", "counter": "countr"}
    broken = PAGE
    for right, wrong in typos.items():
        broken = re.sub(rf"\b{right}\b", wrong, broken, count=1)
    fixed_some = broken
    for wrong, right in [(w, r) for r, w in typos.items()][:FEW_WORDS]:
        fixed_some = fixed_some.replace(wrong, right, 1)
    report = edit(broken, fixed_some)
    assert (report.kind, report.verdict) == (ChangeKind.COSMETIC, Verdict.COSMETIC)
    assert report.reason == f'spelling "gatway" → "gateway" and {FEW_WORDS - 1} more'
    report = edit(broken, PAGE)
    assert report.kind is ChangeKind.SUBSTANTIVE
    assert report.reason == "5 words changed"


def test_a_word_replaced_by_another_word_is_substantive() -> None:
    report = edit(PAGE, PAGE.replace("keeps its own counter", "keeps its private counter"))
    assert report.reason == 'word "own" → "private"'
    report = edit(PAGE, PAGE.replace("holds per worker", "holds only per worker"))
    assert report.reason == 'word "only" added'


def test_contractions_and_their_long_forms_are_the_same_words() -> None:
    page = "Clients can't send more. They don't wait.\n"
    assert edit(page, page.replace("can't", "cannot")).kind is ChangeKind.COSMETIC
    assert edit(page, page.replace("can't", "can")).reason == 'negation: removed "can\'t"'


def test_punctuation_case_and_rewrapping_are_cosmetic() -> None:
    rewrapped = PAGE.replace("from one client. Clients", "from one\nclient. Clients")
    assert edit(PAGE, rewrapped).kind is ChangeKind.UNCHANGED
    report = edit(PAGE, PAGE.replace("try again.", "try again!").replace("Set ", "set "))
    assert (report.kind, report.reason) == (ChangeKind.COSMETIC, "punctuation, case")
    joined = PAGE.replace("from one client", "from one cli ent")
    assert edit(PAGE, joined).kind is ChangeKind.COSMETIC
    assert edit(PAGE, PAGE.replace("Retry-After", "RetryAfter")).reason.startswith("identifier")


def test_a_long_run_of_punctuation_is_counted_not_aligned_and_stays_cosmetic() -> None:
    words = [f"word{n}" for n in range(HUNK_WORDS)]
    old = " ".join(words) + "\n"
    new = " ".join(w.upper() + "," for w in words) + "\n"
    assert edit(old, new).kind is ChangeKind.COSMETIC
    rewritten = " ".join(f"term{n}" for n in range(HUNK_WORDS)) + "\n"
    report = edit(old, rewritten)
    assert report.kind is ChangeKind.SUBSTANTIVE
    assert report.reason == f"rewrite: {HUNK_WORDS} words changed"


def test_classify_reads_only_the_hunks_it_is_given() -> None:
    hunk = Hunk(["950"], ["975"], [10], [10])
    assert classify([hunk], "Limit: at 950 now.", "Limit: at 975 now.").reason == \
        "number 950 → 975"
    assert classify([], "a", "b").kind is ChangeKind.COSMETIC


# -- properties ------------------------------------------------------------------------------

@st.composite
def prose_and_number(draw: st.DrawFn) -> tuple[str, str]:
    sentences = draw(st.lists(st.lists(WORDS, min_size=4, max_size=12), min_size=2,
                              max_size=8))
    numbers = draw(st.lists(st.integers(0, 10_000), min_size=len(sentences),
                            max_size=len(sentences)))
    text = "\n\n".join(" ".join(s).capitalize() + f" near {n} units." for s, n in
                       zip(sentences, numbers, strict=True))
    k = draw(st.integers(0, len(sentences) - 1))
    other = draw(st.integers(0, 10_000).filter(lambda n: n != numbers[k]))
    paragraphs = text.split("\n\n")
    paragraphs[k] = paragraphs[k].replace(f" {numbers[k]} units", f" {other} units")
    return text, "\n\n".join(paragraphs)


@given(prose_and_number())
def test_any_edit_that_changes_a_number_is_never_cosmetic(texts: tuple[str, str]) -> None:
    old, new = texts
    report = edit(old, new)
    assert report.verdict is not Verdict.COSMETIC
    assert report.kind is ChangeKind.SUBSTANTIVE


_MARKS = st.sampled_from([".", ",", ";", ":", "!", "?", '"', "'", "(", ")", "*", "-", "—"])


@st.composite
def prose_and_layout_edit(draw: st.DrawFn) -> tuple[str, str]:
    words = draw(st.lists(WORDS, min_size=5, max_size=60))
    old = " ".join(words)
    new_words = []
    for w in words:
        op = draw(st.sampled_from(["keep", "keep", "case", "mark", "lead", "space", "drop"]))
        if op == "case":
            w = draw(st.sampled_from([w.upper(), w.capitalize(), w.lower()]))
        elif op == "mark":
            w = w + draw(_MARKS)
        elif op == "lead":
            w = draw(_MARKS) + w
        elif op == "space":
            w = w + draw(st.sampled_from(["\n", "\n\n", "  ", "\t"]))
        elif op == "drop" and new_words and not new_words[-1][-1:].isalnum():
            new_words[-1] = new_words[-1].rstrip(".,;:!?\"'()*-—\n\t ")
        new_words.append(w)
    return old, " ".join(new_words)


@given(prose_and_layout_edit())
def test_any_edit_of_whitespace_punctuation_or_case_only_is_cosmetic_or_unchanged(
    texts: tuple[str, str],
) -> None:
    old, new = texts
    report = edit(old, new)
    assert report.kind in (ChangeKind.COSMETIC, ChangeKind.UNCHANGED), report.reason
    assert report.verdict in (Verdict.COSMETIC, Verdict.UNCHANGED)


# -- where the kind goes ---------------------------------------------------------------------

def test_boilerplate_alone_changed_is_cosmetic() -> None:
    footer = "Copyright 2025 The Harbour Company. All rights reserved."
    page = PAGE + "\n\n" + footer + "\n"
    report = compare(page, page.replace("2025", "2026"),
                     ignore={footer.replace("2025", "2026"), footer})
    assert (report.kind, report.reason, report.verdict) == \
        (ChangeKind.COSMETIC, "boilerplate only", Verdict.COSMETIC)


def test_a_changed_metadata_field_makes_the_edit_substantive_but_a_stamp_does_not() -> None:
    cosmetic = edit(PAGE, PAGE.replace("try again.", "try again!"))
    old = {"status": "draft", "git_commit": "abc", "modified": "2026-01-01"}
    stamped = {"status": "draft", "git_commit": "def", "modified": "2026-02-01"}
    assert with_metadata(cosmetic, old, stamped) is cosmetic
    assert with_metadata(None, old, stamped) is None
    published = {**stamped, "status": "published"}
    report = with_metadata(cosmetic, old, published)
    assert report is not None
    assert (report.kind, report.reason, report.verdict) == \
        (ChangeKind.SUBSTANTIVE, "metadata field status", Verdict.REPROCESS)
    alone = with_metadata(None, old, {**published, "tags": "a, b"})
    assert alone is not None
    assert (alone.reason, alone.similarity, alone.verdict) == \
        ("metadata fields status, tags", 1.0, Verdict.REPROCESS)
    assert changed_fields({"a": "1"}, {"a": "1", "b": "2"}) == ("b",)


def test_the_kind_and_reason_travel_in_a_run_report_and_old_reports_still_read() -> None:
    report = edit(PAGE, PAGE.replace("950", "975"))
    data = DocumentChange("limits.md", "modified", report).to_dict()
    assert (data["kind"], data["reason"]) == ("substantive", "number 950 → 975")
    back = DocumentChange.from_dict(data).change
    assert back is not None
    assert (back.kind, back.reason) == (ChangeKind.SUBSTANTIVE, "number 950 → 975")
    old = {key: value for key, value in data.items() if key not in ("kind", "reason")}
    stored = DocumentChange.from_dict(old).change
    assert stored is not None
    assert (stored.kind, stored.reason, stored.verdict) == (None, "", Verdict.REPROCESS)


def test_bytes_and_unchanged_texts_have_their_kind() -> None:
    assert edit(PAGE, PAGE).kind is ChangeKind.UNCHANGED
    report = compare(PAGE.encode(), PAGE.replace("950", "975").encode())
    assert (report.kind, report.verdict) == (ChangeKind.SUBSTANTIVE, Verdict.REPROCESS)
    assert report.reason == "bytes: not compared word by word"
