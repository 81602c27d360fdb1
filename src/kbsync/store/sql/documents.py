"""The document writes of a plan, grouped by kind, and the kept texts, written once over a dialect.

Every write takes a group of documents, named by (source, key), and binds them as a
set of rows (:meth:`Dialect.insert <kbsync.store.sql.dialect.Dialect.insert>`,
:meth:`~kbsync.store.sql.dialect.Dialect.update_documents`): a database that binds
arrays writes each kind of change of a whole batch in one statement that waits for no
other's result, one that binds a row at a time (SQLite) runs one prepared statement
per row. A document's versions keep their texts in ``versions`` (one row per
generation) unless the backend keeps them otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import Action, DocumentPlan, DocumentVersion, host_group
from kbsync.crashpoints import crashpoint
from kbsync.store import DocumentText
from kbsync.store.rows import document_text, held_meta_name, stat_row, validator_row
from kbsync.store.sql.dialect import Column
from kbsync.store.sql.digests import DigestCounts
from kbsync.store.sql.embeddings import EmbeddingTables
from kbsync.store.writes import PlanWrites, WriteKind, write_kind

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

__all__ = ["CHUNK_COLUMNS", "VERSION_COLUMNS", "DocumentTables"]

#: The columns of a document that a version sets, its key first.
VERSION_COLUMNS: tuple[Column, ...] = (
    ("key", "text"), ("locator", "text"), ("media_type", "text"), ("size", "bigint"),
    ("mtime_ns", "bigint"), ("inode", "bigint"), ("racy", "boolean"), ("etag", "text"),
    ("last_modified", "text"), ("bytes_hash", "text"), ("text_hash", "text"),
    ("derivation", "text"), ("title", "text"), ("metadata", "text"))

#: The columns of a chunk row, with its document's key in front.
CHUNK_COLUMNS: tuple[Column, ...] = (
    ("key", "text"), ("idx", "integer"), ("digest", "text"), ("section", "integer"),
    ("heading", "text"), ("start", "integer"), ("end", "integer"), ("tokens", "integer"),
    ("boundary", "text"))

_AT = {name: i for i, (name, _) in enumerate(VERSION_COLUMNS)}

_STAT_COLUMNS: tuple[Column, ...] = (
    ("key", "text"), ("size", "bigint"), ("mtime_ns", "bigint"), ("inode", "bigint"),
    ("racy", "boolean"), ("etag", "text"), ("last_modified", "text"))

_TEXT_COLUMNS: tuple[Column, ...] = (("key", "text"), ("text_key", "bytea"), ("text", "text"))

# A new version's row: the version's columns, then its source and times.
_NEW_COLUMNS: tuple[Column, ...] = (
    *VERSION_COLUMNS, ("source", "text"), ("generation", "integer"), ("first_seen", "text"),
    ("last_seen", "text"), ("last_changed", "text"))

# A new version of a known document goes one generation up and keeps its first_seen.
_NEW_VERSION = ("ON CONFLICT (source, key) DO UPDATE SET "
                + ", ".join(f'"{n}" = excluded."{n}"' for n, _ in VERSION_COLUMNS[1:])
                + ", generation = documents.generation + 1, missing = 0, "
                "last_seen = excluded.last_seen, last_changed = excluded.last_changed")

# A chunk's document (its id and current generation) by the key in front of its row.
_OF_DOCUMENT = (("doc_id", "id"), ("generation", "generation"))
_CHUNK_TEXT_COLUMNS: tuple[Column, ...] = (("digest", "text"), ("text", "text"),
                                           ("text_key", "bytea"))


def _rows(columns: Sequence[Column],
          docs: Sequence[tuple[str, DocumentVersion]]) -> list[tuple[object, ...]]:
    """The values of ``columns`` (of :data:`VERSION_COLUMNS`) of each (key, version)."""
    every = len(columns) == len(VERSION_COLUMNS)
    at = [_AT[name] for name, _ in columns]
    out: list[tuple[object, ...]] = []
    for key, v in docs:
        row = (key, v.locator, v.media_type, *stat_row(v.stat), *validator_row(v.validators),
               v.bytes_hash, v.text_hash, v.derivation, v.title, v.metadata)
        out.append(row if every else tuple(row[i] for i in at))
    return out


class DocumentTables(EmbeddingTables, DigestCounts, PlanWrites):
    """The writes of :meth:`~kbsync.store.Manifest.apply` and the kept texts; each change of
    a document's current chunks noted for the digest counts (:mod:`~kbsync.store.sql.digests`)."""

    _group: _Group | None = None  # the applies waiting for the end of a batch, in one
    _texts_pending: dict[str, tuple[str, bytes]]  # digest: (text, text key), to commit

    def apply(self, source: str, doc: DocumentPlan,
              vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str, now: str,
              outbox: Collection[str] = ()) -> None:
        if not doc.writes:
            return
        group = self._group
        if group is None or outbox:
            self._apply_documents(source, [doc], vectors, embedder, now, outbox)
            return
        if not group.takes(source, embedder, now, doc):  # an empty group takes none
            self._write_group()
            group = self._group = _Group(source, embedder, now)
        group.add(doc, vectors)

    @contextmanager
    def _grouping(self) -> Iterator[None]:
        """Inside a batch: the documents applied wait, and are written at its end as one
        group (a statement per kind of write for the lot, not one per document), in the
        batch's transaction. Nothing reads the store between a batch's applies, and a
        failure fails the whole batch either way."""
        if self._group is not None:  # a batch inside a batch: the outer one writes
            yield
            return
        self._group = _Group("", "", "")
        try:
            yield
            self._write_group()
        finally:
            self._group = None

    def _write_group(self) -> None:
        """Write the applies that wait, and start an empty group."""
        group = self._group
        if group is not None and group.docs:
            self._group = _Group("", "", "")
            self._apply_documents(group.source, group.docs, group.vectors, group.embedder,
                                  group.now)

    def _apply_documents(self, source: str, docs: Sequence[DocumentPlan],
                         vectors: Mapping[str, npt.NDArray[np.float32]], embedder: str,
                         now: str, outbox: Collection[str] = ()) -> None:
        """Apply the plans of ``docs`` and their new vectors in one transaction (or the
        batch's); ``outbox`` ids are recorded in it."""
        self._invalidate()
        with self._applying():
            self._insert_vectors(embedder, vectors)
            if outbox:
                crashpoint("store.write_outbox")
                self._dialect.insert("outbox", (("vector_id", "text"),),
                                     [(i,) for i in sorted(outbox)],
                                     conflict="ON CONFLICT DO NOTHING", order="vector_id")
            self._write_plans(source, [d for d in docs if d.writes], now)

    def _write_plans(self, source: str, docs: Sequence[DocumentPlan], now: str) -> None:
        """The documents' writes, a kind at a time: moves first (a new version may go to the
        key one frees), deletions last."""
        if len(docs) == 1:  # one document's apply: its own kind only
            kind = write_kind(docs[0])
            if kind is WriteKind.VERSION:
                self._write_versions(source, docs, now)
                return
        kinds: dict[WriteKind, list[DocumentPlan]] = {kind: [] for kind in WriteKind}
        for doc in sorted(docs, key=lambda d: d.key):
            kinds[write_kind(doc)].append(doc)
        versions = self._moves(source, kinds[WriteKind.MOVE], now) + kinds[WriteKind.VERSION]
        if versions:
            self._write_versions(source, versions, now)
        if kinds[WriteKind.RECHUNK]:
            self._rechunks(source, kinds[WriteKind.RECHUNK], now)
        if kinds[WriteKind.REFRESH]:
            self._refreshes(source, kinds[WriteKind.REFRESH], now)
        if kinds[WriteKind.DELETE]:
            self._deletes(source, [d.key for d in kinds[WriteKind.DELETE]])

    # The single-document writes of PlanWrites, as groups of one.

    def _delete(self, source: str, key: str) -> None:
        self._deletes(source, [key])

    def _move(self, source: str, doc: DocumentPlan, now: str) -> None:
        self._write_plans(source, [doc], now)

    def _refresh(self, source: str, doc: DocumentPlan, now: str) -> None:
        self._refreshes(source, [doc], now)

    def _rechunk(self, source: str, doc: DocumentPlan, now: str) -> None:
        self._rechunks(source, [doc], now)

    def _write_version(self, source: str, doc: DocumentPlan, now: str) -> None:
        self._write_versions(source, [doc], now)

    # -- each kind of change, for a group of documents ------------------------------------

    def _deletes(self, source: str, keys: Sequence[str]) -> None:
        """Remove the documents, their chunks, texts and held replacements and schedules."""
        self._count_stored(source, keys, -1)
        self._dropping_chunks(source, keys)
        crashpoint("store.delete_document")
        sql = self._dialect
        for listed, args in sql.any_of("key", keys):
            sql.send(f"DELETE FROM documents WHERE source = ? AND {listed}", (source, *args))
            sql.send(f"DELETE FROM schedules WHERE source = ? AND {listed}", (source, *args))
        # A replacement held for one would name a document that is gone.
        for listed, args in sql.any_of("name", [held_meta_name(source, k) for k in keys]):
            sql.send(f"DELETE FROM meta WHERE {listed}", args)

    def _moves(self, source: str, docs: Sequence[DocumentPlan],
               now: str) -> list[DocumentPlan]:
        """Give each record at ``previous_key`` its new key (the same text keeps its
        last_changed); the documents whose new version is still to be written: those
        edited, and those whose origin is gone (then they are new)."""
        versions = []
        retitled = []
        for doc in docs:
            v = doc.version
            assert v is not None
            assert doc.previous_key is not None
            crashpoint("store.move_document")
            moved = self._dialect.returning(
                "UPDATE documents SET key = ?, locator = ?, media_type = ?, size = ?, "
                "mtime_ns = ?, inode = ?, racy = ?, etag = ?, last_modified = ?, "
                "bytes_hash = ?, title = ?, metadata = ?, missing = 0, last_seen = ? "
                "WHERE source = ? AND key = ? RETURNING id",
                (doc.key, v.locator, v.media_type, *stat_row(v.stat),
                 *validator_row(v.validators), v.bytes_hash, v.title, v.metadata, now,
                 source, doc.previous_key))
            if moved is not None:
                self._dialect.send(
                    "INSERT INTO moves (doc_id, moved_from, moved) VALUES (?, ?, ?) "
                    "ON CONFLICT (doc_id) DO UPDATE SET moved_from = excluded.moved_from, "
                    "moved = excluded.moved", (moved[0], doc.previous_key, now))
                before, after = host_group(doc.previous_key), host_group(doc.key)
                if before != after:  # its chunks now count for another host
                    self._count_stored(source, [doc.key], -1, group=before)
                    self._count_stored(source, [doc.key], 1, group=after)
            if moved is None or doc.edited:
                versions.append(doc)
            else:
                retitled.append(doc.key)
        if retitled:
            self._retitled(source, retitled)
        return versions

    def _refreshes(self, source: str, docs: Sequence[DocumentPlan], now: str) -> None:
        """Refresh the stat, validators and metadata of documents whose text is the same."""
        crashpoint("store.refresh_document")
        sql = self._dialect
        stats = [(d.key, *stat_row(d.stat), *validator_row(d.validators))
                 for d in docs if d.version is None]  # gate 2 or a 304
        if stats:
            sql.update_documents(source, _STAT_COLUMNS, stats, "missing = 0")
        versions = [(d.key, d.version) for d in docs if d.version is not None]
        if versions:
            # The same text: its hash, derivation and when it last changed stay.
            columns = tuple(c for c in VERSION_COLUMNS if c[0] not in ("text_hash", "derivation"))
            sql.update_documents(source, columns, _rows(columns, versions),
                                 "missing = 0, last_seen = ?", (now,))
            self._retitled(source, [key for key, _ in versions])

    def _rechunks(self, source: str, docs: Sequence[DocumentPlan], now: str) -> None:
        """The same texts in new chunks: the current generation's chunks are replaced, so
        the text, the previous text and when it last changed stay as they were."""
        versions = _versions(docs)
        keys = [key for key, _ in versions]
        self._count_stored(source, keys, -1)
        self._dropping_chunks(source, keys)
        crashpoint("store.write_document")
        sql = self._dialect
        columns = tuple(c for c in VERSION_COLUMNS if c[0] != "text_hash")
        sql.update_documents(source, columns, _rows(columns, versions),
                             "missing = 0, last_seen = ?", (now,))
        crashpoint("store.drop_old_chunks")
        for listed, args in sql.any_of("key", keys):
            sql.send("DELETE FROM chunks WHERE (doc_id, generation) IN (SELECT id, generation "
                     f"FROM documents WHERE source = ? AND {listed})", (source, *args))
        self._write_chunks(source, versions)

    def _write_versions(self, source: str, docs: Sequence[DocumentPlan], now: str) -> None:
        """New versions: a new document starts at generation 1, a known one goes one
        generation up and keeps its first_seen; each keeps two generations."""
        versions = _versions(docs)
        # What a document had before goes (a new one had nothing: no statement looks).
        known = [d.key for d in docs if d.action is not Action.NEW]
        if known:
            self._count_stored(source, known, -1)
            self._dropping_chunks(source, known)
        crashpoint("store.write_document")
        sql = self._dialect
        sql.insert("documents", _NEW_COLUMNS,
                   [(*row, source, 1, now, now, now) for row in _rows(VERSION_COLUMNS, versions)],
                   conflict=_NEW_VERSION, order="key")
        crashpoint("store.drop_old_chunks")
        for listed, args in sql.any_of("key", known):
            sql.send(f"DELETE FROM chunks WHERE doc_id IN (SELECT id FROM documents WHERE "
                     f"source = ? AND {listed}) AND generation < (SELECT d.generation - 1 "
                     "FROM documents d WHERE d.id = chunks.doc_id)", (source, *args))
        crashpoint("store.write_text")
        self._write_texts(source, [(key, v.text) for key, v in versions], known)
        self._write_chunks(source, versions)

    def _write_chunks(self, source: str, versions: Sequence[tuple[str, DocumentVersion]]) -> None:
        """The current generation's chunks of the (key, version) documents, and their texts
        (shared rows, written at the commit: :meth:`_add_chunk_texts`)."""
        sql = self._dialect
        self._add_chunk_texts((c.digest, c.text, c.embedding_key)
                              for _, v in versions for c in v.chunks)
        rows = [(key, i, c.digest, c.section, c.heading, c.start, c.end, c.tokens, c.boundary)
                for key, v in versions for i, c in enumerate(v.chunks)]
        if rows:
            crashpoint("store.write_chunks")
            sql.insert("chunks", CHUNK_COLUMNS, rows, source=source, document=_OF_DOCUMENT)
        self._count_stored(source, [key for key, v in versions if v.chunks], 1)
        self._chunks_written(source, versions)

    def _add_chunk_texts(self, rows: Iterable[tuple[str, str, bytes]]) -> None:
        """Add (digest, text, text key) rows to the chunk texts that documents share (a row
        already there stays), at the commit of the transaction that adds them.

        Writers at once on one store (PostgreSQL's workers, Ray's store actors) adding
        the same new text each wait for the other's uncommitted row, and two adding two
        shared texts in opposite orders waited for each other: a deadlock. So whatever a
        transaction's documents add (a batch's group, one document's apply, several
        applies in one transaction) is kept here and written just before it commits
        (:meth:`_before_commit`), in one statement in digest order: every writer waits in
        the same order, never in a cycle, as the digest counts do. Chunk texts are only
        written by a plan's apply, always in a transaction.
        """
        self._texts_pending.update((d, (t, k)) for d, t, k in rows)

    def _before_begin(self) -> None:
        super()._before_begin()
        self._texts_pending = {}  # what a rolled back transaction kept goes

    def _before_commit(self) -> None:
        pending, self._texts_pending = self._texts_pending, {}
        if pending:
            crashpoint("store.write_chunk_texts")
            self._dialect.insert("chunk_texts", _CHUNK_TEXT_COLUMNS,
                                 [(d, t, k) for d, (t, k) in sorted(pending.items())],
                                 conflict="ON CONFLICT DO NOTHING", order="digest")
        super()._before_commit()

    # -- kept texts: one row per generation in ``versions`` (a backend may keep them
    # otherwise, and override these) ------------------------------------------------------

    def _write_texts(self, source: str, texts: Sequence[tuple[str, str]],
                     known: Sequence[str]) -> None:
        """Keep the (key, text) of each document's new current version, and no version
        before its previous one (of the ``known`` documents: the others are new)."""
        sql = self._dialect
        for listed, args in sql.any_of("key", known):
            sql.send(f"DELETE FROM versions WHERE doc_id IN (SELECT id FROM documents WHERE "
                     f"source = ? AND {listed}) AND generation < (SELECT d.generation - 1 "
                     "FROM documents d WHERE d.id = versions.doc_id)", (source, *args))
        self._insert_texts(source, texts)

    def _insert_texts(self, source: str, texts: Sequence[tuple[str, str]]) -> None:
        """Insert the texts of the documents' current generation, each with its checksum,
        which verify compares it with."""
        self._dialect.insert("versions", _TEXT_COLUMNS,
                             [(k, embedding_text_key(t), t) for k, t in texts], source=source,
                             document=_OF_DOCUMENT)

    def document(self, key: str, source: str | None = None, *,
                 previous: bool = True) -> DocumentText | None:
        text = self._dialect.as_text
        before = text("p.text") if previous else "NULL"
        sql = (f"SELECT d.source, d.key, d.title, {text('t.text')}, {before}, d.generation, "
               "d.last_changed, m.moved_from, m.moved, d.metadata FROM documents d JOIN versions t "
               "ON t.doc_id = d.id AND t.generation = d.generation LEFT JOIN versions p "
               "ON p.doc_id = d.id AND p.generation = d.generation - 1 "
               "LEFT JOIN moves m ON m.doc_id = d.id WHERE d.key = ?")
        args: tuple[str, ...] = (key,)
        if source is not None:
            sql, args = sql + " AND d.source = ?", (key, source)
        row = self._dialect.one(sql + " ORDER BY d.id LIMIT 1", args)
        return None if row is None else document_text(row)

    def text_pieces(self, source: str, key: str) -> Iterator[str]:
        row = self._dialect.one(
            f"SELECT {self._dialect.as_text('t.text')} FROM documents d JOIN versions t "
            "ON t.doc_id = d.id AND t.generation = d.generation WHERE d.source = ? AND d.key = ?",
            (source, key))
        if row is not None:
            yield row[0]



@dataclass
class _Group:
    """Documents of one source applied in a batch and not yet written, with their new
    vectors: a group is written at once when no two of them name the same document."""

    source: str
    embedder: str
    now: str
    docs: list[DocumentPlan] = field(default_factory=list)
    vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)  # the keys its documents write or free

    def takes(self, source: str, embedder: str, now: str, doc: DocumentPlan) -> bool:
        """Whether ``doc`` can be written with this group (the same source, embedder and
        time, and no key another of its documents writes or frees)."""
        return ((source, embedder, now) == (self.source, self.embedder, self.now)
                and doc.key not in self.names
                and (doc.previous_key is None or doc.previous_key not in self.names))

    def add(self, doc: DocumentPlan, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self.docs.append(doc)
        self.vectors.update(vectors)
        self.names.add(doc.key)
        if doc.previous_key is not None:
            self.names.add(doc.previous_key)


def _versions(docs: Sequence[DocumentPlan]) -> list[tuple[str, DocumentVersion]]:
    """The (key, version) of each document: the plan's key (a move's version is written
    under its new key)."""
    out = []
    for d in docs:
        assert d.version is not None
        out.append((d.key, d.version))
    return out
