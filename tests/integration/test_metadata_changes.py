"""A change of a document's metadata alone is seen where its changes are read: `kbsync diff`
(and its --json, the MCP server's diff), the sync's report, `KnowledgeBase.history`; and
`KnowledgeBase.document` returns the document's metadata, values as typed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.model import FieldChange

runner = CliRunner()

BODY = "# Runbook\n\nRestart the queue workers, then check the dead letters.\n"


def _write(path: Path, front: str, seconds_ago: int) -> None:
    """``path`` with front matter ``front``, settled (its mtime well before the listing)."""
    path.write_text(f"---\n{front}---\n{BODY}")
    then = time.time() - seconds_ago
    os.utime(path, (then, then))


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    _write(tmp_path / "docs" / "runbook.md", "status: draft\ntags: [ops, queue]\nreview: 2\n",
           7200)
    with KnowledgeBase.create(tmp_path, ["docs"], embedder={"kind": "hashing"}) as opened:
        opened.sync()
    _write(tmp_path / "docs" / "runbook.md",
           "status: published\ntags: [ops, queue]\nowner: ana\n", 3600)
    return tmp_path


def test_a_metadata_only_change_is_the_diff_of_the_document(kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        report = opened.sync()
        assert report.documents["metadata-only"] == 1
        diff = opened.diff("runbook.md")
    assert diff.first_version  # the text never changed
    assert diff.metadata_last
    assert diff.fields == (FieldChange("owner", None, "ana"),
                           FieldChange("review", "2", None),
                           FieldChange("status", "draft", "published"))
    assert diff.metadata == {"status": "published", "tags": ["ops", "queue"], "owner": "ana"}


def test_kbsync_diff_prints_the_fields_a_metadata_change_made(kb: Path) -> None:
    assert runner.invoke(app, ["sync", "-q", "-c", str(kb)]).exit_code == 0
    shown = runner.invoke(app, ["diff", "runbook.md", "-c", str(kb)])
    assert shown.exit_code == 0, shown.output
    assert "metadata changed" in shown.stdout
    for line in ("status: draft → published", "owner: set to ana", "review: removed (was 2)"):
        assert line in shown.stdout
    as_json = json.loads(runner.invoke(app, ["diff", "runbook.md", "--json", "-c",
                                             str(kb)]).stdout)
    assert as_json["metadata_last"] is True
    assert {"field": "status", "before": "draft", "after": "published"} in as_json["fields"]
    assert as_json["metadata"]["tags"] == ["ops", "queue"]


def test_the_report_of_the_sync_names_the_fields_and_their_values(kb: Path) -> None:
    done = runner.invoke(app, ["sync", "--json", "-c", str(kb)])
    change = json.loads(done.stdout)["sources"][0]["changes"][0]
    assert change["action"] == "metadata-only"
    assert {"field": "status", "before": "draft", "after": "published"} in change["fields"]
    with KnowledgeBase.open(kb) as opened:
        (last,) = opened.history("runbook.md", limit=1)
    assert FieldChange("status", "draft", "published") in last.fields


def test_a_document_comes_with_its_metadata_as_typed(kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        doc = opened.document("runbook.md")
    assert doc.metadata == {"status": "draft", "tags": ["ops", "queue"], "review": 2}
