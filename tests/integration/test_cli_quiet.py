"""The command line in daily use: one line when nothing changed, nothing with -q, -h
everywhere, and a sync of the sources named."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kbsync.cli import app, output
from tests.conftest import CORPUS

runner = CliRunner()
_DAY_AGO = time.time_ns() - 86_400 * 10**9


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    for name, count in (("docs", 3), ("notes", 2)):
        folder = tmp_path / name
        folder.mkdir()
        for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:count]:
            shutil.copy(path, folder / path.name)
            os.utime(folder / path.name, ns=(_DAY_AGO, _DAY_AGO))  # no stat racy
    result = runner.invoke(app, ["init", "docs", "notes", "--folder", str(tmp_path),
                                 "--embedder", "hashing"])
    assert result.exit_code == 0, result.output
    return tmp_path


def test_a_sync_that_changes_nothing_prints_one_line(kb: Path) -> None:
    first = runner.invoke(app, ["sync", "-c", str(kb)])
    assert first.exit_code == 0
    assert first.stdout.count("\n") > 10  # the tables of what it did
    again = runner.invoke(app, ["sync", "-c", str(kb)])
    assert again.exit_code == 0
    assert again.stdout.startswith("nothing changed: 5 documents unchanged in 2 sources (")
    assert again.stdout.count("\n") == 1
    assert again.stderr == ""


def test_the_one_line_of_a_sync_says_how_many_documents_it_read_again_for_a_racy_stat(
        kb: Path) -> None:
    # Stamped an hour ahead (a file server's clock ahead of ours): racy whenever listed,
    # however slowly the syncs run.
    ahead = time.time_ns() + 3600 * 10**9
    for path in (kb / "notes").iterdir():
        os.utime(path, ns=(ahead, ahead))
    assert runner.invoke(app, ["sync", "-c", str(kb)]).exit_code == 0
    again = runner.invoke(app, ["sync", "-c", str(kb)])
    assert again.stdout.startswith(
        "nothing changed: 5 documents unchanged, re-read 2 (modified within the clock's "
        "resolution) in 2 sources ("), again.stdout
    report = json.loads(runner.invoke(app, ["sync", "-c", str(kb), "--json"]).stdout)
    assert {s["source"]: s["racy_rereads"] for s in report["sources"]} == {"docs": 0,
                                                                            "notes": 2}


def test_the_one_line_of_a_sync_gives_the_wall_time_since_the_command_began(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert runner.invoke(app, ["sync", "-q", "-c", str(kb)]).exit_code == 0
    # A command begun 1,000 s ago (its imports, a model's load, a wait for the store):
    # time the report's stages do not hold, but the person waiting does.
    monkeypatch.setitem(output._START, "command", time.perf_counter() - 1000)
    for command in ("sync", "plan"):
        line = runner.invoke(app, [command, "-c", str(kb)]).stdout
        said = re.fullmatch(r".* sources \(([\d.]+) s\)\n", line)
        assert said is not None, line
        assert float(said[1]) >= 1000, line


def test_quiet_prints_nothing_on_success_and_json_stays_whole(kb: Path) -> None:
    quiet = runner.invoke(app, ["sync", "-q", "-c", str(kb)])
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", "")
    (kb / "docs" / "new.md").write_text("# New\n\nA page about tides.\n", encoding="utf-8")
    still = runner.invoke(app, ["sync", "--quiet", "--json", "-c", str(kb)])
    assert json.loads(still.stdout)["documents"]["new"] == 1


def test_a_sync_of_named_sources_leaves_the_others_alone(kb: Path) -> None:
    result = runner.invoke(app, ["sync", "notes", "-c", str(kb), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["source"] for s in report["sources"]] == ["notes"]
    assert report["documents"]["new"] == 2
    rest = json.loads(runner.invoke(app, ["sync", "-c", str(kb), "--json"]).stdout)
    assert {s["source"]: s["documents"].get("new", 0) for s in rest["sources"]} == {
        "docs": 3, "notes": 0}


def test_a_plan_of_named_sources_plans_those_alone(kb: Path) -> None:
    result = runner.invoke(app, ["plan", "notes", "-c", str(kb), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["source"] for s in report["sources"]] == ["notes"]
    assert report["documents"]["new"] == 2
    missing = runner.invoke(app, ["plan", "nots", "-c", str(kb)])
    assert missing.exit_code == 1
    assert "no source named 'nots'" in missing.stderr


def test_a_sync_of_a_source_not_configured_names_it(kb: Path) -> None:
    result = runner.invoke(app, ["sync", "nots", "-c", str(kb)])
    assert result.exit_code == 1
    assert "no source named 'nots' (sources: docs, notes)" in result.stderr


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer carries its own click)
            found += _commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_every_command_and_group_takes_h_for_help() -> None:
    commands = _commands(typer.main.get_group(app))
    assert ("sources", "add") in commands
    assert ("sync",) in commands
    for path in commands:
        result = runner.invoke(app, [*path, "-h"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.stdout, path


def test_a_sync_whose_stderr_is_no_terminal_shows_plain_progress_lines(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cron job or `| tee` saw nothing for minutes: it gets lines, never a bar's
    carriage returns (the interval is made 0 so the small corpus shows them)."""
    from kbsync.cli import sync_commands

    monkeypatch.setattr(sync_commands, "PROGRESS_EVERY", 0.0, raising=False)
    result = runner.invoke(app, ["sync", "-c", str(kb)])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines
    assert all(line.startswith("progress: ") for line in lines)
    assert "\r" not in result.stderr
    assert any(line.endswith("(100%)") for line in lines)
    embedding = [line for line in lines if line.startswith("progress: embed ")]
    assert embedding
    assert all(re.fullmatch(r"progress: embed [\d,]+/[\d,]+ chunks \(\d+%\)", line)
               for line in embedding), embedding


def test_quiet_and_json_show_no_progress(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbsync.cli import sync_commands

    monkeypatch.setattr(sync_commands, "PROGRESS_EVERY", 0.0, raising=False)
    for flags in (["-q"], ["--json"]):
        (kb / "docs" / f"new{len(flags[0])}.md").write_text("# New\n\nTides.\n", encoding="utf-8")
        result = runner.invoke(app, ["sync", *flags, "-c", str(kb)])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""


def test_a_plan_that_would_change_nothing_prints_one_line(kb: Path) -> None:
    assert runner.invoke(app, ["sync", "-q", "-c", str(kb)]).exit_code == 0
    result = runner.invoke(app, ["plan", "-c", str(kb)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("nothing to do: 5 documents unchanged in 2 sources (")
    assert result.stdout.count("\n") == 1


@pytest.mark.parametrize("command", ["sync", "watch"])
def test_the_help_of_yes_says_what_the_bill_guard_bounds_for_each_embedder(
        command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    said = " ".join(result.stdout.split())
    for words in ("priced API", "confirm_above_tokens", "local model",
                  "confirm_above_seconds", "hashing embedder never asks"):
        assert words in said


def test_a_plan_on_an_empty_store_says_what_it_reuses(tmp_path: Path) -> None:
    """A plan on an empty store said "reused 30" with nothing stored: chunks of the same
    text in the run share one vector, and the table says so."""
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "# Same\n\nThe same page about harbour lights and their keepers.\n"
    for name in ("a.md", "b.md"):  # two copies: more would be boilerplate
        (docs / name).write_text(text, encoding="utf-8")
    for n in range(6):
        (docs / f"p{n}.md").write_text(f"# Page {n}\n\nA page {n} about tides {n}.\n",
                                       encoding="utf-8")
    assert runner.invoke(app, ["init", "docs", "--folder", str(tmp_path),
                               "--embedder", "hashing"]).exit_code == 0
    result = runner.invoke(app, ["plan", "-c", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "embedded once in this run for another chunk of the same text" in " ".join(
        result.stdout.split())


def test_init_refuses_a_configured_folder_in_one_line_and_force_writes_over_it(
        kb: Path) -> None:
    assert runner.invoke(app, ["sync", "-q", "-c", str(kb)]).exit_code == 0
    config, db = kb / "kbsync.toml", kb / ".kbsync" / "kbsync.db"
    before, stored = config.read_bytes(), db.read_bytes()
    assert b'name = "notes"' in before
    refused = runner.invoke(app, ["init", "docs", "--folder", str(kb), "--embedder", "hashing"])
    assert refused.exit_code == 1
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert str(config) in refused.stderr
    assert "--force" in refused.stderr
    assert config.read_bytes() == before
    forced = runner.invoke(app, ["init", "docs", "--folder", str(kb), "--embedder", "hashing",
                                 "--force"])
    assert forced.exit_code == 0, forced.output
    assert 'name = "notes"' not in config.read_text(encoding="utf-8")
    assert db.read_bytes() == stored  # the store is never touched
