"""The knowledge-base commands end to end, through the command line."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync.cli import app
from kbsync.engine import load_config
from tests.conftest import CORPUS

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:6]:
        shutil.copy(path, docs / path.name)
    code, _ = _run("init", "docs", "--folder", str(tmp_path), "--embedder", "hashing")
    assert code == 0
    return tmp_path


def test_init_plan_sync_status_search_in_json(kb: Path) -> None:
    c = str(kb)
    code, out = _run("plan", "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["documents"]["new"] == 6
    assert json.loads(_run("status", "-c", c, "--json")[1])["documents"] == 0
    assert not (kb / ".kbsync").exists()  # plan and status wrote nothing
    code, out = _run("sync", "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["documents"]["new"] == 6
    code, out = _run("status", "-c", c, "--json")
    assert json.loads(out)["documents"] == 6
    code, out = _run("search", "retry backoff", "-k", "3", "-c", c, "--json")
    hits = json.loads(out)["hits"]
    assert code == 0
    assert len(hits) == 3
    assert json.loads(out)["warnings"] == []
    assert {"key", "heading", "score", "text"} <= set(hits[0])


def test_status_tells_people_the_counts_each_source_and_what_the_last_sync_did(
        kb: Path) -> None:
    c = str(kb)
    assert "last sync:  never" in _run("status", "-c", c)[1]
    _run("sync", "-c", c)
    code, out = _run("status", "-c", c)
    assert code == 0
    assert "sources:    docs (6 documents)" in out
    assert "store:      6 documents," in out
    assert out.rstrip().endswith(": 6 new")
    assert out.split("\n")[3].endswith(" embeddings, 1 run")
    shutil.rmtree(kb / "docs")
    _run("sync", "-c", c)
    out = _run("status", "-c", c)[1]
    assert "\n  failed:   docs: source root " in out  # the source's failure, not a document's
    assert ": nothing done, because of these failures\n  failed:" in out


def test_status_after_a_first_sync_killed_before_its_end_does_not_say_never(
        kb: Path) -> None:
    c = str(kb)
    _run("sync", "-c", c)
    # What a kill -9 leaves: the batches applied, the run never recorded.
    with sqlite3.connect(kb / ".kbsync" / "kbsync.db") as db:
        db.execute("DELETE FROM runs")
    out = _run("status", "-c", c)[1]
    assert "last sync:  never" not in out
    assert "last sync:  none recorded; a sync stopped before its end applied these " \
           "documents" in out


def test_status_names_the_documents_the_last_sync_could_not_take_and_why(kb: Path) -> None:
    c = str(kb)
    (kb / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4 cut short")
    (kb / "docs" / "[usr-bin].pdf").write_bytes(b"not a pdf at all")
    _run("sync", "-c", c)
    out = _run("status", "-c", c)[1]
    assert "  failed:   broken.pdf (docs): is a damaged or unreadable PDF" in out
    assert "  failed:   [usr-bin].pdf (docs): is not a PDF" in out
    failures = json.loads(_run("status", "-c", c, "--json")[1])["last_run"]["failures"]
    assert sorted(f["key"] for f in failures) == ["[usr-bin].pdf", "broken.pdf"]
    assert {f["source"] for f in failures} == {"docs"}


def test_status_lists_sources_by_name_in_its_lines_and_its_json_alike(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):  # configured in this order
        (tmp_path / name).mkdir()
        (tmp_path / name / "page.md").write_text(f"# {name}\n\nWords of {name}.\n")
        (tmp_path / name / "bad.pdf").write_bytes(b"not a pdf at all")
    assert _run("init", "zeta", "alpha", "mid", "--folder", str(tmp_path),
                "--embedder", "hashing")[0] == 0
    c = str(tmp_path)
    _run("sync", "-c", c)
    out = _run("status", "-c", c)[1]
    assert "sources:    alpha (1 document), mid (1 document), zeta (1 document)" in out
    assert [line.split()[1] for line in out.splitlines() if "failed:" in line] == [
        "bad.pdf"] * 3
    assert [line.split()[2] for line in out.splitlines() if "failed:" in line] == [
        "(alpha):", "(mid):", "(zeta):"]
    data = json.loads(_run("status", "-c", c, "--json")[1])
    assert data["sources"] == list(data["by_source"]) == ["alpha", "mid", "zeta"]
    assert [f["source"] for f in data["last_run"]["failures"]] == ["alpha", "mid", "zeta"]


def test_diff_shows_the_changed_region_of_the_last_change(kb: Path) -> None:
    c = str(kb)
    _run("sync", "-c", c)
    path = sorted((kb / "docs").iterdir())[0]
    code, out = _run("diff", path.name, "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["first_version"] is True
    assert "first version" in _run("diff", path.name, "-c", c)[1]
    body = path.read_text()
    at = body.index("\n\n", len(body) // 2)
    path.write_text(body[:at] + "\n\nA brand new paragraph about lighthouse keepers." + body[at:])
    assert _run("sync", "-c", c)[0] == 0
    code, out = _run("diff", path.name, "-c", c, "--json")
    data = json.loads(out)
    assert code == 0
    assert data["first_version"] is False
    assert (data["verdict"], data["kind"], data["reason"]) == \
        ("reprocess", "substantive", "7 words added")
    assert any("lighthouse keepers" in r["text"] for r in data["regions"])
    code, out = _run("diff", path.name, "-c", c)
    assert "lighthouse keepers" in out


def test_diff_shows_removed_text_marked_when_piped(kb: Path) -> None:
    c = str(kb)
    _run("sync", "-c", c)
    path = sorted((kb / "docs").iterdir())[1]
    path.write_text(path.read_text() + "\n\nA paragraph that will not stay for long.")
    _run("sync", "-c", c)
    path.write_text(path.read_text().replace("\n\nA paragraph that will not stay for long.", ""))
    assert _run("sync", "-c", c)[0] == 0
    code, out = _run("diff", path.name, "-c", c, "--json")
    data = json.loads(out)
    assert (code, data["regions"]) == (0, [])
    assert [r["text"] for r in data["removed"]] == ["A paragraph that will not stay for long."]
    code, out = _run("diff", path.name, "-c", c)
    assert "reprocess (substantive: 8 words removed)" in " ".join(out.split())
    assert "0 region(s) added, 1 removed" in " ".join(out.split())
    assert "[-A paragraph that will not stay for long.-]" in " ".join(out.split())


def test_diff_of_a_key_two_sources_hold_shows_the_source_asked_for(kb: Path) -> None:
    c = str(kb)
    (kb / "notes").mkdir()
    name = sorted((kb / "docs").iterdir())[0].name
    (kb / "notes" / name).write_text("# Notes\n\nThe first note about cranes.\n")
    assert _run("sources", "add", str(kb / "notes"), "--name", "notes", "-c", c)[0] == 0
    _run("sync", "-c", c)
    (kb / "notes" / name).write_text("# Notes\n\nThe first note about cranes and tugs.\n")
    _run("sync", "-c", c)
    code, out = _run("diff", name, "--source", "notes", "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["source"] == "notes"
    assert [r["text"] for r in json.loads(out)["regions"]] == ["cranes and tugs."]
    assert json.loads(_run("diff", name, "--source", "docs", "-c", c, "--json")[1])[
        "first_version"] is True
    ambiguous = runner.invoke(app, ["diff", name, "-c", c])
    assert ambiguous.exit_code != 0  # not one of the two, silently
    assert "several sources hold this key (docs, notes)" in ambiguous.stderr


def test_a_moved_document_is_reported_with_the_key_it_came_from(kb: Path) -> None:
    c = str(kb)
    _run("sync", "-c", c)
    old = sorted((kb / "docs").iterdir())[0]
    old.rename(kb / "docs" / "renamed.md")
    code, out = _run("sync", "-c", c, "--json")
    assert code == 0
    (change,) = json.loads(out)["sources"][0]["changes"]
    assert change == {"key": "renamed.md", "action": "moved", "from": old.name}
    (kb / "docs" / "renamed.md").rename(old)
    assert f"moved {old.name} (docs), from renamed.md" in _run("sync", "-c", c)[1]


def test_verify_erase_and_gc(kb: Path) -> None:
    c = str(kb)
    _run("sync", "-c", c)
    code, out = _run("verify", "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["ok"]
    code, out = _run("erase", "a-harbormaster-c*", "-c", c, "--json")
    assert code == 0
    assert len(json.loads(out)["erased"]) >= 1
    code, out = _run("gc", "-c", c, "--json")
    assert code == 0
    code, out = _run("gc", "-c", c)
    assert code == 0
    assert out.startswith("removed: ")  # "removed: embeddings 0, ...": no count to agree with
    assert _run("verify", "-c", c)[0] == 0


def test_sources_add_refuses_a_folder_that_does_not_exist(kb: Path) -> None:
    before = (kb / "kbsync.toml").read_text()
    result = runner.invoke(app, ["sources", "add", "no-such-folder", "-c", str(kb)])
    assert result.exit_code == 1
    assert "no-such-folder: no such folder" in result.stderr
    assert (kb / "kbsync.toml").read_text() == before


def test_sources_add_and_remove_edit_the_configuration(kb: Path) -> None:
    c = str(kb)
    (kb / "notes").mkdir()
    (kb / "notes" / "n.md").write_text("# Note\n\nA short note about harbours.\n")
    assert _run("sources", "add", "notes", "-c", c)[0] == 0
    _, out = _run("sync", "-c", c, "--json")
    assert {s["source"] for s in json.loads(out)["sources"]} == {"docs", "notes"}
    assert _run("sources", "remove", "notes", "-c", c)[0] == 0
    assert "notes" not in (kb / "kbsync.toml").read_text()


def test_sources_added_at_once_by_several_processes_are_all_kept_and_no_lock_file_is_left(
        kb: Path) -> None:
    names = [f"notes{n}" for n in range(6)]
    for name in names:
        (kb / name).mkdir()
    runs = [subprocess.Popen([sys.executable, "-m", "kbsync", "sources", "add", name, "-c",
                              str(kb)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for name in names]
    assert [run.wait(timeout=120) for run in runs] == [0] * len(names)
    configured = load_config(kb).sources
    assert set(names) <= {s.name for s in configured}
    assert not list(kb.glob(".*.lock"))


def test_a_missing_configuration_is_one_clear_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sync", "-c", str(tmp_path)])
    assert result.exit_code == 1
    assert "run `kbsync init` first" in result.output


@pytest.mark.parametrize("command", [["sync"], ["plan"], ["status"], ["verify"], ["gc"],
                                     ["search", "x"], ["diff", "a.md"]])
def test_an_error_under_json_is_one_json_object_on_stdout_and_nothing_else(
        tmp_path: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "-c", str(tmp_path), "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["type"] == "ConfigError"
    assert "run `kbsync init` first" in error["message"]
    assert result.stderr == ""  # said once: a terminal showed the JSON and the line


@pytest.mark.parametrize("quick", [True, False])
def test_a_broken_configuration_under_json_is_said_once_as_json_even_with_stderr_joined(
        tmp_path: Path, quick: bool) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "kbsync.toml").write_text('[[sources]]\nname = "docs"\nkind = "folder"\n'
                                          'path = "d"\nbogus = 1\n')
    command = ["status"] if quick else ["search", "x"]  # kbsync.cli.quick's path, Typer's
    run = subprocess.run([sys.executable, "-m", "kbsync", *command, "-c", str(tmp_path),
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=120, check=False)
    assert run.returncode == 1
    message = json.loads(run.stdout)["error"]["message"]  # the whole output is one object
    assert message.count("[[sources]] 'docs'") == 1
    assert "bogus" in message


def test_an_error_under_json_is_also_a_line_on_stderr_when_only_stderr_is_watched(
        tmp_path: Path) -> None:
    import os

    watched, terminal = os.openpty()  # stderr a terminal, stdout a pipe: `--json > out`
    try:
        run = subprocess.run([sys.executable, "-m", "kbsync", "search", "x", "-c",
                              str(tmp_path), "--json"], stdout=subprocess.PIPE,
                             stderr=terminal, text=True, timeout=120, check=False)
        os.close(terminal)
        seen = b""
        while True:
            try:
                block = os.read(watched, 4096)
            except OSError:  # the terminal's far side is closed: all was read
                break
            if not block:
                break
            seen += block
    finally:
        os.close(watched)
    assert run.returncode == 1
    assert "run `kbsync init` first" in json.loads(run.stdout)["error"]["message"]
    assert seen.decode().startswith("error: ")
    assert seen.decode().count("run `kbsync init` first") == 1


def test_a_sync_with_a_failed_document_exits_with_code_4(kb: Path) -> None:
    (kb / "docs" / "broken.txt").write_bytes(b"\x00\x01\x02" * 100)
    result = runner.invoke(app, ["sync", "-c", str(kb)])
    assert result.exit_code == 4
    assert "broken.txt" in result.output


def test_help_names_config_tables_and_whole_options_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["sync", "--help"], terminal_width=80,
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "[index] confirm_above_tokens" in text
    assert "--allow-mass-delete" in text
    assert "--accept-replacements" in text
    assert "…" not in result.stdout


def test_search_where_filters_by_path_and_shows_rank_and_relevance(kb: Path) -> None:
    c = str(kb)
    assert _run("sync", "-c", c)[0] == 0
    one = sorted(p.name for p in (kb / "docs").iterdir())[0]
    code, out = _run("search", "retry backoff", "-k", "5", "-c", c, "--json",
                     "--where", f"path={one[:-4]}*", "--where", "source=docs")
    assert code == 0
    hits = json.loads(out)["hits"]
    assert hits
    assert {h["key"] for h in hits} == {one}
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert all(0 <= h["relevance"] <= 1 for h in hits)
    assert all("score" in h for h in hits)  # the raw value, for those who want it
    code, out = _run("search", "retry backoff", "-c", c, "--where", "lang=xx")
    assert code == 0
    assert "no results" in out
    code, out = _run("search", "retry backoff", "-k", "2", "-c", c)
    assert "relevance" in out
    assert "1." in out


def test_a_malformed_where_is_a_usage_error_that_names_it(kb: Path) -> None:
    result = runner.invoke(app, ["search", "retry", "-c", str(kb), "--where", "lang"])
    assert result.exit_code == 2
    assert "'lang'" in result.stderr
    assert "NAME=VALUE" in result.stderr


def test_a_where_with_spaces_a_capitalised_field_or_an_unknown_source_says_so(kb: Path) -> None:
    c = str(kb)
    assert _run("sync", "-c", c)[0] == 0
    code, out = _run("search", "retry backoff", "-c", c, "--json", "--where", "source = docs")
    assert code == 0
    assert json.loads(out)["hits"]  # the spaces around '=' are not part of the value
    result = runner.invoke(app, ["search", "retry", "-c", c, "--where", "Path=docs/*"])
    assert result.exit_code == 2
    assert "lower case: path=" in result.stderr
    result = runner.invoke(app, ["search", "retry", "-c", c, "--where", "source=dcos"])
    assert result.exit_code == 0
    assert "no results" in result.stdout
    assert "no source is named 'dcos'" in result.stderr
