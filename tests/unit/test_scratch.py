"""A sync's scratch database: nothing left behind, no sorting outside it, the core's answers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import (
    ChunkDraft,
    DocumentVersion,
    Failed,
    StoredDocument,
    Unchanged,
)
from kbsync.model import ItemError, SourceItem, SourceStat, Validators
from kbsync.sync.observe import stat_gate_passes, unchanged_observation
from kbsync.sync.scratch import Scratch


def _stored(key: str, text: str = "t") -> StoredDocument:
    return StoredDocument(key=key, stat=SourceStat(1, 1, 1), bytes_hash="b", text_hash=text,
                          derivation="d", title=None, metadata="{}", generation=1,
                          chunk_digests=())


def _version(key: str, digests: list[str], text: str = "t") -> DocumentVersion:
    chunks = tuple(ChunkDraft(d, d, 0, None, 0, 1, 1, "end", embedding_text_key(d))
                   for d in digests)
    return DocumentVersion(key=key, locator=key, media_type="text/plain", stat=None,
                           bytes_hash="b", text_hash=text, derivation="d", title=None,
                           metadata="{}", text="x", chunks=chunks)


def _exercise(scratch: Scratch) -> None:
    """Every kind of statement a sync makes, on a few rows."""
    scratch.add_listed([(SourceItem("b", "b", "text/plain"), "d"),
                        (ItemError("c", "cannot be read"), ""),
                        (SourceItem("c", "c", "text/plain"), "d")])
    scratch.add_stored([_stored("a", "moved"), _stored("b"), _stored("z")])
    scratch.unchanged()
    list(scratch.listing())
    list(scratch.listing(skip_unchanged=False))
    scratch.vanish()
    scratch.observe(_version("b", ["d1", "d2"]), _stored("b"))
    scratch.observe(_version("c", ["d2", "d3"], "moved"), None)
    list(scratch.replaced())
    list(scratch.added())
    scratch.members()
    scratch.recurring()
    scratch.decide_moves()
    list(scratch.moves())
    list(scratch.batches(1, 10**6))
    scratch.moved(scratch.origins(["moved|d"]))
    list(scratch.gone(1))
    scratch.listed_count(), scratch.stored_count(), scratch.gone_count()


def test_no_scratch_query_sorts_in_a_temporary_file_of_its_own(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        statements: list[str] = []
        scratch._db.set_trace_callback(statements.append)
        _exercise(scratch)
        scratch._db.set_trace_callback(None)
        plans = {}
        for sql in {s for s in statements if not s.startswith(("BEGIN", "PRAGMA"))}:
            rows = scratch._db.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
            plans[sql] = " | ".join(str(r[-1]) for r in rows)
    assert len(plans) >= 12
    sorting = {sql: p for sql, p in plans.items() if "TEMP B-TREE" in p}
    assert sorting == {}


def test_the_scratch_file_leaves_nothing_in_its_folder_while_open_or_after(
        tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        _exercise(scratch)
        assert list(tmp_path.iterdir()) == []
    assert list(tmp_path.iterdir()) == []


def test_an_item_wins_over_an_error_with_the_same_key_in_either_order(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        scratch.add_listed([(SourceItem("a", "a", "text/plain"), "d"), (ItemError("a", "no"), ""),
                            (ItemError("b", "no"), "")])
        scratch.add_listed([(SourceItem("b", "b", "text/plain"), "d")])
        assert [e for e, _ in scratch.listing()] == [SourceItem("a", "a", "text/plain"),
                                                    SourceItem("b", "b", "text/plain")]


def test_observations_come_back_in_key_order_in_bounded_batches(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        for key in ("k3", "k1", "k2", "k0", "k4"):
            scratch.observe(Failed(key, "x"), None)
        batches = list(scratch.batches(2, 10**6))
    assert [[w.observation.key for w in b] for b in batches] == [["k0", "k1"], ["k2", "k3"], ["k4"]]


def test_batches_grow_from_the_first_size_by_doubling_up_to_the_limit(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        for n in range(40):
            scratch.observe(Failed(f"k{n:02}", "x"), None)
        sizes = [len(b) for b in scratch.batches(8, 10**6, first=1)]
    assert sizes == [1, 2, 4, 8, 8, 8, 8, 1]


def test_a_moved_origin_is_offered_no_more_and_not_deleted(tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        scratch.add_stored([_stored("old1", "same"), _stored("old2", "same"), _stored("x")])
        scratch.add_listed([(SourceItem("x", "x", "text/plain"), "d")])
        assert scratch.vanish() == 2
        offered = scratch.origins(["same|d"])
        assert [d.key for d in offered] == ["old1", "old2"]
        scratch.moved(offered[:1])
        assert [d.key for d in scratch.origins(["same|d"])] == ["old2"]
        assert [[d.key for d in page] for page in scratch.gone(10)] == [["old2"]]


def test_new_documents_take_origins_in_key_order_by_text_then_by_the_name_a_source_gives(
        tmp_path: Path) -> None:
    with Scratch(tmp_path) as scratch:
        scratch.add_stored([_stored("old1", "same"), _stored("old2", "same"),
                            _stored("named", "other"), _stored("x")])
        scratch.add_listed([(SourceItem(k, k, "text/plain"), "d")
                            for k in ("x", "new1", "new2", "new3", "new4")])
        scratch.vanish()
        scratch.observe(_version("new2", ["d"], "same"), None)
        scratch.observe(_version("new1", ["d"], "same"), None)
        scratch.observe(_version("new3", ["d"], "same"), None)
        scratch.observe(dataclasses.replace(_version("new4", ["e"], "edited"),
                                            renamed_from="named"), None)
        assert scratch.decide_moves() == 3
        assert list(scratch.moves()) == [("new1", "old1"), ("new2", "old2"),
                                         ("new4", "named")]
        assert scratch.gone_count() == 0
        assert [w.origin.key if w.origin else None for b in scratch.batches(10, 10**6)
                for w in b] == ["old1", "old2", None, "named"]


_STATS = st.sampled_from([None, SourceStat(1, 1, 1), SourceStat(1, 2, 1), SourceStat(2, 1, 1),
                          SourceStat(1, 1, 3), SourceStat(1, 1, 1, racy=True)])
_VALIDATORS = st.sampled_from([None, Validators(None, None), Validators("e1", None),
                               Validators("e2", "Mon"), Validators(None, "Mon")])


@settings(max_examples=300, deadline=None)
@given(item_stat=_STATS, old_stat=_STATS, item_v=_VALIDATORS, old_v=_VALIDATORS,
       not_modified=st.booleans(), same_derivation=st.booleans(), missing=st.integers(0, 2),
       stored=st.booleans(), listed_item=st.booleans())
def test_the_stat_gate_in_sql_decides_as_the_python_gate(
        tmp_path_factory: pytest.TempPathFactory, item_stat: SourceStat | None,
        old_stat: SourceStat | None, item_v: Validators | None, old_v: Validators | None,
        not_modified: bool, same_derivation: bool, missing: int, stored: bool,
        listed_item: bool) -> None:
    item = SourceItem("k", "loc", "text/plain", item_stat, item_v, not_modified)
    # The store keeps no validators as both columns empty: it reads them back as None.
    if old_v == Validators(None, None):
        old_v = None
    old = dataclasses.replace(_stored("k"), stat=old_stat, validators=old_v, missing=missing)
    derivation = "d" if same_derivation else "other"
    python = listed_item and stored and stat_gate_passes(item, old, derivation) \
        and isinstance(unchanged_observation(item, old), Unchanged)
    with Scratch(tmp_path_factory.mktemp("gate")) as scratch:
        scratch.add_listed([(item if listed_item else ItemError("k", "no"), derivation)])
        if stored:
            scratch.add_stored([old])
        assert scratch.unchanged()[0] == int(python)
        rest = [e for e, _ in scratch.listing()]
        assert rest == ([] if python else [item if listed_item else ItemError("k", "no")])
        [(_, back)] = list(scratch.listing(skip_unchanged=False))
        assert back == (old if stored else None)


def test_a_racy_stat_on_either_side_passes_neither_gate(tmp_path: Path) -> None:
    trusted, racy = SourceStat(5, 7_000_000_000, 9), SourceStat(5, 7_000_000_000, 9, racy=True)
    for listed, recorded, passes in ((trusted, trusted, True), (racy, trusted, False),
                                     (trusted, racy, False), (racy, racy, False)):
        item = SourceItem("k", "k", "text/plain", listed)
        old = dataclasses.replace(_stored("k"), stat=recorded)
        assert stat_gate_passes(item, old, "d") is passes
        with Scratch(tmp_path) as scratch:
            scratch.add_listed([(item, "d")])
            scratch.add_stored([old])
            assert scratch.unchanged()[0] == int(passes)
            [(back_item, back_old)] = list(scratch.listing(skip_unchanged=False))
            assert (back_item, back_old) == (item, old)  # the racy marks survive the file
