from __future__ import annotations

import dataclasses
import pickle

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import (
    Action,
    ChunkDraft,
    DocumentVersion,
    Failed,
    Refreshed,
    StoredDocument,
    Unchanged,
    chunk_ops,
    plan,
)
from kbsync.model import SourceStat

STAT = SourceStat(10, 1, 1)


def _stored(key: str, digests: tuple[str, ...], text_hash: str = "t") -> StoredDocument:
    return StoredDocument(key, STAT, "b", text_hash, "d", None, "{}", 1, digests)


def _version(key: str, digests: tuple[str, ...], text_hash: str = "t2",
             rechunked: bool = True, title: str | None = None,
             renamed_from: str | None = None) -> DocumentVersion:
    chunks = tuple(ChunkDraft(d, d, 0, None, 0, 1, 1, "primary", embedding_text_key(d))
                   for d in digests)
    return DocumentVersion(key, key, "text/plain", STAT, "b2", text_hash, "d", title, "{}", "x",
                           chunks, rechunked, renamed_from=renamed_from)


def test_chunk_ops_count_kept_moved_added_and_deleted_as_multisets() -> None:
    ops = chunk_ops(["a", "b", "c", "c"], ["a", "c", "b", "x"])
    assert (ops.kept, ops.moved, ops.added, ops.deleted) == (1, 2, 1, 1)
    assert ops.added_digests == ("x",)


def test_each_observation_becomes_its_action() -> None:
    stored = {k: _stored(k, ("a",)) for k in ("same", "touched", "edited", "broken", "gone",
                                               "meta", "respelt")}
    observations = [
        Unchanged("same"), Refreshed("touched", STAT), _version("edited", ("a", "n")),
        Failed("broken", "cannot read"), _version("meta", (), rechunked=False, title="New"),
        _version("respelt", (), rechunked=False), _version("fresh", ("f",)),
    ]
    listed = ["same", "touched", "edited", "broken", "meta", "respelt", "fresh"]
    result = plan("s", stored, listed, observations, cached=["f"])
    actions = {d.key: d.action for d in result.documents}
    assert actions == {"same": Action.UNCHANGED, "touched": Action.UNCHANGED,
                       "edited": Action.MODIFIED, "broken": Action.FAILED,
                       "meta": Action.METADATA, "respelt": Action.UNCHANGED,
                       "fresh": Action.NEW, "gone": Action.DELETED}
    assert result.to_embed == ("n",)  # "f" is cached, "a" is kept


def test_a_touch_or_the_same_text_again_is_unchanged_with_its_row_refreshed() -> None:
    stored = {k: _stored(k, ("a",)) for k in ("same", "touched", "respelt", "retitled")}
    observations = [Unchanged("same"), Refreshed("touched", STAT),
                    _version("respelt", (), rechunked=False),
                    _version("retitled", (), rechunked=False, title="A new title")]
    result = plan("s", stored, list(stored), observations)
    docs = {d.key: d for d in result.documents}
    assert [docs[k].action for k in ("same", "touched", "respelt")] == [Action.UNCHANGED] * 3
    assert [docs[k].writes for k in ("same", "touched", "respelt")] == [False, True, True]
    assert docs["retitled"].action is Action.METADATA
    assert docs["retitled"].writes


def test_the_same_text_under_a_new_key_is_a_move_not_a_delete_and_an_add() -> None:
    stored = {"old.md": _stored("old.md", ("a", "b"), text_hash="T")}
    result = plan("s", stored, ["new.md"], [_version("new.md", ("a", "b"), text_hash="T")])
    (doc,) = result.documents
    assert doc.action is Action.MOVED
    assert doc.previous_key == "old.md"
    assert result.to_embed == ()


def test_an_edited_document_the_source_says_was_renamed_is_a_move_with_its_edits() -> None:
    stored = {"old.md": _stored("old.md", ("a", "b", "c"), text_hash="T")}
    edited = _version("new.md", ("a", "b", "n"), text_hash="T2", renamed_from="old.md")
    result = plan("s", stored, ["new.md"], [edited])
    (doc,) = result.documents
    assert (doc.action, doc.previous_key, doc.edited) == (Action.MOVED, "old.md", True)
    assert (doc.ops.kept, doc.ops.added, doc.ops.deleted) == (2, 1, 1)
    assert result.to_embed == ("n",)
    exact = plan("s", stored, ["new.md"], [_version("new.md", ("a", "b", "c"), "T")])
    assert not exact.documents[0].edited


def test_a_rename_hint_is_ignored_unless_its_origin_vanished_and_is_free() -> None:
    stored = {"kept.md": _stored("kept.md", ("a",), text_hash="K"),
              "gone.md": _stored("gone.md", ("g",), text_hash="G")}
    # kept.md is still listed; gone.md's exact text went to copy.md, which sorts first.
    observations = [Unchanged("kept.md"), _version("copy.md", ("g",), text_hash="G"),
                    _version("from-kept.md", ("a", "x"), renamed_from="kept.md"),
                    _version("from-gone.md", ("g", "y"), renamed_from="gone.md"),
                    _version("from-nowhere.md", ("z",), renamed_from="never.md")]
    result = plan("s", stored, [o.key for o in observations], observations)
    actions = {d.key: (d.action, d.previous_key) for d in result.documents}
    assert actions == {"kept.md": (Action.UNCHANGED, None),
                       "copy.md": (Action.MOVED, "gone.md"),
                       "from-kept.md": (Action.NEW, None),
                       "from-gone.md": (Action.NEW, None),
                       "from-nowhere.md": (Action.NEW, None)}


def test_an_exact_copy_is_not_offered_an_origin_a_rename_hint_took() -> None:
    stored = {"a.md": _stored("a.md", ("a",), text_hash="A")}
    observations = [_version("b.md", ("a", "x"), renamed_from="a.md"),
                    _version("c.md", ("a",), text_hash="A")]
    result = plan("s", stored, ["b.md", "c.md"], observations)
    actions = {d.key: (d.action, d.previous_key) for d in result.documents}
    assert actions == {"b.md": (Action.MOVED, "a.md"), "c.md": (Action.NEW, None)}


def test_an_incomplete_listing_deletes_nothing() -> None:
    stored = {"a": _stored("a", ("x",))}
    result = plan("s", stored, [], [], listing_complete=False)
    assert result.documents == ()


def test_mass_deletion_is_blocked_unless_allowed() -> None:
    stored = {k: _stored(k, ("x",)) for k in "abc"}
    blocked = plan("s", stored, ["a"], [Unchanged("a")])
    assert blocked.deletions_blocked
    assert all(d.action is not Action.DELETED for d in blocked.documents)
    allowed = plan("s", stored, ["a"], [Unchanged("a")], allow_mass_delete=True)
    assert sum(d.action is Action.DELETED for d in allowed.documents) == 2


def test_a_plan_of_unchanged_documents_writes_nothing() -> None:
    stored = {"a": _stored("a", ("x",))}
    assert not plan("s", stored, ["a"], [Unchanged("a")]).writes


def test_boilerplate_is_what_too_many_documents_of_one_host_share() -> None:
    from kbsync.core.plan import boilerplate

    docs = {f"https://a.test/{i}": {f"u{i}", "footer"} for i in range(40)}
    docs |= {f"https://b.test/{i}": {f"v{i}", "footer-b" if i < 2 else f"w{i}"}
             for i in range(40)}
    assert boilerplate(docs, share=0.05) == {"footer"}  # footer-b: 2 of 40 pages
    assert boilerplate({"a": {"x"}, "b": {"x"}}, share=0.05) == frozenset()  # two copies


def test_a_chunk_draft_survives_pickling_with_every_field() -> None:
    draft = ChunkDraft("d" * 64, "Some text.", 2, "A heading", 10, 20, 3, "paragraph",
                       embedding_text_key("Some text."))
    assert pickle.loads(pickle.dumps(draft, protocol=pickle.HIGHEST_PROTOCOL)) == draft
    # A field added later must be added to __reduce__ too.
    assert len(draft.__reduce__()[1]) == len(dataclasses.fields(ChunkDraft))
