"""The Python API: KnowledgeBase and its typed, frozen results, on real files and SQLite."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

import kbsync
from kbsync import KnowledgeBase
from kbsync.engine import load_config, writer_lock
from kbsync.errors import ConfigError, KbsyncError, LockedError, ParameterError
from tests.conftest import CORPUS


@pytest.fixture
def home(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:5]:
        shutil.copy(path, docs / path.name)
    return tmp_path


def test_create_writes_a_configuration_that_open_reads_back(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"], embedder={"kind": "hashing",
                              "dimension": 256}, store="state/kb.db") as kb:
        assert kb.status().sources == ("docs",)
    config = load_config(home)
    assert config.embedder.table == {"kind": "hashing", "dimension": 256}
    assert Path(config.store_location) == (home / "state" / "kb.db").resolve()
    with KnowledgeBase.open(config) as kb, KnowledgeBase.open(home / "kbsync.toml") as again:
        assert kb.status().embedder.endswith(":256")
        assert again.config == kb.config
    with pytest.raises(ConfigError, match="already configured"):
        KnowledgeBase.create(home)


def test_reading_a_knowledge_base_that_never_synced_writes_nothing(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        planned = kb.plan()
        assert planned.dry_run
        assert planned.total("new") == 5
        assert kb.search("retries") == []
        assert kb.status().documents == 0
        assert kb.verify().ok
        assert kb.documents() == ()
    assert not (home / ".kbsync").exists()


def test_a_sync_result_is_frozen_and_is_the_report_the_store_keeps(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        result = kb.sync()
        assert not result.failed
        assert result.total("new") == 5
        assert result.sources[0].documents["deleted"] == 0  # absent counts read 0
        assert {c.action for c in result.sources[0].changes} == {"new"}
        stored = kb.status()
        assert stored.last_run is not None
        assert stored.last_run.documents["new"] == 5
        kept = kb.store.status().last_run
        assert json.loads(json.dumps(result.to_dict())) == kept
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.dry_run = True  # type: ignore[misc]
        assert kb.sync().total("unchanged") == 5


def test_search_ranks_by_mode_and_returns_context_windows(synced_corpus: Path) -> None:
    with KnowledgeBase.open(synced_corpus) as kb:
        for mode in ("vector", "text", "hybrid"):
            hits = kb.search("retry backoff jitter", k=4, mode=mode, context_tokens=0)
            assert len(hits) == 4, mode
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            assert all(h.context == h.text and h.first == h.index == h.last for h in hits)
        windows = kb.search("retry backoff jitter", k=3, context_tokens=400)
        assert all(w.first <= w.index <= w.last for w in windows)
        assert any(w.context_tokens > 0 for w in windows)
        with pytest.raises(ParameterError, match="unknown search mode"):
            kb.search("x", mode="fuzzy")  # type: ignore[arg-type]
        with pytest.raises(ParameterError, match="k must be"):
            kb.search("x", k=0)


def test_diff_reports_the_edit_as_regions_of_the_current_text(home: Path) -> None:
    page = sorted((home / "docs").iterdir())[0]
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        page.write_text(page.read_text() + "\n\nA closing note about tide tables.\n")
        assert kb.sync().total("modified") == 1
        change = kb.diff(page.name)
        assert not change.first_version
        assert change.previous is not None
        assert change.verdict is not None
        assert change.similarity is not None
        assert 0.5 < change.similarity < 1.0
        # Words added: substantive, whatever the similarity.
        assert (str(change.verdict), str(change.kind), change.reason) == \
            ("reprocess", "substantive", "6 words added")
        assert [r.text for r in change.regions] == ["A closing note about tide tables."]
        assert all(r.text == change.text[r.offset : r.offset + r.length] for r in change.regions)
        assert change.to_dict()["regions"][0]["text"] == change.regions[0].text
        with pytest.raises(KbsyncError, match="no such document"):
            kb.diff("missing.md")


def test_the_diff_of_a_document_seen_once_says_there_is_no_previous_version(
    home: Path,
) -> None:
    page = sorted((home / "docs").iterdir())[0]
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        first = kb.diff(page.name)
    assert first.first_version
    assert (first.previous, first.verdict, first.similarity, first.change) == (None,) * 4
    assert first.regions == ()
    assert first.text
    data = first.to_dict()
    assert data["first_version"] is True
    assert (data["verdict"], data["similarity"], data["regions"]) == (None, None, [])


def test_the_diff_of_a_deleted_document_names_the_sync_that_deleted_it(home: Path) -> None:
    page = sorted((home / "docs").iterdir())[0]
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        page.unlink()
        kb.sync()
        with pytest.raises(KbsyncError, match=rf"{re.escape(page.name)}: deleted by sync #2 "
                                              r"\(finished .+\); its text is no longer stored"):
            kb.diff(page.name)
        with pytest.raises(KbsyncError, match="no such document in the knowledge base"):
            kb.diff("never-there.md")


def test_the_diff_of_a_moved_document_by_its_old_key_names_its_new_key(home: Path) -> None:
    page = sorted((home / "docs").iterdir())[0]
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        (home / "docs" / "sub").mkdir()
        page.rename(home / "docs" / "sub" / page.name)
        assert kb.sync().sources[0].documents["moved"] == 1
        with pytest.raises(KbsyncError, match=rf"{re.escape(page.name)}: moved to "
                                              rf"'sub/{re.escape(page.name)}' by sync #2 "):
            kb.diff(page.name)
        assert kb.diff(f"sub/{page.name}").text


def test_a_key_given_with_the_source_folder_in_front_is_answered_with_the_key_inside_it(
    home: Path,
) -> None:
    page = sorted((home / "docs").iterdir())[0]
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        with pytest.raises(KbsyncError, match=rf"keys are paths inside a source: did you mean "
                                              rf"'{re.escape(page.name)}'\?"):
            kb.diff(f"docs/{page.name}")


def test_a_report_counts_every_action_and_a_plan_is_not_recorded(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        (home / "docs" / "extra.md").write_text("# Extra\n\nA page about tide tables.\n")
        result = kb.sync()
        assert kb.store.status().last_run == json.loads(json.dumps(result.to_dict()))
        data = result.to_dict()
        assert data["documents"] == {"new": 6, "modified": 0, "rechunked": 0,
                                     "metadata-only": 0, "moved": 0, "deleted": 0,
                                     "held": 0, "unchanged": 0, "failed": 0}
        assert [c["key"] for c in data["sources"][0]["changes"]] == sorted(
            p.name for p in (home / "docs").iterdir())
        planned = kb.plan()
        assert planned.dry_run
        assert planned.to_dict()["dry_run"] is True
        assert kb.store.status().runs == 1  # a plan is not recorded


def test_documents_come_in_pages_that_resume_after_the_last_one(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        everything = kb.documents()
        assert list(everything) == sorted(everything)
        pages: list[kbsync.DocumentRef] = []
        after = None
        while page := kb.documents(after=after, limit=2):
            assert len(page) <= 2
            pages.extend(page)
            after = page[-1]
        assert tuple(pages) == everything
        assert kb.documents(after=everything[1], limit=100) == everything[2:]
        with pytest.raises(ParameterError, match="limit"):
            kb.documents(limit=0)


def test_documents_erase_and_gc_return_what_they_did(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        keys = [d.key for d in kb.documents()]
        assert keys == sorted(p.name for p in (home / "docs").iterdir())
        assert kb.document(keys[0]).text
        erased = kb.erase(keys[0])
        assert erased.documents == (kbsync.DocumentRef("docs", keys[0]),)
        assert keys[0] not in [d.key for d in kb.documents()]
        assert isinstance(kb.gc().removed, dict)
        assert kb.verify().problems == ()


def test_a_writer_waits_for_the_lock_or_fails_fast(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        with writer_lock(kb.config), pytest.raises(LockedError):
            kb.sync(wait=False)
        assert kb.sync().total("new") == 5  # released: the lock is held per write


def test_closing_releases_the_store(home: Path) -> None:
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
    with pytest.raises(Exception, match="closed"):
        kb.status()


def test_a_passage_repeated_in_a_document_is_one_hit_not_k_copies(home: Path) -> None:
    (home / "docs" / "chant.md").write_text("Harbour bells ring at noon. " * 400,
                                            encoding="utf-8")
    with KnowledgeBase.create(home, sources=["docs"]) as kb:
        kb.sync()
        for mode in ("text", "vector", "hybrid"):
            hits = kb.search("harbour bells ring", k=4, mode=mode, context_tokens=0)
            pairs = [(h.key, h.text) for h in hits]
            assert len(pairs) == len(set(pairs)), mode
            assert hits[0].key == "chant.md", mode
            # The hashing embedder, as full text, finds only chunks holding a word of the
            # query; the chant's copies of its passage are one hit, another chunk the next.
            assert len(hits) == len({h.text for h in hits}) >= 2, mode
