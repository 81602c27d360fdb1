"""Full-text search on each kind of store: word forms match, and headings weigh more."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store.sqlite.schema import MIGRATIONS as _MIGRATIONS
from tests.conftest import Backend

# The schema version just before the migration that made full text stem words.
_BEFORE_STEMMING = next(i for i, step in enumerate(_MIGRATIONS) if "porter" in step)

# Each page mentions "retry" once in its body; only one is about it, as its heading says.
PAGES = {
    "about-retry.md": "# Retry\n\nA failed task runs again after a delay that grows each time.\n",
    **{f"other-{n}.md": f"# Topic {n}\n\nThis page covers topic {n} at length, and says "
                         f"in passing that a retry can happen.\n" for n in range(4)},
}


@pytest.fixture
def kb(tmp_path: Path, backend: Backend) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    init_config(tmp_path, ["docs"])
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as kb:
        assert not kb.sync().failed
    return tmp_path


def test_a_plural_in_the_query_finds_the_singular_in_the_text(kb: Path) -> None:
    with KnowledgeBase.open(kb) as engine:
        found = {hit.key for hit in engine.search("retries", k=10, mode="text")}
    assert found == set(PAGES)


def test_a_word_of_the_heading_ranks_its_section_first(kb: Path) -> None:
    with KnowledgeBase.open(kb) as engine:
        hits = engine.search("how do retries work", k=5, mode="text", context_tokens=0)
    assert hits[0].key == "about-retry.md", [(h.key, h.score) for h in hits]


def test_a_store_indexed_before_stemming_is_reindexed_when_opened(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(PAGES["about-retry.md"])
    init_config(tmp_path, ["docs"])
    with KnowledgeBase.open(tmp_path) as kb:
        assert not kb.sync().failed
    # Put back the full-text table of the schema before stemming (no heading column),
    # and the one texts table of that schema.
    db = sqlite3.connect(tmp_path / ".kbsync" / "kbsync.db")
    db.executescript(
        "DROP TABLE chunk_fts; CREATE VIRTUAL TABLE chunk_fts USING fts5 (text, "
        "tokenize = 'unicode61'); INSERT INTO chunk_fts (rowid, text) SELECT c.id, t.text "
        "FROM chunks c JOIN chunk_texts t ON t.digest = c.digest; "
        "CREATE TABLE texts (doc_id INTEGER PRIMARY KEY REFERENCES documents(id) "
        "ON DELETE CASCADE, text TEXT NOT NULL, previous TEXT); "
        "INSERT INTO texts (doc_id, text) SELECT doc_id, text FROM versions; "
        "DROP TABLE versions; "
        f"PRAGMA user_version = {_BEFORE_STEMMING};")
    db.close()
    with KnowledgeBase.open(tmp_path) as kb:
        assert [h.key for h in kb.search("retries", mode="text")] == ["a.md"]
        assert kb.verify().problems == ()


# Two pages mention "backoff" in the body of a section whose heading does not; only one
# is about it, as its title says. The other's section is shorter, which bm25 favours.
_DELAYS = ("Each attempt waits longer than the one before it, and the wait stops growing at "
           "a ceiling that the operator chooses for the service at hand. ") * 4
TITLED = {
    "retries.md": f"# Retries and backoff\n\n## Delays\n\n{_DELAYS}\n\n## Ceilings\n\n"
                  "The backoff doubles each time, up to a ceiling that keeps a storm of "
                  "attempts from swamping a service that is down.\n",
    "workers.md": "# Workers\n\n## Pools\n\nA pool has a backoff.\n",
}


def _titled(folder: Path, backend: Backend | None = None) -> Path:
    docs = folder / "docs"
    docs.mkdir()
    for name, text in TITLED.items():
        (docs / name).write_text(text)
    init_config(folder, ["docs"])
    if backend is not None:
        backend.configure(folder)
    with KnowledgeBase.open(folder) as kb:
        assert not kb.sync().failed
    return folder


@pytest.fixture
def titled(tmp_path: Path, backend: Backend) -> Path:
    return _titled(tmp_path, backend)


def _text_hits(folder: Path, query: str) -> list[str]:
    with KnowledgeBase.open(folder) as kb:
        return [h.key for h in kb.search(query, k=5, mode="text", context_tokens=0)]


def test_a_word_of_the_page_title_ranks_the_page_s_sections_first(titled: Path) -> None:
    assert _text_hits(titled, "backoff")[0] == "retries.md"


def test_a_new_title_alone_reranks_the_page_after_the_next_sync(tmp_path: Path) -> None:
    # SQLite keeps a copy of the title in its full-text table (PostgreSQL reads it at
    # query time, and ranks without length normalization, so there is nothing to see).
    titled = _titled(tmp_path)
    page = titled / "docs" / "workers.md"
    for title, first in (("Backoff in pools", "workers.md"), ("Pools", "retries.md")):
        page.write_text(f"---\ntitle: {title}\n---\n" + TITLED["workers.md"])
        with KnowledgeBase.open(titled) as kb:
            assert not kb.sync().failed
        assert _text_hits(titled, "backoff")[0] == first, title


def test_a_store_indexed_before_titles_is_reindexed_when_opened(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "retries.md").write_text(f"# Retries\n\n## Delays\n\n{_DELAYS}\n\n"
                                     f"## Ceilings\n\n{_DELAYS}\n")
    init_config(tmp_path, ["docs"])
    with KnowledgeBase.open(tmp_path) as kb:
        assert not kb.sync().failed
    before_titles = next(i for i, step in enumerate(_MIGRATIONS) if "d.title" in step)
    db = sqlite3.connect(tmp_path / ".kbsync" / "kbsync.db")
    db.executescript(
        "DROP TABLE chunk_fts; CREATE VIRTUAL TABLE chunk_fts USING fts5 (text, heading, "
        "tokenize = 'porter unicode61'); INSERT INTO chunk_fts (rowid, text, heading) "
        "SELECT c.id, t.text, coalesce(c.heading, '') FROM chunks c "
        "JOIN chunk_texts t ON t.digest = c.digest; "
        f"PRAGMA user_version = {before_titles};")
    found = [r[0] for r in db.execute(
        "SELECT c.heading FROM chunk_fts f JOIN chunks c ON c.id = f.rowid "
        "WHERE chunk_fts MATCH 'retries'")]
    db.close()
    assert "Ceilings" not in found  # only the title says "retries"
    with KnowledgeBase.open(tmp_path) as kb:
        hits = kb.search("retries", k=10, mode="text", context_tokens=0)
        assert "Ceilings" in {h.heading for h in hits}
        assert kb.verify().problems == ()
