"""Peer chunks indexed in-process and searched the way kbsync's store searches its own.

The retrieval benchmarks (``run.py``, ``strategies.py``) compare kbsync's chunking with
other splitters embedded by the same model. Those splitters' chunks are indexed here, and
what makes a comparison fair is that only the chunks differ:

* vectors: kbsync's embedder, fed as a sync feeds it (ordered by estimated token count,
  64 texts per call, the embedder's own batch size inside each call); brute-force cosine
  over the L2-normalized rows, best first, ties in chunk order;
* text: an SQLite FTS5 table shaped like kbsync's (``porter unicode61``, a ``heading``
  column holding the document's title when one is given, as kbsync's store does), ranked
  by ``bm25``, the query normalized and reduced to its words as kbsync reduces it
  (:func:`kbsync.store.rows.query_terms`), OR-ed;
* hybrid: the vector and text top ``max(4k, 20)`` fused by their scores, each scaled
  between its list's last candidate (0) and best (1), with equal weights (kbsync's
  default ``[search] fusion = "scores"``);
* context windows: each hit grown over its neighbours in the same document, after then
  before, up to a token budget (:func:`kbsync.store.rows.window_span`, the function
  kbsync's store uses), a hit inside a window already returned merged into it and no
  window grown into another, from ``3k`` ranked hits (as
  :meth:`kbsync.KnowledgeBase.search` does).

Tokens are kbsync's estimate (``EstimatingCounter`` over ``scan_words``), the count a
chunk row holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking.tokens import EstimatingCounter
from kbsync.core.normalize import normalize, scan_words
from kbsync.embed import Embedder, Vectors
from kbsync.store.rows import query_terms, window_span

__all__ = ["EMBED_BATCH", "CachingEmbedder", "K", "PeerIndex", "embed_texts", "tokens"]

K = 10
EMBED_BATCH = 64  # what a sync hands the embedder per call (kbsync.sync.EMBED_BATCH)
FTS_WEIGHTS = "1.0, 2.0"  # text, heading: as kbsync's SQLite store weighs them

_COUNTER = EstimatingCounter()


@lru_cache(maxsize=1 << 20)
def tokens(text: str) -> int:
    """Estimated tokens of ``text`` (kbsync's ``EstimatingCounter``), cached by text."""
    return int(_COUNTER.count(scan_words(text)).sum())


class CachingEmbedder:
    """An embedder that computes each distinct text once per process, for every caller.

    Configurations share many chunk texts and all share the questions, so a benchmark
    run embeds each of them once. The identity is the wrapped embedder's: the vectors
    are its vectors.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[str, npt.NDArray[np.float32]] = {}
        self.computed = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def max_input_tokens(self) -> int | None:
        return self.inner.max_input_tokens

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, row in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = np.asarray(row, dtype=np.float32)
            self.computed += len(missing)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self.cache[t] for t in texts]).astype(np.float32)


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """One row per text, embedded as a sync does: by estimated length, 64 texts a call."""
    out: Vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: tokens(texts[i]))
    for start in range(0, len(order), EMBED_BATCH):
        batch = order[start : start + EMBED_BATCH]
        out[batch] = embedder.embed([texts[i] for i in batch])
    return out


class PeerIndex:
    """Chunks with the same embedder: cosine, FTS5 bm25, reciprocal rank fusion, windows.

    ``documents[i]`` names the document chunk ``i`` belongs to (chunks of one document
    in order); without it every chunk is its own document and windows are the chunk.
    """

    def __init__(self, chunks: Sequence[str], embedder: Embedder,
                 documents: Sequence[str] | None = None,
                 titles: Mapping[str, str | None] | None = None) -> None:
        self.chunks = list(chunks)
        self.embedder = embedder
        self.documents = list(documents) if documents is not None else list(
            map(str, range(len(self.chunks))))
        self.tokens = [tokens(c) for c in self.chunks]
        self.positions: list[int] = []
        self.members: dict[str, list[int]] = {}
        for i, doc in enumerate(self.documents):
            ids = self.members.setdefault(doc, [])
            self.positions.append(len(ids))
            ids.append(i)
        self.matrix = embed_texts(embedder, self.chunks)
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5 "
                        "(text, heading, tokenize = 'porter unicode61')")
        # The heading column holds the document's title, as kbsync's store fills it.
        titles = titles or {}
        self.db.executemany("INSERT INTO fts (rowid, text, heading) VALUES (?, ?, ?)",
                            ((i, c, titles.get(self.documents[i]) or "")
                             for i, c in enumerate(self.chunks)))

    def vector(self, query: str, k: int) -> list[int]:
        return [i for i, _ in self.vector_scored(query, k)]

    def vector_scored(self, query: str, k: int) -> list[tuple[int, float]]:
        scores = self.matrix @ self.embedder.embed([normalize(query).text])[0]
        # As kbsync's search: a chunk of no likeness to the query (cosine <= 0) is no hit.
        return [(int(i), float(scores[i])) for i in np.argsort(-scores, kind="stable")[:k]
                if scores[i] > 0]

    def text(self, query: str, k: int) -> list[int]:
        return [i for i, _ in self.text_scored(query, k)]

    def text_scored(self, query: str, k: int) -> list[tuple[int, float]]:
        terms = query_terms(normalize(query).text)
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self.db.execute(f"SELECT rowid, bm25(fts, {FTS_WEIGHTS}) AS rank FROM fts "
                               "WHERE fts MATCH ? ORDER BY rank LIMIT ?",
                               (match, k)).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]  # bm25() is lower-is-better

    def hybrid(self, query: str, k: int) -> list[int]:
        pool = max(4 * k, 20)
        fused: dict[int, float] = {}
        for scored in (self.vector_scored(query, pool), self.text_scored(query, pool)):
            best = max((score for _, score in scored), default=0.0)
            low = min((score for _, score in scored), default=0.0)
            for i, score in scored:
                share = (score - low) / (best - low) if best > low else 1.0
                fused[i] = fused.get(i, 0.0) + 0.5 * share
        return sorted(fused, key=lambda i: -fused[i])[:k]

    def ranked(self, query: str, k: int, mode: str) -> list[int]:
        """The best ``k`` chunk numbers for ``query`` in ``mode`` (vector, text, hybrid)."""
        method = {"vector": self.vector, "text": self.text, "hybrid": self.hybrid}[mode]
        return method(query, k)

    def windows(self, query: str, k: int, mode: str,
                context_tokens: int) -> list[tuple[int, int, int]]:
        """(hit, first, last) chunk numbers of the best ``k`` results with context windows."""
        if not context_tokens:
            return [(i, i, i) for i in self.ranked(query, k, mode)]
        results: list[tuple[int, int, int]] = []
        taken: dict[str, set[int]] = {}  # positions in the windows returned, by document
        for hit in self.ranked(query, 3 * k, mode):
            doc = self.documents[hit]
            held = taken.setdefault(doc, set())
            if self.positions[hit] in held:
                continue
            ids = self.members[doc]
            rows = [(p, 0, 0, self.tokens[i], 0) for p, i in enumerate(ids)]
            span = window_span(rows, self.positions[hit], context_tokens, held)
            assert span is not None  # the hit is a chunk of its own document
            held.update(range(span[0], span[1] + 1))
            results.append((hit, ids[span[0]], ids[span[1]]))
            if len(results) == k:
                break
        return results

    def search(self, query: str, mode: str) -> list[str]:
        """The texts of the best :data:`K` chunks (no context windows)."""
        return [self.chunks[i] for i in self.ranked(query, K, mode)]
