"""Reading: the verbs that read what the store holds (search, documents, diff, status, runs,
history); none of them writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kbsync.app._parts import Parts
from kbsync.app.results import (
    ChangedRegion,
    DocumentDiff,
    DocumentRef,
    HistoryEntry,
    Status,
)
from kbsync.app.searching import Searcher, SearchMode, SearchResults
from kbsync.app.status import status_of
from kbsync.core.compare import compare
from kbsync.core.plan import Action
from kbsync.engine import (
    make_reranker,
)
from kbsync.errors import KbsyncError, ParameterError
from kbsync.report import SyncResult
from kbsync.store import DocumentText, RunRecord
from kbsync.store.filters import Filters, filters_from

__all__ = ["HISTORY_RUNS", "Reading"]

# A document's history is read from the run reports; this many of the latest runs are looked at.
HISTORY_RUNS = 200


class Reading(Parts):
    """The verbs that read (a mixin of :class:`~kbsync.app.knowledge_base.KnowledgeBase`)."""

    def search(self, query: str, k: int = 5, mode: SearchMode | None = None,
               context_tokens: int | None = None,
               query_vector: npt.NDArray[np.float32] | None = None,
               filters: Filters | Mapping[str, Any] | None = None,
               rerank: bool | None = None) -> SearchResults:
        """The chunks of the current documents that best match ``query``, best first,
        each with its ``rank`` (from 1) and ``relevance`` in [0, 1] (see :mod:`kbsync.app.fusion`).

        The results are a list of :class:`Hit`, with ``warnings``: a line that says, once,
        that chunks whose vector is damaged were left out (never ranked), or else that the
        store is known to be damaged.

        Args:
            query: what to look for, in words.
            k: how many results.
            mode: ``"vector"`` (embedding similarity), ``"text"`` (full text) or
                ``"hybrid"`` (both, fused by ``[search] fusion``); by default the
                configuration's (:attr:`~kbsync.engine.Config.default_search_mode`).
            context_tokens: return each hit with its neighbouring chunks of the same
                section, up to this many tokens, in ``Hit.context`` (default: the
                configuration's ``[search] context_tokens``; 0 for the chunk alone).
                A hit inside a window already returned is merged into it, and a
                window does not grow into one already returned (no text twice).
            query_vector: the query's vector, when the caller has it from this
                knowledge base's embedder (a running ``kbsync serve`` that holds the
                model loaded); by default the embedder embeds the query.
            filters: only chunks of documents meeting these: name -> value, a list
                of values any one of which may match, or {operator: value} (``source``,
                ``path`` and ``title`` are the store's fields, other names keys of the
                document's metadata; see :mod:`kbsync.store.filters`).
            rerank: read the best ``[search] rerank_candidates`` hits again with the
                cross-encoder ``[search] rerank_model`` (default: ``[search] rerank``).
        """
        if context_tokens is None:
            context_tokens = self.config.search.context_tokens
        known = self.damage
        results = self._searcher(rerank).search(query, k,
                                                mode or self.config.default_search_mode,
                                                context_tokens, query_vector,
                                                filters_from(filters))
        if results.unsound and known is None:
            # Found damage is known damage: the next write waits for a repair.
            self.store.remember_damage(f"a search found {results.unsound:,} chunks with a "
                                       "damaged vector")
        # One line: what this search left out says the most; else what is known.
        return SearchResults(results, results.warnings or ([known] if known else []),
                             results.unsound)

    def query_vector(self, query: str) -> npt.NDArray[np.float32]:
        """The vector a search compares chunks with: the embedder's vector of the
        normalized query."""
        return self._searcher().query_vector(query)

    def _searcher(self, rerank: bool | None = None) -> Searcher:
        reranker = None
        if self.config.search.rerank if rerank is None else rerank:
            if self._reranker is None:  # made once, by the first search that reranks
                self._reranker = make_reranker(self.config)
            reranker = self._reranker
        search = self.config.search
        return Searcher(self.store, self.vector_index, self.embedder, reranker,
                        search.rerank_candidates, search.fusion, search.vector_weight)

    def documents(self, *, after: DocumentRef | None = None,
                  limit: int | None = None) -> tuple[DocumentRef, ...]:
        """The documents in the store, ordered by source and key (in the store's collation).

        ``after`` and ``limit`` page through a large store: the next page starts
        after the last document of the previous one, so documents added or removed
        in between neither repeat nor shift the rest; a page reads only its own rows.
        """
        if limit is not None and limit < 1:
            raise ParameterError(f"limit must be at least 1, not {limit}")
        found: list[DocumentRef] = []
        for source in sorted(self.store.source_names()):
            if after is not None and source < after.source:
                continue  # its manifest need not be read
            start = after.key if after is not None and source == after.source else None
            wanted = None if limit is None else limit - len(found)
            found.extend(DocumentRef(source, key)
                         for key in self.store.manifest(source, start, wanted))
            if len(found) == limit:
                break
        return tuple(found)

    def document(self, key: str, source: str | None = None) -> DocumentText:
        """The current (and previous) canonical text of a document.

        Raises ``KbsyncError`` when no document has that key (in ``source``, if given),
        and ``ParameterError`` when several sources hold it and no ``source`` is given.
        """
        names = self.store.source_names() if source is None else set()
        if len(names) > 1:  # read from each source once, not looked up and then read
            found = [d for s in sorted(names) if (d := self.store.document(key, s)) is not None]
            if len(found) > 1:
                raise ParameterError(f"{key}: several sources hold this key "
                                     f"({', '.join(d.source for d in found)}): name one "
                                     "(--source)")
            doc = found[0] if found else None
        else:
            doc = self.store.document(key, source)
        if doc is None:
            last = self.history(key, source, limit=1)
            if last and last[0].action == "deleted":
                raise KbsyncError(f"{key}: deleted by sync #{last[0].run} (finished "
                                  f"{last[0].finished}); its text is no longer stored")
            moved = self._moved_to(key, source)
            if moved is not None:
                run, new = moved
                raise KbsyncError(f"{key}: moved to {new!r} by sync #{run.id} (finished "
                                  f"{run.finished}); its text is stored under that key")
            raise KbsyncError(f"{key}: no such document in the knowledge base"
                              f"{self._key_hint(key, source)}")
        return doc

    def _moved_to(self, key: str, source: str | None) -> tuple[RunRecord, str] | None:
        """The latest run of the recorded ones that moved the document ``key`` away, and
        the key it moved to."""
        for record in self.store.runs(HISTORY_RUNS):
            for s in SyncResult.from_dict(record.report).sources:
                if source is None or s.source == source:
                    for change in s.changes:
                        if change.moved_from == key:
                            return record, change.key
        return None

    def _key_hint(self, key: str, source: str | None) -> str:
        """A hint when ``key`` is a path that names the source's folder too (``docs/a.md``
        for the key ``a.md``): keys are paths inside a source, which shell completion from
        the project's folder does not give."""
        parts = key.replace("\\", "/").split("/")
        for start in range(1, len(parts)):
            inside = "/".join(parts[start:])
            if self.store.document(inside, source) is not None:
                return f"; keys are paths inside a source: did you mean {inside!r}?"
        return ""

    def diff(self, key: str, source: str | None = None) -> DocumentDiff:
        """The last change of a document: verdict, kind and reason, similarity and the changed
        regions.

        A document with one version only comes back with ``first_version`` true; one
        that was renamed names the key it had before its last move (``moved_from``).
        """
        doc = self.document(key, source)
        changes = self.history(key, doc.source, limit=HISTORY_RUNS)
        last = next((h for h in changes if h.fields), None)
        return replace(self._text_diff(doc), metadata=doc.metadata,
                       fields=() if last is None else last.fields,
                       fields_changed=None if last is None else last.finished,
                       metadata_last=bool(changes) and changes[0].action == Action.METADATA)

    @staticmethod
    def _text_diff(doc: DocumentText) -> DocumentDiff:
        """How the current text of ``doc`` differs from its previous one."""
        if doc.previous is None:
            return DocumentDiff(
                source=doc.source, key=doc.key, title=doc.title, last_changed=doc.last_changed,
                verdict=None, similarity=None, regions=(), text=doc.text, previous=None,
                change=None, moved_from=doc.moved_from, moved=doc.moved)
        change = compare(doc.previous, doc.text)
        return DocumentDiff(
            source=doc.source, key=doc.key, title=doc.title, last_changed=doc.last_changed,
            verdict=change.verdict, similarity=change.similarity, kind=change.kind,
            reason=change.reason,
            regions=tuple(ChangedRegion(r.offset, r.length, doc.text[r.offset:r.end])
                          for r in change.regions),
            text=doc.text, previous=doc.previous, change=change,
            removed=tuple(ChangedRegion(r.offset, r.length, doc.previous[r.offset:r.end])
                          for r in change.removed_regions),
            moved_from=doc.moved_from, moved=doc.moved)

    def status(self) -> Status:
        """Counts of documents, chunks, embeddings and runs, the last run, and the process
        writing now (a sync in progress), if any."""
        return status_of(self.config, self.store, self.embedder.identity)

    def runs(self, limit: int = 50) -> list[RunRecord]:
        """The latest recorded syncs, newest first, each with its report
        (the shape of :meth:`SyncResult.to_dict`)."""
        return self.store.runs(limit)

    def run(self, run_id: int) -> RunRecord | None:
        """One recorded sync, or None when there is no such run."""
        return self.store.run(run_id)

    def history(self, key: str, source: str | None = None,
                limit: int = 20) -> list[HistoryEntry]:
        """The changes to a document recorded by the latest ``HISTORY_RUNS`` runs,
        newest first, at most ``limit``."""
        found: list[HistoryEntry] = []
        for record in self.store.runs(HISTORY_RUNS):
            for s in SyncResult.from_dict(record.report).sources:
                if source is not None and s.source != source:
                    continue
                for change in s.changes:
                    if change.key != key:
                        continue
                    edit = change.change
                    found.append(HistoryEntry(
                        run=record.id, finished=record.finished, source=s.source,
                        action=change.action, verdict=None if edit is None else str(edit.verdict),
                        similarity=None if edit is None else round(edit.similarity, 4),
                        regions=0 if edit is None else len(edit.regions),
                        kind=None if edit is None or edit.kind is None else str(edit.kind),
                        reason="" if edit is None else edit.reason,
                        fields=() if edit is None else edit.fields))
                    if len(found) == limit:
                        return found
        return found
