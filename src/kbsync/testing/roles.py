"""Fakes of the store's roles, each a few dicts: what a sync step's unit test needs, and the
parts :class:`~kbsync.testing.MemoryStore` is made of.

Every fake keeps what it holds in one :class:`MemoryState` (``_s``), as the SQL stores
keep it in one schema, so that composed into one store their parts see each other's
rows (the embedding cache sees the documents' chunks) and a batch rolls them all back.
Alone, a fake starts with nothing else stored.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import ChunkDraft, StoredDocument, host_group
from kbsync.model import SourceStat, Validators
from kbsync.store import EmbeddingCache, Erasures, Frontier, Meta, RunLog, RunRecord
from kbsync.store.filters import Filters, matches
from kbsync.store.rows import erased, held_meta_name, run_record
from kbsync.store.sql.digests import GROUP_SIZE

__all__ = [
    "MemoryEmbeddingCache",
    "MemoryErasures",
    "MemoryFrontier",
    "MemoryMeta",
    "MemoryRunLog",
    "MemoryState",
]


@dataclass(frozen=True, slots=True)
class _Version:
    """One kept version of a document: its text and its chunks (a document keeps two), and
    the checksum of the text written with it (as the SQL stores keep one)."""

    generation: int
    text: str
    chunks: tuple[ChunkDraft, ...]
    key: bytes = b""


@dataclass(frozen=True, slots=True)
class _Document:
    """A stored document: the row of the SQL stores' ``documents`` and its two versions."""

    locator: str
    media_type: str
    stat: SourceStat | None
    validators: Validators | None
    bytes_hash: str
    text_hash: str
    derivation: str
    title: str | None
    metadata: str
    missing: int
    first_seen: str
    last_seen: str
    last_changed: str
    current: _Version
    previous: _Version | None = None
    moved_from: str | None = None
    moved: str | None = None

    def stored(self, key: str) -> StoredDocument:
        """The document as a manifest hands it out (without chunk digests)."""
        validators = self.validators
        if validators is not None and validators == Validators():
            validators = None  # no column set: a SQL store reads it back as None
        return StoredDocument(key, self.stat, self.bytes_hash, self.text_hash, self.derivation,
                              self.title, self.metadata, self.current.generation, (),
                              validators, self.missing)


@dataclass(slots=True)
class _State:
    """Every row a memory store holds, as the SQL stores' tables hold them; copied by a batch."""

    documents: dict[tuple[str, str], _Document] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # chunk digest -> text
    vectors: dict[tuple[str, str], npt.NDArray[np.float32]] = field(default_factory=dict)
    boilerplate: dict[str, frozenset[str]] = field(default_factory=dict)
    frontier: dict[str, frozenset[str]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    runs: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # started, finished, json
    erasures: dict[str, str] = field(default_factory=dict)
    outbox: dict[str, None] = field(default_factory=dict)
    text_keys: dict[str, bytes] = field(default_factory=dict)  # chunk digest -> its text's key
    # (source, host group, digest) -> documents holding it; digest "": the group's documents
    # that have chunks (kbsync.store.sql.digests), kept as documents are put.
    digest_counts: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def copy(self) -> _State:
        return _State(*(dict(getattr(self, f.name)) for f in fields(self)))


class MemoryState:
    """The rows of a memory store (``_s``) and its transactions: :meth:`batch` keeps all
    or nothing of what is written inside it."""

    def __init__(self) -> None:
        self._s = _State()
        self._saved: _State | None = None

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self._saved is not None:  # already inside one: the outer batch commits
            yield
            return
        self._saved = self._s.copy()
        try:
            yield
        except BaseException:
            self._s = self._saved
            raise
        finally:
            self._saved = None

    def _put(self, source: str, key: str, doc: _Document | None) -> _Document | None:
        """Put ``doc`` at ``key`` (None: remove the document there), the digest counts kept
        with it as the SQL stores keep theirs; the document that was there."""
        old = self._s.documents.get((source, key))
        if doc is None:
            self._s.documents.pop((source, key), None)
        else:
            self._s.documents[(source, key)] = doc
        group = host_group(key)
        for held, sign in ((old, -1), (doc, 1)):
            if held is not None and held.current.chunks:
                for digest in {c.digest for c in held.current.chunks} | {GROUP_SIZE}:
                    at = (source, group, digest)
                    n = self._s.digest_counts.get(at, 0) + sign
                    if n:
                        self._s.digest_counts[at] = n
                    else:
                        self._s.digest_counts.pop(at, None)
        return old

    def _forget(self, source: str, key: str) -> bool:
        """Remove a document; whether there was one."""
        if self._put(source, key, None) is None:
            return False
        # A replacement held for it would name a document that is gone.
        self._s.meta.pop(held_meta_name(source, key), None)
        return True

    def _collect(self) -> dict[str, int]:
        """Drop the chunk texts and vectors that no kept version's chunk refers to."""
        used = {c.digest for d in self._s.documents.values()
                for v in (d.current, d.previous) if v is not None for c in v.chunks}
        texts = [d for d in self._s.texts if d not in used]
        vectors = [k for k in self._s.vectors if k[0] not in used]
        for d in texts:
            del self._s.texts[d]
            self._s.text_keys.pop(d, None)
        for k in vectors:
            del self._s.vectors[k]
        return {"chunk_texts": len(texts), "embeddings": len(vectors)}

    def _indexed(self, source: str | None = None, key: str | None = None,
                 filters: Filters | None = None,
                 ) -> Iterator[tuple[str, str, _Document, int, ChunkDraft]]:
        """The current chunks that are not boilerplate, by source, key and index (of
        documents meeting ``filters``, when given)."""
        for s, k in sorted(self._s.documents):
            if source in (None, s) and key in (None, k):
                doc = self._s.documents[(s, k)]
                skip = self._s.boilerplate.get(s, frozenset())
                if filters is not None and not matches(filters, s, k, _metadata(doc.metadata),
                                                       doc.title):
                    continue
                for i, c in enumerate(doc.current.chunks):
                    if c.digest not in skip:
                        yield s, k, doc, i, c


class MemoryMeta(MemoryState):
    """:class:`~kbsync.store.Meta` in a dict."""

    def get_meta(self, name: str) -> str | None:
        return self._s.meta.get(name)

    def set_meta(self, name: str, value: str) -> None:
        if value:
            self._s.meta[name] = value
        else:
            self._s.meta.pop(name, None)


class MemoryRunLog(MemoryState):
    """:class:`~kbsync.store.RunLog` in a dict of reports as JSON."""

    def record_run(self, started: str, finished: str, report: Mapping[str, Any]) -> int:
        run_id = max(self._s.runs, default=0) + 1
        self._s.runs[run_id] = (started, finished, json.dumps(report, sort_keys=True))
        return run_id

    def runs(self, limit: int = 50) -> list[RunRecord]:
        ids = sorted(self._s.runs, reverse=True)[:max(limit, 0)]
        return [r for r in map(self.run, ids) if r is not None]

    def run(self, run_id: int) -> RunRecord | None:
        row = self._s.runs.get(run_id)
        return None if row is None else run_record((run_id, *row))


class MemoryFrontier(MemoryState):
    """:class:`~kbsync.store.Frontier` in a dict of sets."""

    def frontier(self, source: str) -> frozenset[str]:
        return self._s.frontier.get(source, frozenset())

    def set_frontier(self, source: str, keys: Collection[str]) -> None:
        self._s.frontier[source] = frozenset(keys)


class MemoryErasures(MemoryState):
    """:class:`~kbsync.store.Erasures`: tombstones in a dict, and an erase that removes the
    documents, what only they held, and the key from every run report."""

    def add_erasure(self, pattern: str, created: str) -> None:
        self._s.erasures.setdefault(pattern, created)

    def erasures(self) -> list[tuple[str, str]]:
        return sorted(self._s.erasures.items())

    def remove_erasure(self, pattern: str) -> bool:
        return self._s.erasures.pop(pattern, None) is not None

    def erase(self, pattern: str) -> list[tuple[str, str]]:
        gone = erased(list(self._s.documents), pattern)
        with self.batch():
            for source, key in gone:
                self._forget(source, key)
                quoted = json.dumps(key)  # run reports name it too: scrubbed as the SQL stores do
                self._s.runs = {i: (a, b, r.replace(quoted, '"[erased]"'))
                                for i, (a, b, r) in self._s.runs.items()}
            self._collect()
        return gone


class MemoryEmbeddingCache(MemoryState):
    """:class:`~kbsync.store.EmbeddingCache` (and the cached vectors a mirror reads) in a
    dict of read-only arrays by (digest, embedder)."""

    def cached(self, embedder: str, digests: Collection[str]) -> set[str]:
        return {d for d in digests if (d, embedder) in self._s.vectors}

    def adopt_by_text(self, embedder: str, text_keys: Mapping[str, bytes], *,
                      write: bool = True) -> set[str]:
        holders = {embedding_text_key(text): digest for digest, text in self._s.texts.items()
                   if (digest, embedder) in self._s.vectors}
        found = {digest: holders[key] for digest, key in text_keys.items() if key in holders}
        if write:
            for digest, holder in found.items():
                self._s.vectors.setdefault((digest, embedder), self._s.vectors[(holder, embedder)])
        return set(found)

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        return {c.digest: self._s.texts[c.digest] for s, _, _, _, c in self._indexed(source)
                if (c.digest, embedder) not in self._s.vectors and c.digest in self._s.texts}

    def put_vectors(self, embedder: str,
                    vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        for digest, vector in vectors.items():
            if (digest, embedder) not in self._s.vectors:  # as INSERT OR IGNORE
                frozen = np.array(vector, dtype=np.float32)
                frozen.flags.writeable = False
                self._s.vectors[(digest, embedder)] = frozen

    def vectors(self, embedder: str,
                digests: Collection[str]) -> dict[str, npt.NDArray[np.float32]]:
        return {d: self._s.vectors[(d, embedder)] for d in digests
                if (d, embedder) in self._s.vectors}

    def embedder_dimensions(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (_, embedder), vector in self._s.vectors.items():
            out[embedder] = max(out.get(embedder, 0), int(vector.shape[0]))
        return out


def _metadata(stored: str) -> dict[str, Any]:
    """A version's metadata column as a mapping (a damaged one matches no metadata filter)."""
    try:
        value = json.loads(stored)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


if TYPE_CHECKING:  # mypy holds each fake to its role
    _META: type[Meta] = MemoryMeta
    _RUNS: type[RunLog] = MemoryRunLog
    _FRONTIER: type[Frontier] = MemoryFrontier
    _ERASURES: type[Erasures] = MemoryErasures
    _CACHE: type[EmbeddingCache] = MemoryEmbeddingCache
