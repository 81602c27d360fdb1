"""Compare a changed text with its stored one; hold a new text that shares almost nothing
with it until a second sync sees the same text."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import NamedTuple, Protocol

from kbsync.core.compare import WORD_REGIONS_LIMIT, compare, compare_long, with_metadata
from kbsync.core.plan import (
    Action,
    DocumentPlan,
    DocumentVersion,
    Failed,
    Held,
    Observation,
    StoredDocument,
)
from kbsync.model import ChangeReport, Verdict
from kbsync.store import Manifest, Meta
from kbsync.store.rows import held_meta_name
from kbsync.sync.tally import SourceTally

__all__ = [
    "Screened", "compare_stored", "forget_held", "reports_change", "route_replacement", "screen",
]


class _Texts(Manifest, Meta, Protocol):
    """What screening reads (the stored texts) and writes (the held replacements)."""


class Screened(NamedTuple):
    """A document read, screened against its stored text."""

    observation: Observation  # what to plan: the one read, or Held in its place
    change: ChangeReport | None  # its change report, when its text changed


def screen(store: _Texts, source: str, observation: Observation, old: StoredDocument | None,
           shared: Collection[str], out: SourceTally, *, accept: bool,
           write: bool) -> Screened:
    """Compare a document read with its stored text and hold a collapsed replacement
    (:func:`route_replacement`); one that has its stored text back forgets the
    replacement held for it (:func:`forget_held`). Both drivers screen every document
    they read so; ``write`` false (a dry run) changes nothing in the store.
    """
    change = compare_stored(store, source, observation, old, shared)
    if change is not None and isinstance(observation, DocumentVersion):
        return Screened(route_replacement(store, source, observation, change, out,
                                          accept=accept, write=write), change)
    # Read again and found with its stored text; not one left unread (failed, or held
    # because it changed while it was read): that says nothing of its text.
    if old is not None and not isinstance(observation, Failed | Held) and write:
        forget_held(store, source, observation.key)
    return Screened(observation, change)


def compare_stored(store: Manifest, source: str, observation: Observation,
                   old: StoredDocument | None, shared: Collection[str]) -> ChangeReport | None:
    """The change report of a document whose text or metadata changed against its stored
    record, else None.

    ``old`` is the stored record it replaces: at its own key, or a move's origin.
    Chunks in ``shared`` (the source's boilerplate) do not count in the similarity. A
    changed metadata field makes the change substantive
    (:func:`~kbsync.core.compare.with_metadata`), and makes a report of a metadata-only
    change.
    """
    if not isinstance(observation, DocumentVersion) or old is None:
        return None
    report = None
    if observation.text_hash != old.text_hash:
        # The stored text is looked up by the old record's key: a move's differs from its new one.
        if len(observation.text) > WORD_REGIONS_LIMIT:
            report = compare_long(store.text_pieces(source, old.key), [observation.text])
        else:
            before = store.document(old.key, source, previous=False)
            if before is None:
                return None
            noise = {c.text for c in observation.chunks if c.digest in shared}
            report = compare(before.text, observation.text, ignore=noise)
    return with_metadata(report, _fields(old.metadata), _fields(observation.metadata))


def _fields(metadata: str) -> dict[str, str]:
    """A document's metadata as stored (a JSON object), as names and text values (JSON for
    a value that is not text: a list reads as ``["intro", "install"]`` in a report)."""
    try:
        data = json.loads(metadata) if metadata else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in data.items()}


def reports_change(doc: DocumentPlan) -> bool:
    """Whether a sync's report keeps the change report of this planned document: an edit,
    a metadata change, a held replacement (what it would have become), or a move with
    edits."""
    return doc.action in (Action.MODIFIED, Action.METADATA, Action.HELD) or doc.edited


def forget_held(store: Meta, source: str, key: str) -> None:
    """Drop the replacement held for a document that came back to its stored text: a
    later collapse of it must be seen twice again before it is applied."""
    name = held_meta_name(source, key)
    if store.get_meta(name):
        store.set_meta(name, "")


def route_replacement(store: Meta, source: str, version: DocumentVersion,
                      change: ChangeReport, out: SourceTally, *, accept: bool,
                      write: bool) -> Observation:
    """Route a changed document by its verdict: hold a collapsed text, else let it through.

    A re-examine verdict (the new text shares almost nothing with the stored one:
    a login wall, an error page served with 200, an extractor regression) keeps
    the stored version, with its stat, so the next sync reads the document again;
    the new text is applied when that sync sees the same text (same hash), or at
    once with ``accept``. The hash awaiting confirmation is a meta entry of the
    store (:func:`~kbsync.store.rows.held_meta_name`), so it survives restarts; ``write`` false (a
    dry run) leaves it alone.
    """
    name = held_meta_name(source, version.key)
    held = store.get_meta(name) or None
    if change.verdict is not Verdict.REEXAMINE_EXTRACTION:
        if held and write:
            store.set_meta(name, "")
        return version
    if accept or held == version.text_hash:
        if held and write:
            store.set_meta(name, "")
        how = "accepted" if accept else "confirmed by a second check"
        out.warnings.append(f"{version.key}: new text shares almost nothing with the previous "
                            f"one (similarity {change.similarity:.3f}); replacement {how}")
        return version
    if write:
        store.set_meta(name, version.text_hash)
    out.warnings.append(f"{version.key}: new text shares almost nothing with the previous one "
                        f"(similarity {change.similarity:.3f}); kept the previous version until "
                        "the next sync sees the same text (or sync with --accept-replacements)")
    return Held(version.key)
