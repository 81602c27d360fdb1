"""Files of a type no extractor reads are skipped, counted and named: in the report, its
JSON, the stored run and the dashboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.cli.render import UNSUPPORTED_NAMED
from kbsync.engine import init_config
from kbsync.serve import create_app

# A PNG signature: a type kbsync reads no text from.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
ODD = "logo\x1b[31m.png"  # an escape sequence in a file name must reach no terminal


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nHow to rotate secrets without downtime.\n")
    for name in ("diagram.png", ODD):
        (docs / name).write_bytes(PNG)
    init_config(tmp_path, ["docs"])
    return tmp_path


def test_the_report_names_each_file_it_skipped_as_unsupported(folder: Path) -> None:
    with KnowledgeBase.open(folder) as kb:
        result = kb.sync().sources[0]
        assert result.skipped_unsupported == 2
        assert sorted(result.unsupported) == sorted(["diagram.png", ODD])
        stored = kb.runs()[0].report["sources"][0]
    assert sorted(stored["unsupported"]) == sorted(["diagram.png", ODD])


def test_the_sync_command_names_them_escaped_and_json_lists_them(folder: Path) -> None:
    shown = CliRunner().invoke(app, ["sync", "-c", str(folder)])
    assert shown.exit_code == 0, shown.output
    assert "2 files were skipped, of a type no extractor reads" in shown.stdout
    assert "diagram.png" in shown.stdout
    assert "\x1b[31m" not in shown.stdout
    assert "logo\\x1b[31m.png" in shown.stdout
    (folder / "docs" / "more.png").write_bytes(PNG)
    listed = CliRunner().invoke(app, ["sync", "-c", str(folder), "--json"])
    assert listed.exit_code == 0, listed.output
    source = json.loads(listed.stdout)["sources"][0]
    assert source["skipped_unsupported"] == 3
    assert sorted(source["unsupported"]) == sorted(["diagram.png", "more.png", ODD])


def test_a_long_list_is_cut_in_the_text_and_whole_in_json(folder: Path) -> None:
    for n in range(UNSUPPORTED_NAMED + 3):
        (folder / "docs" / f"scan-{n}.png").write_bytes(PNG)
    shown = CliRunner().invoke(app, ["sync", "-c", str(folder)])
    assert shown.exit_code == 0, shown.output
    total = UNSUPPORTED_NAMED + 5
    assert f"{total} files were skipped" in shown.stdout
    assert f"and {total - UNSUPPORTED_NAMED} more" in shown.stdout


def test_the_dashboard_s_run_page_names_them(folder: Path) -> None:
    with KnowledgeBase.open(folder) as kb:
        kb.sync()
        run_id = kb.runs()[0].id
        with TestClient(create_app(kb), base_url="http://127.0.0.1:8765") as client:
            page = client.get(f"/runs/{run_id}").text
    assert "Skipped in docs: of a type no extractor reads" in page
    assert "diagram.png" in page
    assert "\x1b" not in page
