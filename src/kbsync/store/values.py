"""Checks of stored values against what they commit to, shared by every store's verify.

The invariants (:mod:`kbsync.store.invariants`) check how rows are linked; these
check what the rows hold, since damage inside a value (a byte overwritten in a
vector, a chunk text or a kept document text) breaks no link:

- a chunk text against the key stored with it (:func:`~kbsync.core.identity.embedding_text_key`,
  written with the text) and, for chunks of documents made with the current
  settings, against its digest (the chunk identity under the current chunker);
- each kept version's text (the current and the previous) against the checksum
  written with it (the same key of its text);
- each cached vector finite, and those of the current embedder of its norm
  (:class:`~kbsync.model.VectorNorm`, within :data:`~kbsync.model.NORM_TOLERANCE`).

A store streams its rows into these functions (never all of a big store at once)
and gets back what is damaged, which its verify words as lines (:func:`lines`) and
its repair discards so that it can be made again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from kbsync.core.identity import embedding_text_key_of
from kbsync.model import ANY_NORM, NORM_TOLERANCE, VectorNorm

__all__ = [
    "LISTED",
    "Damage",
    "DamagedText",
    "DamagedVector",
    "damaged_chunk_texts",
    "damaged_texts",
    "damaged_vectors",
    "lines",
    "sound_sql",
    "summary",
]

LISTED = 20
"""Damaged values of each kind named one to a line; the others are counted in one more."""

# Vectors read and checked at once: enough for NumPy to pay, little memory.
_VECTOR_BATCH = 4096


@dataclass(frozen=True, slots=True)
class DamagedText:
    """A kept document text that does not match its checksum."""

    source: str
    key: str
    generation: int
    current: bool


@dataclass(frozen=True, slots=True)
class DamagedVector:
    """A cached vector that cannot be right: ``norm`` is its L2 norm (NaN or infinite when
    a component is)."""

    digest: str
    embedder: str
    norm: float


@dataclass(frozen=True, slots=True)
class Damage:
    """The damaged values of a store: chunk texts (by digest), kept texts, vectors."""

    chunk_texts: tuple[str, ...] = ()
    texts: tuple[DamagedText, ...] = ()
    vectors: tuple[DamagedVector, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.chunk_texts or self.texts or self.vectors)


def damaged_chunk_texts(rows: Iterable[Sequence[object]],
                        identity: Callable[[str], str] | None) -> Iterator[str]:
    """The digests of chunk texts that are damaged, from rows of (digest, text, key,
    whether the digest is the text's identity under ``identity``).

    A text whose key does not match was changed after it was written (or its key
    was); one whose identity does not match, though its key does, is not the text of
    its digest. A row without a key (none was written) is checked by identity only.
    """
    for digest, text, key, checkable in rows:
        data = _utf8(text)
        changed = key is not None and embedding_text_key_of([data]) != _utf8(key)
        if changed or (checkable and identity is not None
                       and identity(data.decode("utf-8", "replace")) != digest):
            yield str(digest)


def damaged_texts(rows: Iterable[Sequence[object]]) -> Iterator[DamagedText]:
    """Kept texts that do not match their checksum, from rows of (source, key, generation,
    whether it is the current version, text, checksum); a row without a checksum is
    not checked."""
    for source, key, generation, current, text, checksum in rows:
        if checksum is not None and embedding_text_key_of([_utf8(text)]) != _utf8(checksum):
            yield DamagedText(str(source), str(key), _int(generation), bool(current))


def damaged_vectors(rows: Iterable[Sequence[object]], embedder: str,
                    norm: VectorNorm) -> Iterator[DamagedVector]:
    """The cached vectors that cannot be right, from rows of (digest, embedder, dimension,
    vector bytes as float32).

    Every vector must be finite; ``embedder``'s must also have its ``norm``. A vector
    whose size is not its dimension is left to the invariants, which report it.
    """
    batch: list[tuple[str, str, bytes]] = []
    for digest, owner, dimension, blob in rows:
        data = _utf8(blob)
        if len(data) == 4 * _int(dimension):
            batch.append((str(digest), str(owner), data))
        if len(batch) == _VECTOR_BATCH:
            yield from _unsound(batch, embedder, norm)
            batch = []
    yield from _unsound(batch, embedder, norm)


def _unsound(batch: list[tuple[str, str, bytes]], embedder: str,
             norm: VectorNorm) -> Iterator[DamagedVector]:
    import numpy as np

    by_shape: dict[tuple[str, int], list[int]] = {}
    for n, (_, owner, data) in enumerate(batch):
        by_shape.setdefault((owner, len(data)), []).append(n)
    for (owner, _), rows in by_shape.items():
        matrix = np.frombuffer(b"".join(batch[n][2] for n in rows), dtype=np.float32)
        matrix = matrix.reshape(len(rows), -1).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        wrong = (norm if owner == embedder else ANY_NORM).unsound(norms)
        for at in np.flatnonzero(wrong).tolist():
            yield DamagedVector(batch[rows[at]][0], owner, float(norms[at]))


def _utf8(value: object) -> bytes:
    """A column's value as bytes: a text (as PostgreSQL hands it) in UTF-8, bytes as they
    are (SQLite hands texts cast to BLOB: a damaged one need not be UTF-8)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"an integer column holds {type(value).__name__}")
    return value


def lines(damage: Damage, norm: VectorNorm) -> list[str]:
    """What verify says of ``damage``: one line per value, at most :data:`LISTED` of each
    kind, then one line counting the rest."""
    found: list[str] = []
    found += _listed([f"chunk {d[:12]}: its digest does not match its text (damaged)"
                      for d in damage.chunk_texts], "chunk texts")
    found += _listed([f"{t.source}:{t.key}: the text of its "
                      f"{'current' if t.current else 'previous'} version (generation "
                      f"{t.generation}) does not match its checksum (damaged)"
                      for t in damage.texts], "document texts")
    found += _listed([f"vector of chunk {v.digest[:12]} ({v.embedder}): "
                      + (f"norm {v.norm:.6g}, where the embedder's is {norm.describe()}"
                         if math.isfinite(v.norm) else "not finite") + " (damaged)"
                      for v in damage.vectors], "vectors")
    return found


def _listed(found: list[str], what: str) -> list[str]:
    if len(found) <= LISTED:
        return found
    return [*found[:LISTED], f"and {len(found) - LISTED:,} more damaged {what}"]


def summary(damage: Damage) -> str:
    """The damage in a few words and counts, naming no document (it is kept in a file
    beside the store, which an erasure must not leave a key in)."""
    parts = [f"{len(values):,} {what}" for values, what in (
        (damage.chunk_texts, "chunk texts"), (damage.texts, "document texts"),
        (damage.vectors, "vectors")) if values]
    return "verify found damaged values: " + ", ".join(parts)


def sound_sql(norm: VectorNorm, column: str) -> str:
    """A SQL condition that holds when the L2 norm in ``column`` is right for ``norm``
    (the stores that keep vectors in SQL check it there: a non-finite vector cannot be
    stored in pgvector)."""
    if norm.length is None:
        return "TRUE"
    near = f"abs({column} - {norm.length!r}) <= {NORM_TOLERANCE * norm.length!r}"
    return f"({near} OR {column} = 0)" if norm.zero else f"({near})"
