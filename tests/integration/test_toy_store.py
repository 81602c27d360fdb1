"""A new store kind is one folder and one registry line: the toy store of ``tests/toy_store``,
built on the SQL core over a dialect of its own, synced, searched and verified through a
knowledge base like the stores kbsync ships."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store.kinds import STORE_KINDS
from kbsync.store.sql.schema import create_statements
from kbsync.store.sqlite import SqliteStore
from tests.toy_store import ToyKind, ToyStore


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STORE_KINDS, "toy", ToyKind())  # the one line that registers it


def _columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'chunk_fts%'")]
    return {t: sorted(r[1] for r in db.execute(f"PRAGMA table_info({t})")) for t in tables}


def test_a_toy_store_kind_syncs_searches_edits_and_verifies_through_a_knowledge_base(
    tmp_path: Path, toy: None,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lighthouse.md").write_text("# Lighthouse\n\nThe keeper climbs the stairs at "
                                        "dusk and lights the lamp for the ships.\n")
    (docs / "orchard.txt").write_text("Apples ripen in the orchard when the nights turn "
                                      "cold and the bees are gone.\n")
    (docs / "harbour.txt").write_text("Fishing boats leave the harbour before dawn.\n")
    init_config(tmp_path, ["docs"])
    config = tmp_path / "kbsync.toml"
    config.write_text(re.sub(r"\[store\]\npath = [^\n]*\n", '[store]\nkind = "toy"\n',
                             config.read_text()))
    with KnowledgeBase.open(tmp_path) as kb:
        assert isinstance(kb.store, ToyStore)
        first = kb.sync()
        assert sum(s.documents_applied for s in first.sources) == 3
        before = kb.store.total_changes
        second = kb.sync()
        assert sum(s.documents_applied for s in second.sources) == 0
        assert kb.store.total_changes - before == 1  # its run row
        (docs / "orchard.txt").write_text("Pears ripen in the orchard when the nights turn "
                                          "cold and the bees are gone.\n")
        third = kb.sync()
        assert third.sources[0].documents["modified"] == 1
        hits = kb.search("pears in the orchard", k=2)
        assert hits[0].key == "orchard.txt"
        assert "Pears" in hits[0].text
        assert kb.diff("orchard.txt").previous is not None
        assert kb.verify().problems == ()
    assert (tmp_path / ".kbsync" / "toy.db").exists()


def test_the_core_schema_has_the_tables_and_columns_of_the_sqlite_store(
    tmp_path: Path,
) -> None:
    SqliteStore(tmp_path / "kb.db").close()
    migrated = sqlite3.connect(tmp_path / "kb.db")
    fresh = sqlite3.connect(":memory:")
    for statement in create_statements():
        fresh.execute(statement)
    assert _columns(fresh) == _columns(migrated)
