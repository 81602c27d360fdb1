"""The work queue of parallel workers: batches of documents claimed with FOR UPDATE SKIP
LOCKED, and the tallies of the batches done."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from kbsync.core.plan import StoredDocument
from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import scalar
from kbsync.store.postgres.documents import DocumentTables
from kbsync.store.rows import CURRENT, MANIFEST_COLUMNS, stored_document

__all__ = ["Claim", "QueueTables"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One document of a run, claimed by this worker until its transaction ends."""

    run: str
    source: str
    key: str
    item: Mapping[str, Any]


class QueueTables(DocumentTables):
    """The work queue of :mod:`kbsync.sync.parallel`, kept in the store it fills."""

    def enqueue(self, run: str, source: str, items: Iterable[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int:
        """Add documents of a run to the queue (``vanished`` ones wait for a move or deletion)."""
        rows = [(run, source, key, state, json.dumps(item)) for key, item in items]
        with self._conn.cursor() as cur:
            for i in range(0, len(rows), 5000):
                crashpoint("queue.enqueue")
                cur.executemany("INSERT INTO work (run, source, key, state, item) "
                                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                rows[i : i + 5000])
        return len(rows)

    def abandon_runs(self) -> int:
        """Forget the queue of every run: those of coordinators that died before the end.

        Only the holder of the writer lock calls it, at the start of its run, so no
        other run is in progress; a worker still busy with a dead run's document
        finishes that one first (the delete waits for its row lock), then finds none.
        """
        crashpoint("queue.abandon_runs")
        self._write("DELETE FROM work_results")
        return self._write("DELETE FROM work")

    def open_runs(self) -> list[str]:
        """Runs that still have documents to process, oldest first."""
        return [r[0] for r in self._conn.execute(
            "SELECT run FROM work WHERE state = 'todo' GROUP BY run ORDER BY run")]

    def pending(self, run: str) -> int:
        """Documents of ``run`` not yet done (a claimed one counts until its worker commits)."""
        return int(scalar(self._conn,
            "SELECT count(*) FROM work WHERE run = %s AND state = 'todo'", (run,)))

    @contextmanager
    def claim_batch(self, run: str, limit: int) -> Iterator[list[Claim]]:
        """Lock up to ``limit`` waiting documents of ``run``, of one source, in key order, in
        a transaction: everything the worker writes inside the block commits with the
        claim, or not at all (a worker that dies releases its rows when the server ends
        its transaction). Empty when nothing is left that no one holds.

        One claim per batch, not per document: a claim and its commit are the round trips
        to the server that a worker of a first sync spends most of its time waiting on.
        """
        # Pipelined: statements whose results nobody reads (the settings, the writes, the
        # claimed rows' deletion, the commit) go to the server with the next one read.
        with self._dialect.pipeline(), self._transaction():
            # A batch's records and its rows' deletion commit together, so a commit lost in
            # a server crash loses both and the batch is simply processed again: no need to
            # wait for the disk at every batch.
            self._conn.execute("SET LOCAL synchronous_commit = off")
            crashpoint("queue.claim")
            first = self._conn.execute(
                "SELECT source FROM work WHERE run = %s AND state = 'todo' "
                "ORDER BY source, key LIMIT 1 FOR UPDATE SKIP LOCKED", (run,)).fetchone()
            rows = [] if first is None else [(first[0], key, item) for key, item in (
                self._conn.execute(
                    "SELECT key, item FROM work WHERE run = %s AND source = %s "
                    "AND state = 'todo' ORDER BY key LIMIT %s FOR UPDATE SKIP LOCKED",
                    (run, first[0], limit)))]
            yield [Claim(run, source, key, item) for source, key, item in rows]

    def finish_batch(self, run: str, source: str, keys: Sequence[str],
                     result: Mapping[str, Any]) -> None:
        """A claimed batch done (inside the claim's transaction): its rows leave the queue
        and its tally, one row for the batch, waits for the coordinator."""
        crashpoint("queue.finish")
        self._conn.execute("DELETE FROM work WHERE run = %s AND source = %s AND key = ANY(%s)",
                           (run, source, list(keys)))
        self._conn.execute("INSERT INTO work_results (run, source, result) VALUES (%s, %s, %s)",
                           (run, source, json.dumps(result)))

    def stored_many(self, source: str, keys: Sequence[str]) -> dict[str, StoredDocument]:
        """The stored documents of ``keys`` that exist, with their chunk digests (what a
        worker plans a batch against), in one query."""
        rows = self._conn.execute(
            f"SELECT {MANIFEST_COLUMNS}, ARRAY(SELECT c.digest FROM chunks c WHERE {CURRENT} "
            "ORDER BY c.idx) FROM documents d WHERE source = %s AND key = ANY(%s)",
            (source, list(keys)))
        return {r[0]: replace(stored_document(r), chunk_digests=tuple(r[-1])) for r in rows}

    def claim_vanished(self, run: str, source: str, text_hash: str,
                       derivation: str) -> StoredDocument | None:
        """A vanished document of this run with the same text, taken as the origin of a move."""
        row = self._conn.execute(
            "SELECT w.key FROM work w JOIN documents d ON d.source = w.source AND d.key = w.key "
            "WHERE w.run = %s AND w.source = %s AND w.state = 'vanished' AND d.text_hash = %s "
            "AND d.derivation = %s ORDER BY w.key LIMIT 1 FOR UPDATE OF w SKIP LOCKED",
            (run, source, text_hash, derivation)).fetchone()
        if row is None:
            return None
        crashpoint("queue.claim_vanished")
        self._conn.execute("UPDATE work SET state = 'moved' WHERE run = %s AND source = %s "
                           "AND key = %s", (run, source, row[0]))
        return self.stored(source, row[0])

    def claim_vanished_at(self, run: str, source: str, key: str) -> StoredDocument | None:
        """The vanished document of this run at ``key`` (the origin a source named for a
        rename), taken as the origin of a move; None if it did not vanish or is taken."""
        crashpoint("queue.claim_vanished")
        row = self._conn.execute(
            "UPDATE work SET state = 'moved' WHERE run = %s AND source = %s AND key = %s "
            "AND state = 'vanished' RETURNING key", (run, source, key)).fetchone()
        return None if row is None else self.stored(source, row[0])

    def vanished(self, run: str, source: str) -> list[str]:
        """Documents of this run that vanished and were not the origin of a move."""
        return [r[0] for r in self._conn.execute(
            "SELECT key FROM work WHERE run = %s AND source = %s AND state = 'vanished' "
            "ORDER BY key", (run, source))]

    def results(self, run: str, source: str) -> Iterator[dict[str, Any]]:
        """The tallies of the processed batches of one source of a run, streamed."""
        with self._transaction(), self._conn.cursor(name="kbsync_results") as cur:
            cur.itersize = 200
            cur.execute("SELECT result FROM work_results WHERE run = %s AND source = %s "
                        "ORDER BY id", (run, source))
            yield from (r[0] for r in cur)

    def end_run(self, run: str) -> None:
        """Forget the queue of a finished run."""
        crashpoint("queue.end_run")
        self._conn.execute("DELETE FROM work WHERE run = %s", (run,))
        self._conn.execute("DELETE FROM work_results WHERE run = %s", (run,))
