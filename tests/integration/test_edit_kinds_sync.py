"""A sync reports what each edit is: its kind and reason in the report, --json, the stored
run, the document's history and ``diff``; a changed front-matter field is substantive."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase, Verdict
from kbsync.cli import app
from kbsync.cli.render import change_lines

PAGE = """\
---
title: Rate limits
status: draft
---

# Rate limits

The gateway accepts up to 950 requests per minute from one client. Clients that go over
the limit get an answer with status 429; they should wait before they try again.

## Configuration

Set `max_requests` in the limits table. A value of zero turns the limit off, which is not
recommended on a public address. Each worker keeps its own counter.
"""


def write(path: Path, text: str) -> None:
    """Write ``text`` with a new mtime, so the stat gate sees the change whatever the clock."""
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    write(tmp_path / "docs" / "limits.md", PAGE)
    KnowledgeBase.create(tmp_path, sources=["docs"], embedder={"kind": "hashing"}).close()
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.sync().total("new") == 1
    return tmp_path


def test_a_changed_number_is_reported_substantive_with_its_reason_everywhere(home: Path) -> None:
    write(home / "docs" / "limits.md", PAGE.replace("950", "975"))
    with KnowledgeBase.open(home) as kb:
        report = kb.sync()
        (change,) = [c.change for c in report.sources[0].changes]
        assert change is not None
        assert change.similarity > 0.95
        assert change.verdict is Verdict.REPROCESS
        assert (str(change.kind), change.reason) == ("substantive", "number 950 → 975")
        assert "reprocess (substantive: number 950 → 975)" in str(change_lines(report)[0])
        diff = kb.diff("limits.md")
        assert (str(diff.kind), diff.reason) == ("substantive", "number 950 → 975")
        (last, *_) = kb.history("limits.md")
        assert (last.kind, last.reason) == ("substantive", "number 950 → 975")
    result = CliRunner().invoke(app, ["diff", "limits.md", "--config", str(home), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["reason"] == "number 950 → 975"
    result = CliRunner().invoke(app, ["diff", "limits.md", "--config", str(home)])
    assert "reprocess (substantive: number 950 → 975)" in " ".join(result.output.split())


def test_a_punctuation_fix_is_cosmetic(home: Path) -> None:
    write(home / "docs" / "limits.md", PAGE.replace("try again.", "try again!"))
    with KnowledgeBase.open(home) as kb:
        (change,) = [c.change for c in kb.sync().sources[0].changes]
    assert change is not None
    assert change.verdict is Verdict.COSMETIC
    assert (str(change.kind), change.reason) == ("cosmetic", "punctuation")


def test_a_changed_front_matter_field_alone_is_a_substantive_change_in_the_report(
    home: Path,
) -> None:
    write(home / "docs" / "limits.md", PAGE.replace("status: draft", "status: published"))
    with KnowledgeBase.open(home) as kb:
        report = kb.sync()
        assert report.total("metadata-only") == 1
        (entry,) = report.sources[0].changes
        assert entry.change is not None
        assert entry.change.verdict is not Verdict.COSMETIC
        assert (str(entry.change.kind), entry.change.reason) == \
            ("substantive", "metadata field status")
        stored = kb.runs(1)[0].report
    (change,) = stored["sources"][0]["changes"]
    assert (change["action"], change["kind"], change["reason"]) == \
        ("metadata-only", "substantive", "metadata field status")


def test_a_cosmetic_text_edit_with_a_changed_field_is_substantive(home: Path) -> None:
    edited = PAGE.replace("status: draft", "status: final").replace("try again.", "try again!")
    write(home / "docs" / "limits.md", edited)
    with KnowledgeBase.open(home) as kb:
        (change,) = [c.change for c in kb.sync().sources[0].changes]
    assert change is not None
    assert change.verdict is Verdict.REPROCESS
    assert (str(change.kind), change.reason) == ("substantive", "metadata field status")
