"""A record store held in memory: every role of :class:`~kbsync.store.RecordStore`, for the
sync logic's tests.

Made of the role fakes of :mod:`kbsync.testing.roles` (meta, runs, frontier, erasures,
the embedding cache) over one state, and the manifest, search, mirror and maintenance
that need all of it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import (
    ChunkDraft,
    DocumentPlan,
    StoredDocument,
    boilerplate_of_counts,
    host_group,
)
from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import (
    ChunkRef,
    Discarded,
    DocumentText,
    Frontier,
    Hit,
    Nearest,
    RecordStore,
    StoreStatus,
    Window,
)
from kbsync.store.filters import Filters
from kbsync.store.rows import as_hit, document_text, query_terms, window_span
from kbsync.store.sql.digests import GROUP_SIZE
from kbsync.store.values import (
    Damage,
    damaged_chunk_texts,
    damaged_texts,
    damaged_vectors,
    lines,
    summary,
)
from kbsync.store.writes import PlanWrites
from kbsync.testing.roles import (
    MemoryEmbeddingCache,
    MemoryErasures,
    MemoryFrontier,
    MemoryMeta,
    MemoryRunLog,
    _Document,
    _Version,
)

__all__ = ["MemoryStore"]


class MemoryStore(MemoryMeta, MemoryRunLog, MemoryFrontier, MemoryErasures,
                  MemoryEmbeddingCache, PlanWrites):
    """A :class:`~kbsync.store.RecordStore` in dicts of frozen values, for tests of the sync.

    It keeps what the SQL stores keep, with the same semantics: a document's current
    and previous version, chunk texts by digest, the embedding cache keyed by
    (chunk digest, embedder identity), boilerplate, meta, runs, erasures, the
    frontier and the outbox. :meth:`batch` (and each :meth:`apply`) is a
    transaction: an exception inside leaves the store as it was. Its text search
    is naive (a chunk's count of the query's words, heading and title counted
    twice; no stemming) and its vector search brute force. :meth:`verify` checks the
    stored values only (the links of its dicts of frozen values cannot break).
    """

    # -- the manifest ------------------------------------------------------------------

    def manifest(self, source: str, after: str | None = None,
                 limit: int | None = None) -> dict[str, StoredDocument]:
        keys = sorted(k for s, k in self._s.documents if s == source and k > (after or ""))
        if limit is not None and limit > 0:
            keys = keys[:limit]
        return {k: self._s.documents[(source, k)].stored(k) for k in keys}

    def with_digests(self, source: str, docs: Collection[StoredDocument]) -> list[StoredDocument]:
        out = []
        for doc in docs:
            found = self._s.documents.get((source, doc.key))
            digests = () if found is None else tuple(c.digest for c in found.current.chunks)
            out.append(replace(doc, chunk_digests=digests))
        return out

    def chunk_digests(self, source: str) -> Iterator[tuple[str, str]]:
        yield from [(k, c.digest) for (s, k), d in self._s.documents.items() if s == source
                    for c in d.current.chunks]

    def source_names(self) -> set[str]:
        return {s for s, _ in self._s.documents}

    def boilerplate(self, source: str) -> frozenset[str]:
        return self._s.boilerplate.get(source, frozenset())

    def set_boilerplate(self, source: str, digests: Collection[str]) -> None:
        self._s.boilerplate[source] = frozenset(digests)

    def boilerplate_counted(self, source: str, share: float, *,
                            replaced: Iterable[str] = (),
                            added: Iterable[tuple[str, str, int]] = (),
                            members: Mapping[str, int] | None = None) -> frozenset[str]:
        counts = Counter(self.digest_counts(source))
        for key in replaced:
            found = self._s.documents.get((source, key))
            if found is not None and found.current.chunks:
                group = host_group(key)
                for digest in {c.digest for c in found.current.chunks} | {GROUP_SIZE}:
                    counts[(group, digest)] -= 1
        for group, digest, n in added:
            counts[(group, digest)] += n
        for group, n in (members or {}).items():
            counts[(group, GROUP_SIZE)] += n
        sizes = {g: n for (g, d), n in counts.items() if d == GROUP_SIZE}
        return boilerplate_of_counts(
            ((g, d, n) for (g, d), n in counts.items() if d != GROUP_SIZE), sizes, share)

    def digest_counts(self, source: str) -> dict[tuple[str, str], int]:
        """The kept counts of ``source``, as :meth:`kbsync.store.sql.digests.DigestCounts.
        digest_counts` gives them."""
        return {(g, d): n for (s, g, d), n in self._s.digest_counts.items() if s == source}

    def mark_missing(self, source: str, key: str) -> None:
        found = self._s.documents.get((source, key))
        if found is not None:
            self._put(source, key, replace(found, missing=found.missing + 1))

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        found = self._s.documents.get((source, key))
        if found is not None:
            yield found.current.text

    def document(self, key: str, source: str | None = None, *,
                 previous: bool = True) -> DocumentText | None:
        for (s, k), d in self._s.documents.items():
            if k == key and source in (None, s):
                before = d.previous.text if previous and d.previous is not None else None
                return document_text((s, k, d.title, d.current.text, before,
                                      d.current.generation, d.last_changed, d.moved_from,
                                      d.moved, d.metadata))
        return None

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        if not doc.writes:
            return
        with self.batch():
            self.put_vectors(embedder, vectors)
            self._s.outbox.update(dict.fromkeys(outbox))
            self._write_plan(source, doc, now)

    def _delete(self, source: str, key: str) -> None:
        self._forget(source, key)

    def _move(self, source: str, doc: DocumentPlan, now: str) -> None:
        v = doc.version
        assert v is not None
        assert doc.previous_key is not None
        found = self._put(source, doc.previous_key, None)
        if found is None:  # the old row is gone: treat as new
            self._write_version(source, doc, now)
            return
        found = replace(found, moved_from=doc.previous_key, moved=now)
        if doc.edited:  # the record takes its new key, then its new version
            self._put(source, doc.key, found)
            self._write_version(source, doc, now)
            return
        self._put(source, doc.key, replace(  # the same text: last_changed stays
            found, locator=v.locator, media_type=v.media_type, stat=v.stat,
            validators=v.validators, bytes_hash=v.bytes_hash, title=v.title,
            metadata=v.metadata, missing=0, last_seen=now))

    def _refresh(self, source: str, doc: DocumentPlan, now: str) -> None:
        found = self._s.documents.get((source, doc.key))
        if found is None:
            return
        v = doc.version
        if v is None:  # gate 2 or a 304: same content, new stat or validators
            fresh = replace(found, stat=doc.stat, validators=doc.validators, missing=0)
        else:
            fresh = replace(found, locator=v.locator, media_type=v.media_type, stat=v.stat,
                            validators=v.validators, bytes_hash=v.bytes_hash, title=v.title,
                            metadata=v.metadata, missing=0, last_seen=now)
        self._put(source, doc.key, fresh)

    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        found = self._s.documents.get((source, doc.key))
        v = doc.version
        assert v is not None
        if found is None:
            self._write_version(source, doc, now)
            return
        self._keep_texts(v.chunks)
        self._put(source, doc.key, replace(  # the same text: its versions stay
            found, locator=v.locator, media_type=v.media_type, stat=v.stat,
            validators=v.validators, bytes_hash=v.bytes_hash, derivation=v.derivation,
            title=v.title, metadata=v.metadata, missing=0, last_seen=now,
            current=replace(found.current, chunks=v.chunks)))

    def _write_version(self, source: str, doc: DocumentPlan, now: str) -> None:
        v = doc.version
        assert v is not None
        old = self._s.documents.get((source, doc.key))
        generation = 1 if old is None else old.current.generation + 1
        self._keep_texts(v.chunks)
        self._put(source, doc.key, _Document(
            v.locator, v.media_type, v.stat, v.validators, v.bytes_hash, v.text_hash,
            v.derivation, v.title, v.metadata, missing=0,
            first_seen=now if old is None else old.first_seen, last_seen=now, last_changed=now,
            current=_Version(generation, v.text, v.chunks, embedding_text_key(v.text)),
            previous=None if old is None or not old.text_hash else old.current,
            moved_from=None if old is None else old.moved_from,
            moved=None if old is None else old.moved))

    def _keep_texts(self, chunks: Sequence[ChunkDraft]) -> None:
        """Keep the chunks' texts, with their keys (a text already kept stays as it is)."""
        for c in chunks:
            if c.digest not in self._s.texts:
                self._s.texts[c.digest] = c.text
                self._s.text_keys[c.digest] = c.embedding_key

    # -- search and the mirror's view --------------------------------------------------

    def _hit(self, source: str, key: str, doc: _Document, index: int, chunk: ChunkDraft,
             score: float) -> Hit:
        return as_hit((source, key, doc.title, chunk.heading, index, chunk.start, chunk.end,
                       chunk.digest, self._s.texts[chunk.digest], chunk.tokens), score)

    def search_text(self, query: str, k: int, filters: Filters | None = None) -> list[Hit]:
        terms = query_terms(query)
        scored = []
        for s, key, doc, i, c in self._indexed(filters=filters):
            body = Counter(re.findall(r"\w+", self._s.texts[c.digest].lower()))
            head = Counter(re.findall(r"\w+", f"{doc.title or ''} {c.heading or ''}".lower()))
            score = sum(body[t] + 2 * head[t] for t in terms)
            if score:
                scored.append(self._hit(s, key, doc, i, c, float(score)))
        return sorted(scored, key=lambda h: -h.score)[:k]

    def search_vector(self, embedder: str, vector: npt.NDArray[np.float32], k: int,
                      filters: Filters | None = None, norm: VectorNorm | None = None,
                      ) -> Nearest:
        rows = [r for r in self._indexed(filters=filters)
                if (r[4].digest, embedder) in self._s.vectors]
        if not rows:
            return Nearest([])
        matrix = np.vstack([self._s.vectors[(r[4].digest, embedder)] for r in rows])
        with np.errstate(over="ignore", invalid="ignore"):
            wrong = (norm or ANY_NORM).unsound(np.linalg.norm(matrix.astype(np.float64), axis=1))
        with np.errstate(over="ignore", invalid="ignore"):
            scores = matrix @ np.asarray(vector, dtype=np.float32)
        order = [n for n in np.argsort(-scores, kind="stable").tolist() if not wrong[n]][:k]
        out = []
        for n in order:
            s, key, doc, i, c = rows[n]
            out.append(self._hit(s, key, doc, i, c, float(scores[n])))
        return Nearest(out, int(wrong.sum()))

    def hits_at(self, refs: Sequence[tuple[str, str, int, str]],
                scores: Sequence[float]) -> list[Hit]:
        out = []
        for (source, key, index, digest), score in zip(refs, scores, strict=True):
            doc = self._s.documents.get((source, key))
            if doc is None or not 0 <= index < len(doc.current.chunks):
                continue
            chunk = doc.current.chunks[index]
            if chunk.digest == digest and digest not in self.boilerplate(source):
                out.append(self._hit(source, key, doc, index, chunk, score))
        return out

    def document_facts(self, documents: Collection[tuple[str, str]],
                       ) -> dict[tuple[str, str], tuple[str | None, str | None]]:
        return {(s, k): (doc.metadata, doc.last_changed) for s, k in documents
                if (doc := self._s.documents.get((s, k))) is not None}

    def window(self, hit: Hit, budget: int, taken: Collection[int] = ()) -> Window:
        doc = self._s.documents.get((hit.source, hit.key))
        chunks = () if doc is None else doc.current.chunks
        rows = [(i, c.start, c.end, c.tokens, c.section) for i, c in enumerate(chunks)]
        span = window_span(rows, hit.index, budget, taken)
        if doc is None or span is None:
            return Window(hit.index, hit.index, hit.text, 0)
        first, last, tokens = span
        return Window(first, last, doc.current.text[rows[first][1]:rows[last][2]], tokens)

    def prepare_vectors(self, dimension: int) -> None:
        """No index to defer: a search scans the dicts."""

    def finish_vectors(self, dimension: int) -> None:
        """Nothing was deferred."""

    def indexed_chunks(self, source: str | None = None, key: str | None = None,
                       filters: Filters | None = None) -> Iterator[ChunkRef]:
        for s, k, _, i, c in list(self._indexed(source, key, filters)):
            yield ChunkRef(s, k, i, c.digest, c.heading, c.start, c.end)

    def pending_outbox(self) -> list[str]:
        return list(self._s.outbox)

    def clear_outbox(self, ids: Collection[str]) -> None:
        for i in ids:
            self._s.outbox.pop(i, None)

    # -- maintenance -------------------------------------------------------------------

    def gc(self) -> dict[str, int]:
        return self._collect()

    def status(self) -> StoreStatus:
        by_source = Counter(s for s, _ in self._s.documents)
        last = self.runs(1)
        return StoreStatus(
            documents=len(self._s.documents),
            chunks=sum(len(d.current.chunks) for d in self._s.documents.values()),
            embeddings=len(self._s.vectors), runs=len(self._s.runs), by_source=dict(by_source),
            last_run=last[0].report if last else None)

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None,
               norm: VectorNorm | None = None) -> list[str]:
        """The stored values checked as the SQL stores check them (chunk texts, kept texts,
        vectors); how rows are linked is not: dicts of frozen values cannot break a link."""
        damage = self._value_damage(embedder, identity, derivations, norm)
        if damage:
            self.remember_damage(summary(damage))
        else:
            self.remember_damage(None)
        return lines(damage, norm or ANY_NORM)

    def _value_damage(self, embedder: str, identity: Callable[[str], str] | None,
                      derivations: Collection[str] | None, norm: VectorNorm | None) -> Damage:
        current = {c.digest for d in self._s.documents.values()
                   if derivations is None or d.derivation in derivations
                   for c in d.current.chunks}
        chunk_texts = tuple(damaged_chunk_texts(
            ((digest, text, self._s.text_keys.get(digest), digest in current)
             for digest, text in self._s.texts.items()), identity))
        texts = tuple(damaged_texts(
            (s, k, v.generation, v is d.current, v.text, v.key or None)
            for (s, k), d in sorted(self._s.documents.items())
            for v in (d.current, d.previous) if v is not None))
        vectors = tuple(damaged_vectors(
            ((digest, owner, len(v), np.asarray(v, dtype=np.float32).tobytes())
             for (digest, owner), v in self._s.vectors.items()), embedder, norm or ANY_NORM))
        return Damage(chunk_texts, texts, vectors)

    def discard_damaged(self, embedder: str, identity: Callable[[str], str] | None,
                        derivations: Collection[str] | None = None,
                        norm: VectorNorm | None = None) -> Discarded:
        damage = self._value_damage(embedder, identity, derivations, norm)
        for v in damage.vectors:
            self._s.vectors.pop((v.digest, v.embedder), None)
        for digest in damage.chunk_texts:
            self._s.texts.pop(digest, None)
            self._s.text_keys.pop(digest, None)
        for t in damage.texts:
            found = self._s.documents[(t.source, t.key)]
            if not t.current:
                self._put(t.source, t.key, replace(found, previous=None))
                continue
            # Unknown to the gates, the document is read and written again by the next sync;
            # until then its text is empty, as a SQL store's is missing (and it keeps no
            # previous text afterwards, as theirs keeps none).
            self._put(t.source, t.key, replace(
                found, stat=None, validators=None, bytes_hash="", text_hash="", previous=None,
                current=replace(found.current, text="", key=embedding_text_key(""))))
        current = sum(t.current for t in damage.texts)
        return Discarded(vectors=len(damage.vectors), chunk_texts=len(damage.chunk_texts),
                         previous=len(damage.texts) - current, current=current)

    def check_pages(self) -> str | None:
        return None  # no pages: nothing of it can be damaged below its values

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        return []  # it holds nothing twice

    def known_damage(self) -> str | None:
        return self._s.meta.get(_DAMAGE)

    def remember_damage(self, reason: str | None) -> None:
        self.set_meta(_DAMAGE, reason or "")

    def close(self) -> None:
        """Nothing to release."""


# The meta entry that remembers why the store is known to be damaged (a row, as PostgreSQL's).
_DAMAGE = "damage"


if TYPE_CHECKING:  # mypy holds MemoryStore to every role of the protocol
    _RECORDS: type[RecordStore] = MemoryStore
    _FRONTIER: type[Frontier] = MemoryStore

