"""Status, verification and repair of the store's file and of what it holds twice."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

from kbsync.core.identity import embedding_text_key
from kbsync.errors import StoreError
from kbsync.model import ANY_NORM, VectorNorm
from kbsync.store import invariants
from kbsync.store.guard import REPAIR
from kbsync.store.rows import CURRENT
from kbsync.store.sql.digests import drift, drift_lines
from kbsync.store.sqlite.checks import ValueChecks
from kbsync.store.sqlite.schema import FTS_HEADING, FTS_TABLE
from kbsync.store.values import lines, summary

__all__ = ["RepairTables"]

# Where a repair keeps the readable vectors of a damaged embedding cache meanwhile.
_SALVAGED = "embeddings_salvaged"

# What the count of a repair step says, by step (the others say only that it was done).
_COUNTED = {"the chunk texts": " ({} restored from the documents' text)",
            "the digest counts": " ({} differed from a recount)"}

# The largest read-only store whose full-text index verify checks on a copy in memory.
_READ_ONLY_FTS_CHECK_LIMIT = 1 << 30


class RepairTables(ValueChecks):
    """The :class:`~kbsync.store.Maintenance` role of the SQLite store."""

    def verify(self, embedder: str, identity: Callable[[str], str] | None,
               derivations: Collection[str] | None = None,
               norm: VectorNorm | None = None) -> list[str]:
        # SQLite's own checks of the file come first: on a damaged file the logical
        # checks below may fail or mislead. (integrity_check reads every page of a
        # 100 MB store in under a second, so it always runs; see docs/reliability.md.)
        findings = self._file_findings()
        damage = [self._advised(finding) for finding in findings]
        try:
            # One read transaction: a sync committing meanwhile must not look like damage.
            with self._snapshot():
                problems = self._verify(embedder, derivations)
                values = self._value_damage(embedder, identity, derivations, norm)
        except sqlite3.DatabaseError:
            if damage:
                self.remember_damage("verify found " + "; ".join(findings))
                return damage
            raise
        if findings or values:
            self.remember_damage("; ".join(
                [*(f"verify found {finding}" for finding in findings),
                 *([summary(values)] if values else [])]))
        elif self.known_damage() is not None:
            self.remember_damage(None)  # sound now (repaired, or a good copy put back)
        return damage + problems + lines(values, norm or ANY_NORM)

    def check_pages(self) -> str | None:
        """SQLite's quick_check of every page of the file (not its indexes against their
        tables: integrity_check's extra, about twice the time): what it found, which is
        remembered as damage, or None when the file is sound."""
        try:
            rows = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(20)")]
        except sqlite3.DatabaseError as exc:
            rows = [str(exc)]
        if rows == ["ok"]:
            return None
        said = [line.strip() for row in rows for line in row.splitlines() if line.strip()]
        finding = f"the store file is damaged ({said[0]})"
        self.remember_damage(f"a sync's quick_check found {finding}")
        return finding

    def damage(self) -> list[str]:
        """What SQLite finds wrong with the file and with the full-text index, as one
        line each that says what to do (empty when both are sound)."""
        return [self._advised(finding) for finding in self._file_findings()]

    def _advised(self, finding: str) -> str:
        """A finding of :meth:`_file_findings` as verify says it: the store, what to do."""
        if finding.startswith("the full-text index"):
            return (f"{self.path}: {finding}; run `kbsync verify --repair` to rebuild it "
                    "from the chunks")
        return f"{self.path}: {finding}; {REPAIR}"

    def _file_findings(self) -> list[str]:
        """What SQLite finds wrong with the file and with the full-text index, in a few
        words each (no document named)."""
        found = []
        rows = ["ok"]
        # quick_check names the bad page where integrity_check can give up with a
        # bare "malformed"; integrity_check also compares every index with its table.
        for check in ("quick_check(20)", "integrity_check(20)"):
            try:
                rows = [str(r[0]) for r in self._db.execute(f"PRAGMA {check}")]
            except sqlite3.DatabaseError as exc:
                rows = [str(exc)]
            if rows != ["ok"]:
                break
        if rows != ["ok"]:
            said = [line.strip() for row in rows for line in row.splitlines()
                    if line.strip() and not line.startswith("***")]
            more = f" and {len(said) - 1} more" if len(said) > 1 else ""
            found.append(f"the store file is damaged ({said[0]}{more})")
        fts = self._fts_damage()
        if fts:
            found.append(f"the full-text index is damaged ({fts})")
        return found

    def _fts_damage(self) -> str | None:
        """FTS5's own integrity check of the full-text index: its finding, or None.

        The check is an INSERT, so a read-only store runs it on a copy in memory, if
        the store is small enough (else only ``integrity_check``, which reads the
        full-text table's pages too, speaks for it).
        """
        check = "INSERT INTO chunk_fts (chunk_fts) VALUES ('integrity-check')"
        db = self._db
        copy = None
        try:
            if self.read_only:
                if self.path.stat().st_size > _READ_ONLY_FTS_CHECK_LIMIT:
                    return None
                copy = sqlite3.connect(":memory:")
                self._db.backup(copy)
                db = copy
            db.execute(check)
        except sqlite3.DatabaseError as exc:
            return " ".join(str(exc).split())
        finally:
            if copy is not None:
                copy.close()
        return None

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A read transaction: every query inside sees the same committed state."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("ROLLBACK")

    def _verify(self, embedder: str, derivations: Collection[str] | None) -> list[str]:
        db = self._db
        problems = invariants.problems(
            db.execute, embedder, mark="?",
            bad_vectors="SELECT count(*) FROM embeddings WHERE length(vector) != 4 * dimension")
        # The recount's temporary table goes with the snapshot's rollback.
        return (problems + self._version_problems() + self._fts_drift()
                + drift_lines(drift(self._dialect)))

    def _version_problems(self) -> list[str]:
        """Each document has the text of its current generation, and of at most the one
        before it."""
        found = []
        for source, key, current, other in self._db.execute(
            "SELECT d.source, d.key, sum(v.generation = d.generation), "
            "sum(v.generation NOT IN (d.generation, d.generation - 1)) FROM documents d "
            "LEFT JOIN versions v ON v.doc_id = d.id GROUP BY d.id ORDER BY d.id"):
            if not current:
                found.append(f"{source}:{key}: the text of its current version is missing")
            if other:
                found.append(f"{source}:{key}: {other} text(s) of versions before the previous")
        return found

    def repair(self, rechunk: Callable[[str], Mapping[str, str]]) -> list[str]:
        """Rebuild what the store holds twice: its indexes, the full-text index (from the
        chunks), missing chunk texts (``rechunk`` maps a document's text to the digests
        and texts of its chunks) and drifted digest counts (from the chunks). What was
        done, as lines for a person.

        Damage to the tables themselves is not repaired here: only a fresh store
        built from the sources helps then (:func:`salvage_embeddings`, :func:`swap_in`).
        """
        done = []
        steps: tuple[tuple[str, Callable[[], int]], ...] = (
            ("the indexes", self._reindex),
            ("the chunk texts", lambda: self._restore_chunk_texts(rechunk)),
            ("the full-text index", self._rebuild_fts),
            ("the digest counts", self.recount_drifted),
        )
        for what, step in steps:
            try:
                count = step()
            except (StoreError, sqlite3.DatabaseError) as exc:
                # Damage in the tables themselves stops a step: then only a rebuild helps.
                reason = exc.__cause__ or exc
                done.append(f"could not rebuild {what}: {' '.join(str(reason).split())[:200]}")
                continue
            if count:
                done.append(f"rebuilt {what}" + _COUNTED.get(what, "").format(count))
        self._vectors.clear()
        return done

    def _reindex(self) -> int:
        """Every index built again from its table, if SQLite's check finds fault; 1 if so.

        An index whose pages are damaged cannot even be dropped (SQLite walks its
        pages to free them): such an index, or the full-text table, is removed from
        the schema instead, the file rewritten without it (VACUUM), and the index
        created again (the full-text table is refilled by :meth:`_rebuild_fts`).
        """
        if not self._file_damage():
            return 0
        with contextlib.suppress(StoreError), self._transaction() as db:
            db.execute("REINDEX")
        damage = self._file_damage()
        if damage:
            derived = self._damaged_derived(damage)
            if not derived:
                raise StoreError(f"{self.path}: the damage is in tables that only the sources "
                                 f"can fill again ({damage[0]})")
            if "embeddings" in derived:
                self._salvage_vectors()
            self._forget(derived)
            if "embeddings" in derived:
                with self._transaction() as db:
                    db.execute(f"INSERT INTO embeddings SELECT * FROM {_SALVAGED}")
                    db.execute(f"DROP TABLE {_SALVAGED}")
        return 1

    def _salvage_vectors(self) -> None:
        """Copy every readable row of the damaged embedding cache into a table beside it,
        which :meth:`_reindex` moves back once the damaged table is gone.

        Rows are read in rowid order; where a damaged page stops the reading, the rest
        is read from the other end, so one bad page costs only its rows (embedded again
        by the repair, as any chunk without a vector is). A batch at a time: a big cache
        is never held in memory, and no read that fails shares a transaction with a
        write (SQLite then refuses to commit it).
        """
        with self._transaction() as db:
            db.execute(f"DROP TABLE IF EXISTS {_SALVAGED}")
            db.execute(f"CREATE TABLE {_SALVAGED} (digest TEXT NOT NULL, embedder TEXT NOT NULL, "
                       "dimension INTEGER NOT NULL, vector BLOB NOT NULL, "
                       "PRIMARY KEY (digest, embedder))")
        read = ("SELECT rowid, digest, embedder, dimension, vector FROM embeddings "
                "WHERE rowid > ? AND rowid < ? ORDER BY rowid {} LIMIT 1000")
        low, high = 0, 1 << 62
        for order in ("ASC", "DESC"):
            damaged = False
            while not damaged:
                rows: list[tuple[object, ...]] = []
                try:
                    for row in self._db.execute(read.format(order), (low, high)):
                        rows.append(tuple(row))
                except sqlite3.DatabaseError:
                    damaged = True  # the rest is read from the other end (or lost)
                if not rows:
                    break
                with self._transaction() as db:
                    db.executemany(f"INSERT OR IGNORE INTO {_SALVAGED} VALUES (?, ?, ?, ?)",
                                   (row[1:] for row in rows))
                last = rows[-1][0]
                assert isinstance(last, int)
                low, high = (last, high) if order == "ASC" else (low, last)
            if not damaged:
                return

    def _file_damage(self) -> list[str]:
        return [line for line in self.damage() if "store file is damaged" in line]

    def _damaged_derived(self, damage: Sequence[str]) -> dict[str, str | None]:
        """Name -> SQL of the derived structures that hold damage: explicit indexes, the
        full-text table, the chunk texts (cut again from the documents' text) and the
        embedding cache (its readable vectors kept, the others embedded again).

        Empty when a table that only the sources can fill is damaged too. The owners
        are the b-trees of the pages the report names or, where it names none, the
        tables whose own ``quick_check`` fails.
        """
        pages = {int(n) for line in damage for n in re.findall(r"[Pp]age (\d+)", line)}
        rows = self._db.execute("SELECT name, type, sql, tbl_name FROM sqlite_schema").fetchall()
        schema = {r[0]: (r[1], r[2]) for r in rows}
        texts_indexes = [r[0] for r in rows
                         if r[1] == "index" and r[3] == "chunk_texts" and r[2] is not None]
        owners: set[str] = set()
        for page in sorted(pages):
            with contextlib.suppress(sqlite3.DatabaseError):
                owners.update(r[0] for r in self._db.execute(
                    "SELECT name FROM dbstat WHERE pageno = ?", (page,)))
        if not owners:
            for name, (kind, _) in schema.items():
                if kind != "table":
                    continue
                try:
                    sound = [r[0] for r in self._db.execute(
                        f'PRAGMA quick_check("{name}")')] == ["ok"]
                except sqlite3.DatabaseError:
                    sound = False
                if not sound:
                    owners.add(name)
        derived: dict[str, str | None] = {}
        for name in owners:
            kind, sql = schema.get(name, ("", None))
            if name.startswith("chunk_fts"):
                derived.update({n: None for n in schema if n.startswith("chunk_fts")})
            elif name in ("chunk_texts", "sqlite_autoindex_chunk_texts_1"):
                derived["sqlite_autoindex_chunk_texts_1"] = None
                derived["chunk_texts"] = schema["chunk_texts"][1]
                for index in texts_indexes:  # made again after the table they index
                    derived.pop(index, None)
                    derived[index] = schema[index][1]
            elif name in ("embeddings", "sqlite_autoindex_embeddings_1"):
                # The embedding cache: its readable vectors are kept, the rest embedded again.
                derived["sqlite_autoindex_embeddings_1"] = None
                derived["embeddings"] = schema["embeddings"][1]
            elif kind == "index" and sql is not None and name not in derived:
                derived[name] = sql
            else:
                return {}  # a table, or the index of a constraint: only a rebuild helps
        return derived

    def _forget(self, derived: Mapping[str, str | None]) -> None:
        """Remove ``derived`` from the schema, rewrite the file, create the indexes anew."""
        self._db.execute("PRAGMA writable_schema = ON")
        try:
            with self._transaction() as db:
                db.executemany("DELETE FROM sqlite_schema WHERE name = ?",
                               ((n,) for n in derived))
        finally:
            self._db.execute("PRAGMA writable_schema = OFF")
        # The connection still holds the old schema: read it again from the file.
        self._db.close()
        self._db = self._connect()
        self._configure()
        self._db.execute("VACUUM")
        with self._transaction() as db:
            for sql in derived.values():
                if sql is not None:
                    db.execute(sql)

    def _fts_drift(self) -> list[str]:
        """How the full-text table differs from the current chunks (it keeps its own copy)."""
        indexed = {r[0] for r in self._db.execute("SELECT rowid FROM chunk_fts")}
        current = {r[0] for r in self._db.execute(
            f"SELECT c.id FROM chunks c JOIN documents d ON {CURRENT}")}
        found = []
        if indexed - current:
            found.append(f"{len(indexed - current)} full-text rows of no current chunk")
        if current - indexed:
            found.append(f"{len(current - indexed)} current chunks missing from full text")
        return found

    def _rebuild_fts(self) -> int:
        """The full-text table made anew from the current chunks and their texts, if it is
        damaged or has drifted from them; 1 if so.

        FTS5's own 'rebuild' reads the table's copy of the texts, which may be what
        is damaged; dropping and refilling it depends on the chunks only.
        """
        if self._fts_damage() is None and not self._fts_drift():
            return 0
        with self._transaction() as db:
            db.execute("DROP TABLE IF EXISTS chunk_fts")
            db.execute(FTS_TABLE)
            db.execute(f"INSERT INTO chunk_fts (rowid, text, heading) SELECT c.id, t.text, "
                       f"{FTS_HEADING} FROM chunks c JOIN documents d ON {CURRENT} "
                       "JOIN chunk_texts t ON t.digest = c.digest")
        return 1

    def _restore_chunk_texts(self, rechunk: Callable[[str], Mapping[str, str]]) -> int:
        """Texts of chunks that have none, cut again from their document's current or
        previous text (the two generations a document keeps); how many."""
        rows = self._db.execute(
            "SELECT c.doc_id, group_concat(c.digest) FROM chunks c LEFT JOIN chunk_texts t "
            "ON t.digest = c.digest WHERE t.digest IS NULL GROUP BY c.doc_id").fetchall()
        restored = 0
        for doc_id, digests in rows:
            texts = [r[0] for r in self._db.execute(
                "SELECT CAST(text AS TEXT) FROM versions WHERE doc_id = ?", (doc_id,))]
            cut = {d: t for text in texts for d, t in rechunk(text).items()}
            found = [(d, cut[d]) for d in set(digests.split(",")) if d in cut]
            with self._transaction() as db:
                db.executemany("INSERT OR IGNORE INTO chunk_texts (digest, text, text_key) "
                               "VALUES (?, ?, ?)",
                               [(d, t, embedding_text_key(t)) for d, t in found])
            restored += len(found)
        return restored
