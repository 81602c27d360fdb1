"""What the dashboard shows, as JSON-ready data: one shape for the pages and the API.

Every function reads through a :class:`~kbsync.KnowledgeBase` and does no work
of its own beyond reshaping (and the one comparison a diff needs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.model import Region
from kbsync.report import SourceResult, SyncResult
from kbsync.store import Hit, RunRecord

__all__ = [
    "CHART_RUNS",
    "document_view",
    "hit_view",
    "moved_to",
    "overview",
    "run_detail",
    "run_summary",
    "segments",
]

# How many of the latest runs the overview's chart covers.
CHART_RUNS = 30
# The overview lists the document changes of the latest runs, up to this many.
_RECENT_RUNS = 5
_RECENT_CHANGES = 50


def overview(kb: KnowledgeBase) -> dict[str, Any]:
    """Counts, sources, the last sync, embeddings per run and the latest document changes."""
    status = kb.status()
    counts = dict(status.by_source)
    unlisted = set(status.last_run.unlisted) if status.last_run else set()
    sources = [{"name": s.name, "kind": s.kind, "location": s.location,
                "documents": counts.pop(s.name, 0), "unlisted": s.name in unlisted}
               for s in kb.config.sources]
    # Documents of sources no longer configured stay until the next sync deletes them.
    sources += [{"name": name, "kind": "removed", "location": "", "documents": n,
                 "unlisted": False} for name, n in sorted(counts.items())]
    records = kb.runs(CHART_RUNS)
    recent = [{**change, "run": r.id, "finished": r.finished}
              for r in records[:_RECENT_RUNS]
              for change in _changes(SyncResult.from_dict(r.report))][:_RECENT_CHANGES]
    return {
        "documents": status.documents,
        "chunks": status.chunks,
        "embeddings": status.embeddings,
        "runs": status.runs,
        "last_sync": status.last_run.finished if status.last_run else None,
        "sources": sources,
        "embeddings_per_run": [_embeddings(r) for r in reversed(records)],
        "recent_changes": recent,
    }


def _embeddings(record: RunRecord) -> dict[str, Any]:
    """What the overview's plots show of a run: embeddings computed, reused and kept,
    documents changed, tokens embedded and those a full re-embed would have spent on the
    chunks the run reused or kept (at the run's tokens per embedded chunk, else its
    chunks' mean), the seconds that saved at the run's embedding rate (None when it
    embedded nothing to measure one from), and seconds per stage."""
    result = SyncResult.from_dict(record.report)
    vectors = _vectors(result.sources)
    tokens = sum(s.embedding_tokens for s in result.sources)
    d = result.diagnostics
    per_chunk = (tokens / vectors["computed"] if vectors["computed"]
                 else d.tokens_mean if d is not None and d.chunk_count else 0.0)
    saved = round((vectors["reused"] + vectors["kept"]) * per_chunk)
    embedding = result.seconds.get("embed", 0.0)
    return {"run": record.id, "finished": record.finished, **vectors,
            "changed": sum(n for action, n in result.documents.items()
                           if action not in ("unchanged", "failed")),
            "failed": result.documents.get("failed", 0),
            "tokens_embedded": tokens, "tokens_saved": saved,
            "seconds_saved": round(saved * embedding / tokens, 3) if tokens and embedding
            else None,
            "seconds": {stage: round(v, 3) for stage, v in result.seconds.items()}}


def _vectors(sources: Sequence[SourceResult]) -> dict[str, int]:
    """Vectors computed; reused, as the report's ``embeddings_reused`` counts them (chunks
    new to their document that needed no embedding); and chunks that changed documents
    kept with their vectors (in place or moved)."""
    kept = sum(s.chunks.get(k, 0) for s in sources for k in ("kept", "moved"))
    return {"computed": sum(s.embeddings_computed for s in sources),
            "reused": sum(s.embeddings_reused for s in sources), "kept": kept}


def run_summary(record: RunRecord) -> dict[str, Any]:
    """One line of the runs list."""
    return _summary(record, SyncResult.from_dict(record.report))


def _summary(record: RunRecord, result: SyncResult) -> dict[str, Any]:
    return {
        "id": record.id,
        "started": record.started,
        "finished": record.finished,
        "seconds": round(sum(result.seconds.values()), 3),
        "documents": {k: v for k, v in result.documents.items() if v},
        "embeddings": _vectors(result.sources),
        "failures": sum(len(s.failures) for s in result.sources),
        "still_failing": result.still_failing,
    }


def run_detail(record: RunRecord) -> dict[str, Any]:
    """A run's summary, its per-source report, its failures with reasons and its changes."""
    result = SyncResult.from_dict(record.report)  # read once for every part of the page
    sources = result.sources
    return {
        **_summary(record, result),
        "failure_list": [{"source": s.source, "key": key, "message": message}
                         for s in sources for key, message in s.failures],
        "still_failing_list": [{"source": s.source, "key": key, "message": message}
                               for s in sources for key, message in s.still_failing],
        "changes": _changes(result),
        "changes_omitted": sum(s.omitted.get("changes", 0) for s in sources),
        "sources": [{"source": s.source, "documents": dict(s.documents),
                     "chunks": dict(s.chunks), "embeddings": _vectors([s]),
                     "bytes_read": s.bytes_read, "listing_complete": s.listing_complete,
                     "warnings": list(s.warnings), "skipped_unsupported": s.skipped_unsupported,
                     "unsupported": list(s.unsupported)} for s in sources],
        "report": dict(record.report),
    }


def document_view(kb: KnowledgeBase, key: str, source: str | None = None) -> dict[str, Any]:
    """A document's texts, its last change (verdict, kind and reason, similarity, regions)
    and its history.

    Verdict, kind, similarity and regions come from one :func:`~kbsync.core.compare.compare`
    of the two texts: the words added to the new text and those removed from the
    old one, for the side-by-side view. A first version has no regions.

    Raises :class:`~kbsync.errors.KbsyncError` when there is no such document.
    """
    doc = kb.diff(key, source)
    previous = doc.previous or ""
    added: tuple[Region, ...] = ()
    removed: tuple[Region, ...] = ()
    if doc.change is not None:
        added, removed = doc.change.regions, doc.change.removed_regions
    return {
        "source": doc.source,
        "key": doc.key,
        "title": doc.title,
        "last_changed": doc.last_changed,
        "first_version": doc.first_version,
        "verdict": None if doc.verdict is None else str(doc.verdict),
        "kind": None if doc.kind is None else str(doc.kind),
        "reason": doc.reason,
        "similarity": None if doc.similarity is None else round(doc.similarity, 4),
        "added": _regions(doc.text, added),
        "removed": _regions(previous, removed),
        "text": doc.text,
        "previous": doc.previous,
        "moved_from": doc.moved_from,
        "moved": doc.moved,
        "history": [asdict(h) for h in kb.history(doc.key, doc.source)],
    }


def moved_to(kb: KnowledgeBase, key: str, source: str | None = None,
             runs: int = 200) -> tuple[str, str] | None:
    """Where the document once at ``key`` is now, by the moves the latest ``runs`` runs
    recorded (followed through each later move): ``(source, key)``, or None when it
    never moved, so that a link in an old run's report still leads to it."""
    moves: dict[tuple[str, str], str] = {}
    for record in reversed(kb.runs(runs)):  # oldest first: a later move of a key wins
        for s in SyncResult.from_dict(record.report).sources:
            for change in s.changes:
                if change.action == "moved" and change.moved_from is not None:
                    moves[(s.source, change.moved_from)] = change.key
    found = None
    seen: set[tuple[str, str]] = set()
    for (where, origin) in moves:
        if origin == key and (source is None or where == source):
            current = (where, key)
            while current in moves and current not in seen:
                seen.add(current)
                current = (where, moves[current])
            found = current
    return found


def hit_view(hit: Hit) -> dict[str, Any]:
    """A search result: where it is, its heading, its rank, relevance (0 to 1) and raw
    score, the matching chunk's text and (with context windows on) the text around it
    that a reader would get."""
    return {"source": hit.source, "key": hit.key, "title": hit.title, "heading": hit.heading,
            "index": hit.index, "rank": hit.rank, "relevance": round(hit.relevance, 4),
            "score": round(hit.score, 6), "text": hit.text, "context": hit.context or hit.text}


def segments(text: str, regions: Sequence[Mapping[str, Any]],
             context: int | None = None) -> list[tuple[str, str]]:
    """``text`` cut at the regions into ``(piece, kind)`` runs, kind ``same`` or ``changed``.

    With ``context``, unchanged text farther than that many characters from a
    region is left out, each omission a ``gap`` run (empty piece).
    """
    out: list[tuple[str, str]] = []
    last = 0
    for r in regions:
        start, end = max(last, r["offset"]), r["offset"] + r["length"]
        out += _unchanged(text[last:start], context, leading=not out)
        if end > start:
            out.append((text[start:end], "changed"))
        last = max(last, end)
    out += _unchanged(text[last:], context, leading=not out, trailing=True)
    return out


def _unchanged(piece: str, context: int | None, *, leading: bool,
               trailing: bool = False) -> list[tuple[str, str]]:
    """An unchanged run, cut to ``context`` characters next to the regions around it."""
    if not piece:
        return []
    if context is None or (leading and trailing):
        return [(piece, "same")]
    keep_head, keep_tail = (0 if leading else context), (0 if trailing else context)
    if len(piece) <= keep_head + keep_tail + context:  # too short to be worth cutting
        return [(piece, "same")]
    # Cut at line breaks where the kept context has one, so no line starts mid-word.
    head = piece[:keep_head]
    head = head[: head.rfind("\n") + 1] or head
    tail = piece[len(piece) - keep_tail :] if keep_tail else ""
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail[:-1] else tail
    out = [(head, "same")] if head else []
    out.append(("", "gap"))
    if tail:
        out.append((tail, "same"))
    return out


def _regions(text: str, regions: Sequence[Region]) -> list[dict[str, Any]]:
    return [{"offset": r.offset, "length": r.length, "text": text[r.offset : r.end]}
            for r in regions]


def _changes(result: SyncResult) -> list[dict[str, Any]]:
    return [{"source": s.source, "key": c.key, "action": c.action,
             "verdict": None if c.change is None else str(c.change.verdict),
             "kind": None if c.change is None or c.change.kind is None else str(c.change.kind),
             "reason": "" if c.change is None else c.change.reason,
             "similarity": None if c.change is None else round(c.change.similarity, 4),
             "from": c.moved_from}
            for s in result.sources for c in s.changes]
