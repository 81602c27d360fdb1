"""Commands start with what they use: ``kbsync status`` reads the store through its own code
without the sync, the chunking core, NumPy, Rich, Pydantic or Typer, ``kbsync --version``
imports nothing of the knowledge base, and the ``kbsync`` command imports the module of the
command it runs only (benchmarks/startup.py times them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbsync import KnowledgeBase, __version__
from kbsync.cli import COMMAND_MODULES, MODULES, app
from tests.conftest import CORPUS

# What a status has no use for: each costs from a few to a hundred milliseconds to import.
# A status reads kbsync.toml's outline (no [chunker], [index] or [search], which name the
# sync's and the pure core's types) and a SQLite store's file (not the store's roles).
NOT_FOR_STATUS = ("numpy", "pydantic", "rich", "typer", "click", "kbsync.sync",
                  "kbsync.core", "kbsync.extract.registry", "kbsync.app.knowledge_base",
                  "kbsync.cli.base", "kbsync.cli.read_commands", "kbsync.cli.sync_commands",
                  "kbsync.engine.config", "kbsync.engine.loading", "kbsync.store.sqlite.store",
                  "kbsync.store.sqlite.connection", "kbsync.store.sql.store", "kbsync.store.rows",
                  "kbsync.store.roles",
                  "hashlib", "logging")


def _heavy(modules: set[str], names: tuple[str, ...]) -> set[str]:
    """The ``modules`` that are one of ``names`` or inside one."""
    return {m for m in modules for name in names if m == name or m.startswith(name + ".")}


def _loaded(args: list[str]) -> tuple[str, set[str]]:
    """What ``kbsync ARGS`` prints, and the modules it imported."""
    code = ("import json, sys\nfrom kbsync.cli import main\nsys.argv = ['kbsync'] + ARGS\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
            ).replace("ARGS", repr(args))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout, set(json.loads(done.stderr.splitlines()[-1]))


@pytest.fixture
def synced(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:3]:
        (tmp_path / "docs" / path.name).write_bytes(path.read_bytes())
    with KnowledgeBase.create(tmp_path, ["docs"], embedder={"kind": "hashing"}) as kb:
        kb.sync()
    return tmp_path


def test_status_reads_the_store_without_numpy_the_sync_or_pydantic(synced: Path) -> None:
    printed, modules = _loaded(["status", "-c", str(synced)])
    assert "store:      3 documents" in printed
    assert "kbsync.store.sqlite.status" in modules  # the store's file, read for a status
    assert not _heavy(modules, NOT_FOR_STATUS)


def test_status_as_json_imports_no_more_than_the_status(synced: Path) -> None:
    printed, modules = _loaded(["status", "--json", "--config", str(synced)])
    assert json.loads(printed)["documents"] == 3
    assert not _heavy(modules, NOT_FOR_STATUS)


def test_the_version_option_imports_nothing_of_the_knowledge_base() -> None:
    printed, modules = _loaded(["--version"])
    assert printed.strip() == __version__
    assert not _heavy(modules, ("typer", "click", "kbsync.engine", "kbsync.store", "kbsync.app"))


def test_a_status_with_an_option_the_quick_path_does_not_read_goes_to_typer(
        synced: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kbsync", "status", "--jsn", "-c", str(synced)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "No such option: --jsn" in done.stderr
    done = subprocess.run([sys.executable, "-m", "kbsync", "status", "-h"], capture_output=True,
                          text=True, check=True)
    assert "--json" in done.stdout
    assert "--config" in done.stdout


def test_the_status_of_no_knowledge_base_is_one_line_and_exit_1_on_the_quick_path(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kbsync", "status", "--json", "-c",
                           str(tmp_path / "none")], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["type"] == "ConfigError"
    assert json.loads(done.stdout)["error"]["message"].startswith("no knowledge base")
    assert done.stderr == ""  # one error, once: stdout is not a terminal


def test_status_as_json_says_what_the_knowledge_base_says(synced: Path) -> None:
    printed, _ = _loaded(["status", "--json", "-c", str(synced)])
    with KnowledgeBase.open(synced) as kb:
        assert json.loads(printed) == json.loads(json.dumps(kb.status().to_dict(), default=str))


def test_each_command_is_registered_by_the_module_the_table_names() -> None:
    from typer.main import get_command

    group = get_command(app)
    assert set(group.commands) == set(COMMAND_MODULES)  # type: ignore[attr-defined]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        callback = command.callback or next(iter(command.commands.values())).callback
        assert callback.__module__ == f"kbsync.cli.{COMMAND_MODULES[name]}", name
    assert set(COMMAND_MODULES.values()) == set(MODULES)


def test_a_command_named_after_an_option_still_finds_every_command(synced: Path) -> None:
    printed, modules = _loaded(["--debug", "status", "-c", str(synced)])
    assert "store:      3 documents" in printed
    assert "kbsync.cli.sync_commands" in modules  # the table is not guessed past an option
