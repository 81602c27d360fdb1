"""Ordinary text that looks like markup or holds control characters never crashes kbsync
and never reaches a terminal (or a page, or an MCP client) able to act.

The command line runs in subprocesses, as a user runs it: with and without ``--json``,
piped and with a forced colour terminal of 80 columns, so that rich really renders.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.mcp.server import build_server, document_uri
from kbsync.serve import create_app
from kbsync.terminal import UNSAFE, json_escaped, printable, strip_controls

SRC = str(Path(__file__).resolve().parents[2] / "src")
ESC = "\x1b"
LINK = f"{ESC}]8;;http://evil.example/{ESC}\\click here{ESC}]8;;{ESC}\\"
LONG_WORD = "supercalifragilistic" * 500  # 10,000 characters, no space

BRACKETS = ("# Install into [/usr/bin]\n\n"
            "Copy the tool to [/usr/bin] and keep [bold]this plain[/bold], then [/x] and [/]. "
            "Read the [tutorial on paths](https://example.org/a_[b]) and [[wiki links]]. "
            "Party 🎉👩‍💻 :smile: and <script>alert(1)</script> {{ 7 * 7 }}.\n")
ESCAPES = (f"# Terminal {ESC}[2J tricks\n\n"
           f"A hyperlink {LINK} then a screen clear {ESC}[2J{ESC}[H and a title "
           f"{ESC}]0;pwned\x07 and a colour {ESC}[31mred{ESC}[0m and back\x08\x08\x08spaced, "
           f"a bell \x07, a C1 \x9b2J control and a carriage\rreturn in harbour notes.\n")
BIDI = ("Invoice file \u202egnp.exe\u202c for the harbour and an isolate "
        "\u2067abc\u2069 with \u202aembedded\u202c text.\n")
LONG = f"Harbour start {LONG_WORD} end of the long word.\n"
ODD_NAME = f"[notes] [bold] {ESC}[2Jname.md"
FILES = {"brackets.md": BRACKETS, "escapes.md": ESCAPES, "bidi.txt": BIDI, "long.txt": LONG,
         ODD_NAME: "# Odd name\n\nA harbour file whose name has brackets and an escape.\n"}
EDIT = "\n\nA new paragraph about [/usr/bin] and {ESC}[2J again.\n".replace("{ESC}", ESC)
QUERY = "harbour usr bin tutorial hyperlink invoice start odd"
# What rich itself writes on a terminal: colours, and the progress bar's cursor moves.
SGR = re.compile(r"\x1b\[(?:[0-9;]*[mAK]|\?25[hl])|\r")


def _kbsync(folder: Path, *args: str, color: bool = False,
            config: bool = True) -> subprocess.CompletedProcess[str]:
    """``kbsync ARGS -c FOLDER`` (without ``-c`` unless ``config``) at 80 columns, piped or
    on a forced colour terminal."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORCE_COLOR", "NO_COLOR", "TERM", "COLUMNS")}
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [os.environ.get("PYTHONPATH")])])
    env["COLUMNS"] = "80"
    if color:
        env |= {"FORCE_COLOR": "1", "TERM": "xterm-256color"}
    where = ["-c", str(folder)] if config else []
    return subprocess.run([sys.executable, "-m", "kbsync", *args, *where],
                          cwd=folder, env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=300, check=False)


def _clean(run: subprocess.CompletedProcess[str], color: bool = False) -> str:
    """The output of a run that succeeded, checked to hold no raw control character."""
    both = run.stdout + run.stderr
    assert run.returncode == 0, both
    assert "Traceback" not in both
    assert "MarkupError" not in both
    shown = SGR.sub("", both) if color else both
    assert not UNSAFE.search(shown), repr(UNSAFE.findall(shown)[:5])
    return run.stdout


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A knowledge base of hostile documents, synced, then one of them edited and synced
    again; with the outputs of both syncs."""
    home = tmp_path_factory.mktemp("hostile")
    docs = home / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text, encoding="utf-8")
    init = subprocess.run([sys.executable, "-m", "kbsync", "init", "docs", "--folder", str(home),
                           "--embedder", "hashing"],
                          env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True,
                          check=False)
    assert init.returncode == 0, init.stderr
    first = _kbsync(home, "sync", "--json")
    (docs / "brackets.md").write_text(BRACKETS + EDIT, encoding="utf-8")
    (docs / ODD_NAME).write_text(FILES[ODD_NAME] + EDIT, encoding="utf-8")
    second = _kbsync(home, "sync", color=True)
    return {"home": home, "first": first, "second": second}


def test_sync_of_hostile_documents_prints_no_control_character(kb: dict[str, Any]) -> None:
    report = json.loads(_clean(kb["first"]))
    assert {c["key"] for s in report["sources"] for c in s["changes"]} == set(FILES)
    out = SGR.sub("", _clean(kb["second"], color=True))
    assert "Sync report" in out
    assert f"modified {printable(ODD_NAME)} (docs): " in out
    assert "…" not in out  # at 80 columns the tables turn rather than cut a figure
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize(("mode", "color"), [("hybrid", False), ("hybrid", True),
                                             ("text", True), ("vector", True)])
def test_search_shows_bracketed_text_and_escapes_control_characters(
        kb: dict[str, Any], mode: str, color: bool) -> None:
    out = _clean(_kbsync(kb["home"], "search", QUERY, "-k", "10", "--mode", mode,
                         color=color), color)
    shown = SGR.sub("", out)
    assert "[/usr/bin]" in shown
    assert "[bold]this plain[/bold]" in shown
    assert "[tutorial on paths](https://example.org/a_[b])" in shown
    assert "🎉" in shown
    assert r"\x1b[2J" in shown  # visible, not acted on
    assert r"\u202egnp.exe" in shown
    assert printable(ODD_NAME) in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    # Blocks, not a table: a line with the rank, the key and heading, then the text.
    # (a long heading wraps, so the score may stand on a later line of the block)
    assert re.search(r"^1\. \S.* › ", shown, re.MULTILINE)
    assert re.search(r"  relevance \d\.\d\d", shown)
    assert "┃" not in shown


@pytest.mark.parametrize("mode", ["hybrid", "text", "vector"])
def test_search_json_keeps_the_text_exactly(kb: dict[str, Any], mode: str) -> None:
    hits = json.loads(_clean(_kbsync(kb["home"], "search", QUERY, "-k", "10", "--mode", mode,
                                     "--context", "0", "--json")))["hits"]
    texts = "\n".join(h["text"] for h in hits)
    assert "[/usr/bin]" in texts
    assert mode == "text" or LINK in texts or "\u202egnp.exe" in texts
    assert ODD_NAME in {h["key"] for h in hits}


def test_chunk_lists_hostile_files_at_80_columns(kb: dict[str, Any]) -> None:
    docs = kb["home"] / "docs"
    out = _clean(_kbsync(kb["home"], "chunk", str(docs), "--chunks", color=True,
                         config=False), color=True)
    shown = SGR.sub("", out)
    assert "[/usr/bin]" in shown
    assert printable(ODD_NAME, one_line=True) in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "start" in shown
    assert "identity" in shown  # the figures keep their columns at 80 columns
    data = json.loads(_clean(_kbsync(kb["home"], "chunk", str(docs / "escapes.md"),
                                     "--json", config=False)))
    assert data["files"]


@pytest.mark.parametrize("key", ["brackets.md", ODD_NAME])
def test_diff_of_a_hostile_document(kb: dict[str, Any], key: str) -> None:
    out = SGR.sub("", _clean(_kbsync(kb["home"], "diff", key, color=True), color=True))
    assert "[/usr/bin]" in out
    assert printable(key, one_line=True) in out
    if key == ODD_NAME:
        data = json.loads(_clean(_kbsync(kb["home"], "diff", key, "--json")))
        assert data["key"] == key
        assert any("[/usr/bin]" in r["text"] for r in data["regions"])


def test_status_and_plan_of_hostile_documents(kb: dict[str, Any]) -> None:
    assert "5 documents" in _clean(_kbsync(kb["home"], "status"))
    assert "unchanged" in _clean(_kbsync(kb["home"], "plan", color=True), color=True)


def test_an_error_naming_a_hostile_key_is_one_escaped_line(kb: dict[str, Any]) -> None:
    run = _kbsync(kb["home"], "diff", f"missing {ESC}[2J [/usr/bin].md")
    assert run.returncode == 1
    assert ESC not in run.stderr
    assert r"\x1b[2J [/usr/bin]" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_an_empty_query_is_a_usage_error_of_one_line(kb: dict[str, Any]) -> None:
    for query in ("", "   "):
        run = CliRunner().invoke(app, ["search", query, "-c", str(kb["home"])])
        assert run.exit_code == 2
        assert len(run.stderr.strip().splitlines()) == 1
        assert "empty" in run.stderr


def test_version_json_names_the_version_python_and_the_extras() -> None:
    run = CliRunner().invoke(app, ["version", "--json"])
    assert run.exit_code == 0
    data = json.loads(run.stdout)
    assert data["version"]
    assert data["python"] == ".".join(map(str, sys.version_info[:3]))
    assert data["extras"]["mcp"] is True  # this suite runs with every extra


def test_version_json_names_every_extra_of_the_package() -> None:
    declared = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = set(declared["project"]["optional-dependencies"]) - {"dev"}
    run = CliRunner().invoke(app, ["version", "--json"])
    assert set(json.loads(run.stdout)["extras"]) == extras


def test_a_terminal_without_unicode_gets_escapes_not_a_crash(kb: dict[str, Any]) -> None:
    env_run = subprocess.run(
        [sys.executable, "-m", "kbsync", "search", QUERY, "-c", str(kb["home"])],
        env={**os.environ, "PYTHONPATH": SRC, "PYTHONIOENCODING": "ascii"},
        capture_output=True, text=True, encoding="ascii", errors="replace", check=False)
    assert env_run.returncode == 0, env_run.stderr
    assert "Traceback" not in env_run.stderr


# -- the dashboard and the MCP server -------------------------------------------------


def test_dashboard_pages_escape_hostile_documents(kb: dict[str, Any]) -> None:
    with KnowledgeBase.open(kb["home"]) as opened, \
            TestClient(create_app(opened), base_url="http://127.0.0.1:8765") as client:
        pages = ["/", "/runs", "/runs/1", "/runs/2", f"/search?q={QUERY}&k=10",
                 "/document?key=brackets.md", "/document?key=escapes.md",
                 "/document?" + urlencode({"key": ODD_NAME})]
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, (url, response.text)
            html = response.text
            assert not UNSAFE.search(html), (url, UNSAFE.findall(html)[:5])
            assert "<script>alert" not in html
        search = client.get("/search", params={"q": QUERY, "k": 10}).text
        assert "[/usr/bin]" in search
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in search
        assert r"\x1b[2J" in search
        api = client.get("/api/search", params={"q": QUERY, "k": 10})
        assert api.status_code == 200
        assert any("[/usr/bin]" in h["text"] for h in api.json())
        document = client.get("/api/document", params={"key": "escapes.md"}).json()
        assert document["text"] == opened.document("escapes.md").text  # the data is unchanged


def test_mcp_tools_return_the_words_without_control_sequences(kb: dict[str, Any]) -> None:
    async def body(client: Client) -> None:
        found = await client.call_tool("search", {"query": QUERY, "k": 10})
        passages = found.structured_content["passages"]
        texts = "\n".join(p["text"] for p in passages)
        assert "[/usr/bin]" in texts
        assert "click here" in texts
        assert "gnp.exe" in texts
        assert not UNSAFE.search(json.dumps(passages, ensure_ascii=False))
        assert strip_controls(ODD_NAME) in {p["key"] for p in passages}
        for key in ("escapes.md", ODD_NAME):
            diff = await client.call_tool("diff", {"key": key})
            assert not diff.is_error, diff.content
            assert not UNSAFE.search(json.dumps(diff.structured_content, ensure_ascii=False))
        read = await client.read_resource(document_uri("escapes.md"))
        text = read.contents[0].text
        assert "click here" in text
        assert ESC not in text
        assert "\x08" not in text
        status = await client.call_tool("status", {})
        assert not status.is_error

    with KnowledgeBase.open(kb["home"]) as opened:
        async def main() -> None:
            async with Client(build_server(opened), raise_exceptions=True) as client:
                await body(client)

        anyio.run(main)


# -- the one neutralization -----------------------------------------------------------


def test_printable_escapes_every_control_character_one_for_one() -> None:
    hostile = ESCAPES + BIDI + "\x00\x7f\x85\u2066"
    shown = printable(hostile)
    assert not UNSAFE.search(shown)
    assert "\n" in shown
    assert "\n" not in printable("a\nb\tc", one_line=True)
    plain = "plain [/usr/bin] 🎉 text\twith a tab"
    assert printable(plain) == plain
    assert printable("zero\u200dwidth joiner, soft\u00adhyphen") == (
        "zero\u200dwidth joiner, soft\u00adhyphen")


def test_the_invisible_direction_marks_are_escaped_too() -> None:
    # LRM, RLM and ALM reorder the neutral characters around them like the other bidi
    # controls, and show nothing: "rm \u200f-rf" need not read as what it is.
    marks = "left\u200emark right\u200fmark arabic\u061cmark"
    assert printable(marks) == r"left\u200emark right\u200fmark arabic\u061cmark"
    assert json.loads(json_escaped(json.dumps(marks, ensure_ascii=False))) == marks
    assert strip_controls(marks) == "leftmark rightmark arabicmark"


def test_json_escaped_is_the_same_data_with_no_raw_control_character() -> None:
    data = {"text": ESCAPES + BIDI + "\x85\x7f", "key": ODD_NAME}
    dumped = json_escaped(json.dumps(data, ensure_ascii=False))
    assert json.loads(dumped) == data
    assert not UNSAFE.search(dumped)


def test_strip_controls_keeps_the_words_and_drops_the_sequences() -> None:
    assert strip_controls(LINK) == "click here"
    assert strip_controls(f"a {ESC}[31mred{ESC}[0m b") == "a red b"
    assert strip_controls(f"t {ESC}]0;pwned\x07 u") == "t  u"
    assert strip_controls("back\x08\x08spaced \u202eabc\u202c \x9b2J") == "backspaced abc "
    assert strip_controls(f"{ESC}]unterminated\nnext line") == "\nnext line"
    assert strip_controls("keep\nlines\tand tabs") == "keep\nlines\tand tabs"
