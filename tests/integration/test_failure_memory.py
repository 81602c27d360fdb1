"""A file that cannot be extracted is remembered with its stat: not read again until it
changes, reported as still failing, and no new problem for the exit code."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.sync.failures import failures_meta_name
from tests.conftest import CORPUS
from tests.office_files import docx_bytes, pptx_bytes

runner = CliRunner()

_HOUR_AGO = time.time() - 3600


def _broken(path: Path, whole: bytes, size: int = 3800) -> None:
    """Write the first ``size`` bytes of an office file: a zip without its directory."""
    path.write_bytes(whole[:size])
    os.utime(path, (_HOUR_AGO, _HOUR_AGO))  # well before any listing: a trusted stat


@pytest.fixture
def home(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:2]:
        shutil.copy(path, docs / path.name)
        os.utime(docs / path.name, (_HOUR_AGO, _HOUR_AGO))  # settled: a trusted stat
    _broken(docs / "deck.pptx", pptx_bytes())
    KnowledgeBase.create(tmp_path, sources=["docs"]).close()
    return tmp_path


def test_an_unchanged_broken_file_is_not_read_again(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        first = kb.sync().sources[0]
        assert [key for key, _ in first.failures] == ["deck.pptx"]
        assert first.still_failing == ()
        again = kb.sync()
        source = again.sources[0]
        assert source.bytes_read == 0
        assert source.failures == ()
        assert source.still_failing == first.failures
        assert not again.failed
        assert again.still_failing == 1
        assert kb.plan().sources[0].still_failing == first.failures  # a plan says so too


@pytest.mark.parametrize(("name", "whole"), [("deck.pptx", pptx_bytes),
                                             ("notes.docx", docx_bytes)])
def test_a_broken_file_that_changes_is_read_again(tmp_path: Path, name: str,
                                                  whole: Callable[[], bytes]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _broken(docs / name, whole())
    with KnowledgeBase.create(tmp_path, sources=["docs"]) as kb:
        assert kb.sync().total("failed") == 1
        (docs / name).write_bytes(whole())  # mended
        mended = kb.sync()
        assert mended.total("new") == 1
        assert mended.sources[0].still_failing == ()
        # Nothing is remembered of a file that was read well.
        assert kb.store.get_meta(failures_meta_name("docs")) == "{}"


def test_a_broken_file_that_changes_and_still_fails_is_a_new_failure(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        _broken(home / "docs" / "deck.pptx", pptx_bytes(), size=3900)
        again = kb.sync().sources[0]
        assert again.bytes_read > 0
        assert [key for key, _ in again.failures] == ["deck.pptx"]
        assert again.still_failing == ()


def test_verify_reads_a_remembered_failure_again(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        verified = kb.sync(verify=True)
        assert verified.sources[0].bytes_read > 0
        # Read again and failing as it did: still failing, not a new problem.
        assert [key for key, _ in verified.sources[0].still_failing] == ["deck.pptx"]
        assert not verified.failed


def test_a_racy_stat_does_not_let_a_failure_be_skipped(home: Path) -> None:
    deck = home / "docs" / "deck.pptx"
    now = time.time()
    os.utime(deck, (now, now))  # as new as the listing: the file may change unseen
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        again = kb.sync().sources[0]
        assert again.bytes_read == deck.stat().st_size  # read again, stat alone untrusted
        assert [key for key, _ in again.still_failing] == ["deck.pptx"]
        assert again.failures == ()


def test_a_vanished_broken_file_is_forgotten(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        assert "deck.pptx" in (kb.store.get_meta(failures_meta_name("docs")) or "")
        (home / "docs" / "deck.pptx").unlink()
        assert kb.sync().sources[0].still_failing == ()
        assert kb.store.get_meta(failures_meta_name("docs")) == "{}"


def test_the_exit_code_tells_new_problems_from_old_ones(home: Path) -> None:
    first = runner.invoke(app, ["sync", "-c", str(home)])
    assert first.exit_code == 4
    assert "deck.pptx" in first.output
    second = runner.invoke(app, ["sync", "-c", str(home)])
    assert second.exit_code == 0, second.output
    assert second.stdout.strip().count("\n") == 0  # one line
    assert "1 still failing as before, not read: deck.pptx" in second.stdout
    strict = runner.invoke(app, ["sync", "-c", str(home), "--fail-on", "any", "-q"])
    assert strict.exit_code == 4
    assert strict.stdout == ""
    assert "deck.pptx: still failing" in strict.stderr
    quiet = runner.invoke(app, ["sync", "-c", str(home), "-q"])
    assert (quiet.exit_code, quiet.output) == (0, "")


def test_status_lists_the_documents_still_failing_after_a_sync_that_did_not_read_them(
        home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        kb.sync()
        last = kb.status().last_run
    assert last is not None
    assert last.failures == ()
    assert [(s, k) for s, k, _ in last.still_failing] == [("docs", "deck.pptx")]
    shown = runner.invoke(app, ["status", "-c", str(home)])
    assert "still failing: deck.pptx (docs): " in shown.output, shown.output
