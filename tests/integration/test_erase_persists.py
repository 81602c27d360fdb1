"""An erasure is remembered: the next sync does not bring the erased documents back
(DESIGN.md §5), in a single process and with parallel workers, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.errors import KbsyncError
from tests.conftest import Backend

runner = CliRunner()


def _kb(root: Path, backend: Backend) -> Path:
    docs = root / "docs"
    (docs / "private").mkdir(parents=True)
    for n in range(4):
        (docs / f"note{n}.md").write_text(f"# Note {n}\n\nA note about tides, number {n}.\n")
    for n in range(2):
        (docs / "private" / f"secret{n}.md").write_text(f"# Secret {n}\n\nNot for search.\n")
    KnowledgeBase.create(root, ["docs"]).close()
    backend.configure(root)
    return root


def _keys(kb: KnowledgeBase) -> list[str]:
    return sorted(d.key for d in kb.documents())


@pytest.fixture
def pg(postgres_url: str) -> Iterator[Backend]:
    found = Backend("postgres", postgres_url)
    yield found
    found.drop()


def test_erased_documents_do_not_come_back_at_the_next_sync(
        tmp_path: Path, backend: Backend) -> None:
    _erased_stay_away(tmp_path, backend, workers=0)


def test_erased_documents_do_not_come_back_with_parallel_workers(
        tmp_path: Path, pg: Backend) -> None:
    _erased_stay_away(tmp_path, pg, workers=1)


def _erased_stay_away(tmp_path: Path, backend: Backend, workers: int) -> None:
    with KnowledgeBase.open(_kb(tmp_path, backend)) as kb:
        assert kb.sync(workers=workers).total("new") == 6
        erased = kb.erase("private/*")
        assert sorted(d.key for d in erased.documents) == ["private/secret0.md",
                                                           "private/secret1.md"]
        assert [e.pattern for e in kb.erasures()] == ["private/*"]
        again = kb.sync(workers=workers)
        assert again.total("new") == 0
        assert not again.failed
        assert again.sources[0].skipped_erased == 2
        assert again.sources[0].to_dict()["skipped_erased"] == 2
        assert _keys(kb) == [f"note{n}.md" for n in range(4)]
        assert not kb.search("secret", mode="text")
        # A file added later under the pattern is skipped as well.
        (tmp_path / "docs" / "private" / "secret2.md").write_text("# Secret 2\n\nAlso not.\n")
        assert kb.sync(workers=workers).sources[0].skipped_erased == 3
        assert kb.verify().ok


def test_undoing_an_erasure_lets_the_next_sync_index_the_documents_again(
        tmp_path: Path, backend: Backend) -> None:
    _undo(tmp_path, backend, workers=0)


def test_undoing_an_erasure_works_with_parallel_workers(tmp_path: Path, pg: Backend) -> None:
    _undo(tmp_path, pg, workers=1)


def _undo(tmp_path: Path, backend: Backend, workers: int) -> None:
    with KnowledgeBase.open(_kb(tmp_path, backend)) as kb:
        kb.sync(workers=workers)
        kb.erase("note1.md")
        assert kb.sync(workers=workers).total("new") == 0
        assert kb.unerase("note1.md").key_hash
        assert kb.erasures() == ()
        report = kb.sync(workers=workers)
        assert report.total("new") == 1
        assert report.sources[0].skipped_erased == 0
        assert "note1.md" in _keys(kb)
        with pytest.raises(KbsyncError, match="no such erasure"):
            kb.unerase("note1.md")


def test_a_pattern_that_matches_no_document_is_refused_and_not_remembered(
        tmp_path: Path) -> None:
    root = _kb(tmp_path, Backend("sqlite"))
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        for typo in ("docs/note1.md", "nomatch*"):
            with pytest.raises(KbsyncError, match="no document matches"):
                kb.erase(typo)
        assert kb.erasures() == ()
        assert len(_keys(kb)) == 6
    code, out = _run("erase", "notes*", "-c", str(root))
    assert code == 1
    assert "nothing was erased or remembered" in out


def test_a_plan_counts_erased_documents_as_skipped(tmp_path: Path) -> None:
    with KnowledgeBase.open(_kb(tmp_path, Backend("sqlite"))) as kb:
        kb.sync()
        kb.erase("note0.md")
        planned = kb.plan()
        assert planned.total("new") == 0
        assert planned.sources[0].skipped_erased == 1


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_erase_list_and_undo_on_the_command_line(tmp_path: Path) -> None:
    c = str(_kb(tmp_path, Backend("sqlite")))
    assert _run("sync", "-c", c)[0] == 0
    code, out = _run("erase", "private/*", "-c", c)
    assert code == 0
    assert "erased 2 document(s)" in out
    code, out = _run("sync", "-c", c, "--json")
    assert code == 0
    assert json.loads(out)["documents"]["new"] == 0
    code, out = _run("sync", "-c", c)
    assert "2 erased, skipped" in out
    code, out = _run("erase", "--list", "-c", c, "--json")
    assert code == 0
    assert [e["pattern"] for e in json.loads(out)["erasures"]] == ["private/*"]
    assert "private/*" in _run("erase", "--list", "-c", c)[1]
    assert _run("erase", "--undo", "private/*", "-c", c)[0] == 0
    assert "no erasures" in _run("erase", "--list", "-c", c)[1]
    code, out = _run("sync", "-c", c, "--json")
    assert json.loads(out)["documents"]["new"] == 2
    assert _run("erase", "--undo", "private/*", "-c", c)[0] == 1
    assert _run("erase", "-c", c)[0] == 2
    assert _run("erase", "--list", "x", "-c", c)[0] == 2


def test_an_erased_exact_key_is_remembered_by_its_hash_only(tmp_path: Path) -> None:
    root = _kb(tmp_path, Backend("sqlite"))
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        kb.erase("note2.md")
        (erasure,) = kb.erasures()
        assert erasure.key_hash
        assert erasure.pattern.startswith("blake2b:")
        assert "note2" not in erasure.pattern
        assert kb.sync().sources[0].skipped_erased == 1
        kb.store.close()
        for path in (root / ".kbsync").iterdir():
            if path.is_file():
                assert b"note2.md" not in path.read_bytes(), path.name
    with KnowledgeBase.open(root) as kb:
        kb.unerase(erasure.pattern)  # the form --list shows works as well as the key
        assert kb.sync().total("new") == 1
