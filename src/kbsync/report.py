"""The report of a run, and JSON-ready dictionaries of results (people's renderings are in
:mod:`kbsync.cli.render`).

:class:`SyncResult` is the one form of a sync's (or plan's) report: what the
API returns, what ``--json`` prints and what the store keeps for the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from kbsync.model import (
    ChangeKind,
    ChangeReport,
    Chunk,
    ChunkingDiagnostics,
    FieldChange,
    Region,
    Verdict,
)

if TYPE_CHECKING:
    from kbsync.store import Hit

__all__ = [
    "DocumentChange",
    "SourceResult",
    "SyncResult",
    "chunk_dict",
    "diagnostics_dict",
    "hit_dict",
]


@dataclass(frozen=True, slots=True)
class DocumentChange:
    """One document a sync touched: the action taken and, for an edit, how its text changed."""

    key: str
    action: str
    change: ChangeReport | None
    moved_from: str | None = None
    """The key a moved document had before."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: the action (a move with the key it came from), and for an edit
        its verdict, kind and reason, similarity, the regions of the new text that are new
        and the regions of the old text that are gone (character offsets into each version)."""
        out: dict[str, Any] = {"key": self.key, "action": self.action}
        if self.moved_from is not None:
            out["from"] = self.moved_from
        if self.change is not None:
            out |= {"verdict": str(self.change.verdict),
                    "kind": None if self.change.kind is None else str(self.change.kind),
                    "reason": self.change.reason,
                    "similarity": round(self.change.similarity, 4),
                    "regions": _regions(self.change.regions),
                    "removed_regions": _regions(self.change.removed_regions)}
            if self.change.fields:
                out["fields"] = [{"field": f.field, "before": f.before, "after": f.after}
                                 for f in self.change.fields]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DocumentChange:
        """The change :meth:`to_dict` made (an edit's report without the chunks it came from).

        A report stored before edits were classified has no kind (None) and no reason."""
        change = None
        if "verdict" in data:
            change = ChangeReport(
                changed=True, similarity=float(data["similarity"]), added=(), removed=(),
                kept=0, moved=0, verdict=Verdict(data["verdict"]),
                kind=ChangeKind(data["kind"]) if data.get("kind") else None,
                reason=str(data.get("reason") or ""),
                regions=_parse_regions(data.get("regions", ())),
                removed_regions=_parse_regions(data.get("removed_regions", ())),
                fields=tuple(FieldChange(str(f["field"]), _text(f.get("before")),
                                         _text(f.get("after")))
                             for f in data.get("fields", ())))
        return cls(str(data["key"]), str(data["action"]), change, data.get("from"))


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _regions(regions: Sequence[Region]) -> list[dict[str, int]]:
    return [{"offset": r.offset, "length": r.length} for r in regions]


def _parse_regions(data: Iterable[Mapping[str, Any]]) -> tuple[Region, ...]:
    return tuple(Region(int(r["offset"]), int(r["length"])) for r in data)


@dataclass(frozen=True, slots=True)
class SourceResult:
    """What one sync (or plan) did to one source.

    ``documents`` counts documents per action (``new``, ``modified``, ``deleted``...),
    ``chunks`` counts chunks per fate (``kept``, ``moved``, ``added``, ``deleted``);
    both read 0 for a name they do not hold. Every added chunk is embedded
    (``embeddings_computed``), reused (``embeddings_reused``: its vector was cached,
    or the run embedded its digest for another document) or boilerplate
    (``boilerplate_added``), unless its embedding failed. ``changes`` lists the
    documents the run acted on, with the text change of each edit. ``changes``, ``failures``
    and ``warnings`` name at most 10,000 each (``kbsync.sync.tally.REPORT_LIMIT``), so
    that a report does not grow with the source; ``omitted`` counts what each left
    out (only those that left something out).
    A source whose listing failed (``listing_complete`` false) deleted nothing.
    """

    source: str
    documents: Mapping[str, int]
    chunks: Mapping[str, int]
    bytes_read: int
    bytes_skipped: int
    skipped_unsupported: int
    embeddings_computed: int
    embeddings_reused: int
    embedding_tokens: int
    embeddings_truncated: int
    embeddings_backfill: int
    boilerplate_chunks: int
    vectors_upserted: int
    vectors_deleted: int
    listing_complete: bool
    deletions_blocked: bool
    failures: tuple[tuple[str, str], ...]
    """``(key, message)`` of each document that failed; the key is empty for the listing."""
    warnings: tuple[str, ...]
    changes: tuple[DocumentChange, ...]
    omitted: Mapping[str, int] = field(default_factory=dict)
    skipped_erased: int = 0
    """Listed items that an erasure (``kbsync erase``) covers: skipped, never read."""
    embeddings_to_compute: int = 0
    """Chunks the plan found no cached vector for (what a plan says a sync will embed)."""
    documents_applied: int = 0
    """Documents written to the store (short of the counts when the run was interrupted)."""
    revision: str = ""
    """The version of the source that was listed, when it has one (a git source: the
    commit and its author date, ``"<commit> <date>"``); empty otherwise."""
    pages_checked: int | None = None
    """Pages a website source requested (None for other sources)."""
    pages_not_due: int = 0
    """Known pages a ``--due`` sync left unchecked, as not due: unchanged, never deleted."""
    deletions_held: int = 0
    """Stored documents kept although they are gone, until their deletion is allowed
    (``deletions_blocked``: a mass deletion, or a source no longer configured), or
    although an incomplete listing lacks them (it cannot tell what is gone)."""
    boilerplate_added: int = 0
    """Added chunks that are boilerplate, neither embedded nor reused: every added chunk
    is embedded, reused or this."""
    unsupported: tuple[str, ...] = ()
    """Keys of the listed items of a type no extractor reads, skipped (as many as
    ``failures``; ``skipped_unsupported`` counts them all)."""
    still_failing: tuple[tuple[str, str], ...] = ()
    """``(key, message)`` of each document that failed before as it is now: skipped
    unread (:mod:`kbsync.sync.failures`), and no new problem."""
    racy_rereads: int = 0
    """Documents read again although their stat is unchanged, because it was taken within
    the clock's resolution of a listing (``SourceStat.racy``): a later write in the same
    timestamp tick would leave it as it is. Their bytes are in ``bytes_read``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data, as stored in the run's report."""
        return {
            "source": self.source,
            "documents": dict(self.documents),
            "chunks": dict(self.chunks),
            **{name: getattr(self, name) for name in _SOURCE_COUNTS},
            "listing_complete": self.listing_complete,
            "deletions_blocked": self.deletions_blocked,
            "failures": [{"key": k, "message": m} for k, m in self.failures],
            "still_failing": [{"key": k, "message": m} for k, m in self.still_failing],
            "warnings": list(self.warnings),
            "unsupported": list(self.unsupported),
            "changes": [c.to_dict() for c in self.changes],
            "omitted": dict(self.omitted),
            **({"revision": self.revision} if self.revision else {}),
            **({} if self.pages_checked is None else {"pages_checked": self.pages_checked}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceResult:
        """The result :meth:`to_dict` made; a count a report of an older version lacks reads 0."""
        return cls(
            source=str(data["source"]), documents=dict(data.get("documents", {})),
            chunks=dict(data.get("chunks", {})),
            **{name: int(data.get(name, 0)) for name in _SOURCE_COUNTS},
            listing_complete=bool(data.get("listing_complete", True)),
            deletions_blocked=bool(data.get("deletions_blocked", False)),
            failures=tuple((str(f.get("key", "")), str(f.get("message", "")))
                           for f in data.get("failures", ())),
            still_failing=tuple((str(f.get("key", "")), str(f.get("message", "")))
                                for f in data.get("still_failing", ())),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
            unsupported=tuple(str(k) for k in data.get("unsupported", ())),
            changes=tuple(DocumentChange.from_dict(c) for c in data.get("changes", ())),
            omitted=dict(data.get("omitted", {})), revision=str(data.get("revision", "")),
            pages_checked=None if data.get("pages_checked") is None
            else int(data["pages_checked"]))


_SOURCE_COUNTS = tuple(f.name for f in fields(SourceResult) if f.type == "int")
"""The plain counts of a source's report: written and read back by their names, so that a
new count is a field of :class:`SourceResult` and of the tally, nothing more."""


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The report of one sync, or of a plan (``dry_run``: what a sync would do).

    ``documents`` sums the document actions over sources; ``seconds`` is the time
    spent per stage; ``diagnostics`` describes the chunks made in this run.
    """

    dry_run: bool
    started: str
    finished: str
    documents: Mapping[str, int]
    sources: tuple[SourceResult, ...]
    seconds: Mapping[str, float]
    diagnostics: ChunkingDiagnostics | None
    embedder: str = ""
    """The embedder's identity (a later plan measures its rate from this run)."""
    interrupted: bool = False
    """A run that stopped before its end (Ctrl-C, SIGTERM, an error), as the store keeps it."""
    model_load_seconds: float | None = None
    """Seconds the embedder spent loading its model in this run (part of the embed stage's);
    None when it loaded none (a hashing or remote embedder, a model loaded before)."""

    @property
    def failed(self) -> bool:
        """Whether a document failed, a listing was incomplete or deletions were blocked:
        new problems (documents still failing as before are not)."""
        return any(s.failures or s.deletions_blocked or not s.listing_complete
                   for s in self.sources)

    @property
    def still_failing(self) -> int:
        """How many documents failed as they did in an earlier sync (skipped unread)."""
        return sum(len(s.still_failing) for s in self.sources)

    def total(self, action: str) -> int:
        """How many documents took ``action`` (e.g. ``"new"``), over every source."""
        return self.documents.get(action, 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: what ``--json`` prints and the store keeps for the run."""
        return {
            "dry_run": self.dry_run,
            "started": self.started,
            "finished": self.finished,
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
            "documents": dict(self.documents),
            "sources": [s.to_dict() for s in self.sources],
            "diagnostics": diagnostics_dict(self.diagnostics) if self.diagnostics else None,
            "embedder": self.embedder,
            **({"interrupted": True} if self.interrupted else {}),
            **({"model_load_seconds": round(self.model_load_seconds, 3)}
               if self.model_load_seconds is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SyncResult:
        """The result :meth:`to_dict` made, as the store keeps it for the run."""
        diagnostics = data.get("diagnostics")
        return cls(
            dry_run=bool(data.get("dry_run", False)), started=str(data.get("started", "")),
            finished=str(data.get("finished", "")), documents=dict(data.get("documents", {})),
            sources=tuple(SourceResult.from_dict(s) for s in data.get("sources", ())),
            seconds={k: float(v) for k, v in data.get("seconds", {}).items()},
            diagnostics=None if not diagnostics else ChunkingDiagnostics(
                **{f.name: diagnostics[f.name] for f in fields(ChunkingDiagnostics)}),
            embedder=str(data.get("embedder", "")),
            interrupted=bool(data.get("interrupted", False)),
            model_load_seconds=None if data.get("model_load_seconds") is None
            else float(data["model_load_seconds"]))


def diagnostics_dict(d: ChunkingDiagnostics) -> dict[str, Any]:
    """Diagnostics as a JSON-ready dictionary (with the derived hard-cut rate)."""
    return {**asdict(d), "hard_cut_rate": d.hard_cut_rate}


def chunk_dict(c: Chunk) -> dict[str, Any]:
    """A chunk as a JSON-ready dictionary."""
    return {**asdict(c), "boundary": str(c.boundary)}


def hit_dict(hit: Hit) -> dict[str, Any]:
    """A search hit as a JSON-ready dictionary."""
    return asdict(hit)
