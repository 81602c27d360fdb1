"""What a run has done so far, per source, as the drivers fill it in; frozen into a
:class:`~kbsync.report.SyncResult` at the end."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, TypeVar

from kbsync.core.plan import Action
from kbsync.model import (
    ChangeKind,
    ChangeReport,
    ChunkingDiagnostics,
    FieldChange,
    Region,
    SourceStat,
    Verdict,
)
from kbsync.report import DocumentChange, SourceResult, SyncResult

__all__ = [
    "REPORT_LIMIT", "Capped", "Clock", "Counted", "Progress", "SourceTally", "SyncReport",
    "utc_now",
]


Progress = Callable[[str, int, int], None]
"""``(stage, done, total)``: how a sync tells its progress."""


REPORT_LIMIT = 10_000
"""How many changed documents, failures and warnings (each) a source's report names.

Counts stay exact. Beyond this a report, and so a sync's memory, would grow with
the source: a first sync of a million pages would name a million documents.
"""


T = TypeVar("T")


class Capped(list[T]):
    """A list that keeps its first :data:`REPORT_LIMIT` items and counts the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.omitted = 0

    def append(self, item: T) -> None:
        if len(self) < REPORT_LIMIT:
            super().append(item)
        else:
            self.omitted += 1

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)


@dataclass(slots=True)
class SourceTally:
    """What one sync (or plan) has done so far to one source (frozen by :meth:`result`).

    Its counts are named as in :class:`~kbsync.report.SourceResult`, so a new count
    is a field here and there, nothing more: merging, sending and freezing go by
    the fields.
    """

    source: str
    documents: Counter[str] = field(default_factory=Counter)
    chunks: Counter[str] = field(default_factory=Counter)
    bytes_read: int = 0
    bytes_skipped: int = 0
    racy_rereads: int = 0
    """Documents read again only because their stat is racy (:mod:`kbsync.sync.observe`)."""
    skipped_unsupported: int = 0
    skipped_erased: int = 0
    embeddings_computed: int = 0
    embeddings_to_compute: int = 0
    embeddings_reused: int = 0
    embedding_tokens: int = 0
    embeddings_truncated: int = 0
    embeddings_backfill: int = 0
    boilerplate_chunks: int = 0
    boilerplate_added: int = 0
    """Added chunks that are boilerplate: neither embedded nor reused."""
    vectors_upserted: int = 0
    vectors_deleted: int = 0
    documents_applied: int = 0
    failures: Capped[tuple[str, str]] = field(default_factory=Capped)
    still_failing: Capped[tuple[str, str]] = field(default_factory=Capped)
    """``(key, message)`` of documents that failed as they are in an earlier sync
    (:mod:`kbsync.sync.failures`): not read again, not new problems."""
    unreadable: dict[str, tuple[SourceStat, str, str]] = field(default_factory=dict)
    """The documents read and found unreadable, with the stat, derivation and message
    they failed with: what the next sync remembers (not part of the report)."""
    warnings: Capped[str] = field(default_factory=Capped)
    unsupported: Capped[str] = field(default_factory=Capped)
    """Keys of the listed items no extractor reads (``skipped_unsupported`` counts them)."""
    actions: Capped[tuple[str, str, str | None]] = field(default_factory=Capped)
    """``(key, action, moved from)`` of each document the run changed."""
    changes: dict[str, ChangeReport] = field(default_factory=dict)
    """The text change of edited documents, as many as :data:`REPORT_LIMIT`."""
    listing_complete: bool = True
    deletions_blocked: bool = False
    deletions_held: int = 0
    """Gone documents kept until their deletion is allowed, or unlisted ones kept because
    the listing was incomplete."""
    revision: str = ""
    """The version of the source that was listed, when it has one (a git commit)."""
    pages_checked: int | None = None
    """Pages a revisiting source requested (None for other sources)."""
    pages_not_due: int = 0

    def note_change(self, key: str, change: ChangeReport) -> None:
        """Keep the change report of an edited document, unless the report is full."""
        if key in self.changes or len(self.changes) < REPORT_LIMIT:
            self.changes[key] = change

    def merge(self, other: SourceTally) -> None:
        """Add ``other`` (what a worker did to documents of the same source) to this one."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.documents.update(other.documents)
        self.chunks.update(other.chunks)
        for name in _LISTS:
            mine: Capped[Any] = getattr(self, name)
            theirs: Capped[Any] = getattr(other, name)
            mine.extend(theirs)
            mine.omitted += theirs.omitted
        for key, change in other.changes.items():
            self.note_change(key, change)
        for key, failed in other.unreadable.items():
            if key in self.unreadable or len(self.unreadable) < REPORT_LIMIT:
                self.unreadable[key] = failed
        self.listing_complete &= other.listing_complete
        self.deletions_blocked |= other.deletions_blocked
        self.revision = self.revision or other.revision
        if other.pages_checked is not None:
            self.pages_checked = (self.pages_checked or 0) + other.pages_checked

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data that :meth:`from_dict` reads back (what a worker sends)."""
        return {
            "source": self.source, "documents": dict(self.documents), "chunks": dict(self.chunks),
            **{name: getattr(self, name) for name in _COUNTS},
            **{name: list(getattr(self, name)) for name in _LISTS},
            "omitted": {name: getattr(self, name).omitted for name in _LISTS},
            "changes": {key: _change_dict(change) for key, change in self.changes.items()},
            "unreadable": {key: [stat.size, stat.mtime_ns, stat.inode, stat.racy, derivation,
                                 message]
                           for key, (stat, derivation, message) in self.unreadable.items()},
            "listing_complete": self.listing_complete,
            "deletions_blocked": self.deletions_blocked,
            "revision": self.revision,
            "pages_checked": self.pages_checked,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceTally:
        """The tally :meth:`to_dict` made."""
        tally = cls(source=str(data["source"]), documents=Counter(data["documents"]),
                    chunks=Counter(data["chunks"]),
                    listing_complete=bool(data["listing_complete"]),
                    deletions_blocked=bool(data["deletions_blocked"]),
                    revision=str(data["revision"]), pages_checked=data["pages_checked"])
        for name in _COUNTS:
            setattr(tally, name, int(data[name]))
        for name in _LISTS:
            items: Capped[Any] = getattr(tally, name)
            # JSON has no tuples: failures and actions come back as lists.
            items.extend(tuple(x) if isinstance(x, list) else x for x in data[name])
            items.omitted += int(data["omitted"][name])
        for key, change in data["changes"].items():
            tally.note_change(key, _change_of(change))
        for key, (size, mtime, inode, racy, derivation, message) in data.get(
                "unreadable", {}).items():
            tally.unreadable[key] = (SourceStat(size, mtime, inode, bool(racy)), derivation,
                                     message)
        return tally

    def _truncation(self) -> tuple[str, ...]:
        """The warning of a run that embedded chunks past the model's window, if it did."""
        n = self.embeddings_truncated
        if not n:
            return ()
        chunks = "chunk was" if n == 1 else "chunks were"
        return (f"{n:,} {chunks} longer than the embedder's input window and embedded "
                "truncated (their ends are found by text search only); a lower [chunker] "
                "max_tokens avoids it",)

    def result(self) -> SourceResult:
        """The frozen report of this source."""
        return SourceResult(
            source=self.source, documents=Counter(self.documents), chunks=Counter(self.chunks),
            **{name: getattr(self, name) for name in _COUNTS},
            listing_complete=self.listing_complete, deletions_blocked=self.deletions_blocked,
            failures=tuple(self.failures), still_failing=tuple(self.still_failing),
            warnings=tuple(self.warnings) + self._truncation(),
            unsupported=tuple(self.unsupported),
            changes=tuple(DocumentChange(k, a, self.changes.get(k), origin)
                          for k, a, origin in self.actions),
            omitted={name: n for name, n in (("changes", self.actions.omitted),
                                              ("failures", self.failures.omitted),
                                              ("still_failing", self.still_failing.omitted),
                                              ("warnings", self.warnings.omitted),
                                              ("unsupported", self.unsupported.omitted)) if n},
            revision=self.revision, pages_checked=self.pages_checked)


_COUNTS = tuple(f.name for f in fields(SourceTally) if f.type == "int")
_LISTS = ("failures", "still_failing", "warnings", "actions", "unsupported")


def _change_dict(change: ChangeReport) -> dict[str, Any]:
    """What a tally keeps of a document's change report: what the run's report shows."""
    return {"verdict": str(change.verdict), "similarity": change.similarity,
            "kind": None if change.kind is None else str(change.kind), "reason": change.reason,
            "regions": [(r.offset, r.length) for r in change.regions],
            "removed_regions": [(r.offset, r.length) for r in change.removed_regions],
            "fields": [(f.field, f.before, f.after) for f in change.fields]}


def _change_of(sent: Mapping[str, Any]) -> ChangeReport:
    """The change report :func:`_change_dict` made, without the byte chunks it came from."""
    return ChangeReport(changed=True, similarity=sent["similarity"], added=(), removed=(),
                        kept=0, moved=0, regions=tuple(Region(o, n) for o, n in sent["regions"]),
                        verdict=Verdict(sent["verdict"]),
                        kind=None if sent.get("kind") is None else ChangeKind(sent["kind"]),
                        reason=sent.get("reason", ""),
                        removed_regions=tuple(Region(o, n) for o, n in sent["removed_regions"]),
                        fields=tuple(FieldChange(*f) for f in sent.get("fields", ())))


@dataclass(slots=True)
class SyncReport:
    """What one run has done so far: per source, stage times and chunking diagnostics.

    The orchestrator fills it in as it goes; :meth:`result` freezes it.
    """

    dry_run: bool
    started: str
    finished: str = ""
    sources: list[SourceTally] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    diagnostics: ChunkingDiagnostics | None = None
    embedder: str = ""
    model_load_seconds: float | None = None

    def result(self) -> SyncResult:
        """The frozen report, with a count for every document action."""
        return SyncResult(
            dry_run=self.dry_run, started=self.started, finished=self.finished,
            documents={a.value: sum(s.documents[a.value] for s in self.sources) for a in Action},
            seconds=dict(self.seconds), diagnostics=self.diagnostics,
            sources=tuple(s.result() for s in self.sources), embedder=self.embedder,
            model_load_seconds=self.model_load_seconds)


class Clock:
    """Seconds spent in each stage of a run, added up in its report."""

    def __init__(self, report: SyncReport) -> None:
        self.report = report
        self.mark = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Book the time since the last lap to ``stage``."""
        now = time.perf_counter()
        self.report.seconds[stage] = self.report.seconds.get(stage, 0.0) + now - self.mark
        self.mark = now


def utc_now() -> str:
    """Now, in UTC, to the second: the time stamp of runs and records."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class Counted:
    """Progress of a source's batches against a total known before the first batch: in
    documents (those the batches hold: read as changed, or vanished), and the embedding
    in chunks when their total is given (those of the documents chunked in this run).

    Each stage counts a batch's share as its work on it goes: embedding by the share of
    the batch's chunks to embed done, applying by the share of its documents written.
    Batches overlap (one embeds while the one before it is applied), but each stage goes
    through them in order, so a batch's ticks of a stage start where the batches before
    it ended. No total grows and no count goes back: counted in each batch's own units, a
    bar read 757/757, then 821/1,025. Embedding is counted in chunks because it is where
    a sync spends its time when it is long, and it goes by chunks: a batch of a few long
    documents takes far longer than one of many short ones.
    """

    def __init__(self, progress: Progress | None, documents: int,
                 chunks: int | None = None) -> None:
        self._progress = progress
        self._documents = documents
        self._chunks = chunks
        self._before = 0  # documents of the batches handed out so far
        self._chunks_before = 0  # and their chunks

    def batch(self, documents: int, chunks: int = 0) -> Progress | None:
        """The progress callback of the next batch, of ``documents`` documents that hold
        ``chunks`` chunks made in this run."""
        progress = self._progress
        if progress is None:
            return None
        base, total = self._before, max(self._documents, self._before + documents)
        self._before += documents
        in_chunks = self._chunks is not None
        chunks_base = self._chunks_before
        chunks_total = max(self._chunks or 0, chunks_base + chunks)
        self._chunks_before += chunks

        def tick(stage: str, done: int, of: int) -> None:
            if stage == "embed" and in_chunks:
                share = chunks if of <= 0 else chunks * min(done, of) // of
                progress(stage, chunks_base + share, chunks_total)
                return
            share = documents if of <= 0 else documents * min(done, of) // of
            progress(stage, base + share, total)

        return tick
