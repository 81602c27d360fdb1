from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kbsync.cli import app
from tests.conftest import CORPUS

runner = CliRunner()


def test_chunk_lists_the_chunks_of_one_file_and_the_diagnostics() -> None:
    result = runner.invoke(app, ["chunk", str(CORPUS / "a-essay-lighthouses.txt")])
    assert result.exit_code == 0, result.output
    assert "primary" in result.output
    assert "Chunking diagnostics" in result.output


def test_chunk_json_is_machine_readable_for_a_folder() -> None:
    result = runner.invoke(app, ["chunk", str(CORPUS), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert len(payload["files"]) == len(list(CORPUS.iterdir()))
    assert payload["diagnostics"]["chunk_count"] > 100


def test_a_missing_path_is_one_clear_line_and_exit_code_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["chunk", str(tmp_path / "nope.txt")])
    assert result.exit_code == 1
    assert "no such file or folder" in result.output
    assert "Traceback" not in result.output


def test_an_unknown_strategy_is_a_usage_error_with_exit_code_2() -> None:
    result = runner.invoke(app, ["chunk", str(CORPUS), "--strategy", "bogus"])
    assert result.exit_code == 2
    assert "unknown strategy 'bogus'" in result.output
    assert "sentences" in result.output


def test_an_unreadable_file_is_reported_by_name_and_the_others_still_chunk(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Title\n\nSome words here.\n")
    (tmp_path / "bad.bin").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    result = runner.invoke(app, ["chunk", str(tmp_path), "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert str(tmp_path / "bad.bin") in payload["failures"]
    assert str(tmp_path / "good.md") in payload["files"]


def test_bad_parameters_exit_with_code_1() -> None:
    result = runner.invoke(app, ["chunk", str(CORPUS), "--min-tokens", "900"])
    assert result.exit_code == 1
    assert "greater than max_tokens" in result.output


def test_the_installed_command_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "kbsync", "version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip()


def test_chunk_with_a_knowledge_base_chunks_as_its_sync_does(tmp_path: Path) -> None:
    from kbsync.app.knowledge_base import KnowledgeBase
    from kbsync.engine import init_config

    (tmp_path / "docs").mkdir()
    essay = CORPUS / "a-essay-lighthouses.txt"
    (tmp_path / "docs" / essay.name).write_bytes(essay.read_bytes())
    init_config(tmp_path, ["docs"], embedder={"kind": "hashing"})  # the sentences default
    with KnowledgeBase.open(tmp_path) as kb:
        kb.sync()
        stored = sorted(d for _, d in kb.store.chunk_digests("docs"))
    result = runner.invoke(app, ["chunk", str(essay), "-c", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    chunks = json.loads(result.output)["files"][str(essay)]["chunks"]
    assert sorted(c["identity"] for c in chunks) == stored
    assert json.loads(result.output)["diagnostics"]["strategy"] == "sentences"
    tttd = runner.invoke(app, ["chunk", str(essay), "-c", str(tmp_path), "--json",
                               "--strategy", "tttd"])
    assert json.loads(tttd.output)["diagnostics"]["strategy"] == "tttd"  # an option overrides
