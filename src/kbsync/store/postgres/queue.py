"""The work queue of parallel workers: a run's documents observed, then applied, a batch at a
time (claimed with FOR UPDATE SKIP LOCKED), and the tallies of the batches done.

A document's row goes ``todo`` (to read) -> ``observed`` (its observation waits here,
pickled, with the facts the coordinator decides on) -> ``ready`` (the coordinator has
decided on its source: the move's origin it takes, if any) -> deleted once applied. The
coordinator holds an advisory lock named after its run while it lives, so that a worker
waiting for a decision stops when the coordinator is gone.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from kbsync.core.plan import StoredDocument
from kbsync.crashpoints import crashpoint
from kbsync.store.postgres.connection import scalar
from kbsync.store.postgres.documents import DocumentTables
from kbsync.store.rows import CURRENT, MANIFEST_COLUMNS, stored_document

__all__ = ["Claim", "QueueTables"]

_PAGE = 5000
_RUN_LOCKS = 0x6B627275  # the advisory locks' first key that marks a run's coordinator
# Advisory locks of chunk digests: 60 bits of the digest, above every int4 key (hashtext's).
_DIGEST_LOCKS = 1 << 61


@dataclass(frozen=True, slots=True)
class Claim:
    """One document of a run, claimed by this worker until its transaction ends: its queued
    item, and once observed, its pickled observation."""

    run: str
    source: str
    key: str
    item: Mapping[str, Any]
    observation: bytes | None = None


class QueueTables(DocumentTables):
    """The work queue of :mod:`kbsync.sync.parallel`, kept in the store it fills."""

    def enqueue(self, run: str, source: str, items: Iterable[tuple[str, Mapping[str, Any]]],
                state: str = "todo") -> int:
        """Add documents of a run to the queue, to be read (``todo``)."""
        rows = [(run, source, key, state, json.dumps(item)) for key, item in items]
        with self._conn.cursor() as cur:
            for i in range(0, len(rows), _PAGE):
                crashpoint("queue.enqueue")
                cur.executemany("INSERT INTO work (run, source, key, state, item) "
                                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                rows[i : i + _PAGE])
        return len(rows)

    def enqueue_observed(self, run: str, source: str,
                         rows: Sequence[tuple[str, bytes, Mapping[str, Any]]]) -> None:
        """Add documents the coordinator settled without reading (its gate), observed."""
        if not rows:
            return
        crashpoint("queue.enqueue")
        self._write_many(
            "INSERT INTO work (run, source, key, state, item, observation, result) "
            "VALUES (%s, %s, %s, 'observed', '{}', %s, %s) ON CONFLICT DO NOTHING",
            [(run, source, key, blob, json.dumps(facts)) for key, blob, facts in rows])

    def begin_run(self, run: str) -> None:
        """Mark this connection as the coordinator of ``run`` (an advisory lock it holds
        until :meth:`end_run` or its end): workers waiting for its decisions stop when it
        is gone."""
        self._conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_RUN_LOCKS, run))

    def coordinator_alive(self, run: str) -> bool:
        """Whether the coordinator of ``run`` still holds its connection to the server."""
        return bool(scalar(self._conn,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = hashtext(%s)::oid AND granted",
            (_RUN_LOCKS, run)))

    def abandon_runs(self) -> int:
        """Forget the queue of every run: those of coordinators that died before the end.

        Only the holder of the writer lock calls it, at the start of its run, so no
        other run is in progress; a worker still busy with a dead run's batch
        finishes that one first (the delete waits for its row locks), then finds none.
        """
        crashpoint("queue.abandon_runs")
        self._write("DELETE FROM work_results")
        return self._write("DELETE FROM work")

    def open_runs(self) -> list[str]:
        """Runs that still have documents to read or apply, oldest first."""
        return [r[0] for r in self._conn.execute(
            "SELECT run FROM work WHERE state IN ('todo', 'ready') GROUP BY run ORDER BY run")]

    def pending(self, run: str) -> int:
        """Documents of ``run`` not yet applied (a claimed one counts until its worker
        commits)."""
        return int(scalar(self._conn,
            "SELECT count(*) FROM work WHERE run = %s AND state IN ('todo', 'observed', 'ready')",
            (run,)))

    def waiting(self, run: str) -> dict[str, int]:
        """How many documents of ``run`` are in each state of the queue."""
        return {str(state): int(n) for state, n in self._conn.execute(
            "SELECT state, count(*) FROM work WHERE run = %s "
            "AND state IN ('todo', 'observed', 'ready') GROUP BY state", (run,))}

    @contextmanager
    def claim_batch(self, run: str, limit: int, state: str = "todo") -> Iterator[list[Claim]]:
        """Lock up to ``limit`` documents of ``run`` in ``state``, of one source, in key
        order, in a transaction: everything the worker writes inside the block commits
        with the claim, or not at all (a worker that dies releases its rows when the server
        ends its transaction). Empty when nothing is left that no one holds.

        One claim per batch, not per document: a claim and its commit are the round trips
        to the server that a worker of a first sync spends most of its time waiting on.
        """
        # Pipelined: statements whose results nobody reads (the settings, the writes, the
        # claimed rows' deletion, the commit) go to the server with the next one read.
        with self._dialect.pipeline(), self._transaction():
            # A batch's records and its rows' change commit together, so a commit lost in
            # a server crash loses both and the batch is simply processed again: no need to
            # wait for the disk at every batch.
            self._conn.execute("SET LOCAL synchronous_commit = off")
            crashpoint("queue.claim")
            first = self._conn.execute(
                "SELECT source FROM work WHERE run = %s AND state = %s "
                "ORDER BY source, key LIMIT 1 FOR UPDATE SKIP LOCKED", (run, state)).fetchone()
            rows = [] if first is None else [(first[0], *row) for row in (
                self._conn.execute(
                    "SELECT key, item, observation FROM work WHERE run = %s AND source = %s "
                    "AND state = %s ORDER BY key LIMIT %s FOR UPDATE SKIP LOCKED",
                    (run, first[0], state, limit)))]
            yield [Claim(run, source, key, item, None if blob is None else bytes(blob))
                   for source, key, item, blob in rows]

    def observed_batch(self, run: str, source: str,
                       rows: Sequence[tuple[str, bytes, Mapping[str, Any]]],
                       result: Mapping[str, Any], first_key: str,
                       unchanged: Sequence[str] = ()) -> None:
        """A claimed batch read (inside the claim's transaction): each row keeps its
        observation and facts until the coordinator has decided on the source, those found
        ``unchanged`` leave the queue; the reading's tally waits for the coordinator."""
        crashpoint("queue.observed")
        if unchanged:
            self._conn.execute("DELETE FROM work WHERE run = %s AND source = %s "
                               "AND key = ANY(%s)", (run, source, list(unchanged)))
        if rows:  # one statement for the batch, not one per row
            self._conn.execute(
                "UPDATE work w SET state = 'observed', observation = r.blob, result = r.facts "
                "FROM unnest(%s::text[], %s::bytea[], %s::jsonb[]) AS r(key, blob, facts) "
                "WHERE w.run = %s AND w.source = %s AND w.key = r.key",
                ([key for key, _, _ in rows], [blob for _, blob, _ in rows],
                 [json.dumps(facts) for _, _, facts in rows], run, source))
        self._result(run, source, 1, first_key, result)

    def finish_batch(self, run: str, source: str, keys: Sequence[str],
                     result: Mapping[str, Any], first_key: str = "") -> None:
        """A claimed batch applied (inside the claim's transaction): its rows leave the
        queue and its tally, one row for the batch, waits for the coordinator."""
        crashpoint("queue.finish")
        self._conn.execute("DELETE FROM work WHERE run = %s AND source = %s AND key = ANY(%s)",
                           (run, source, list(keys)))
        self._result(run, source, 2, first_key, result)

    def _result(self, run: str, source: str, phase: int, first_key: str,
                result: Mapping[str, Any]) -> None:
        self._conn.execute("INSERT INTO work_results (run, source, phase, first_key, result) "
                           "VALUES (%s, %s, %s, %s, %s)",
                           (run, source, phase, first_key, json.dumps(result)))

    def facts(self, run: str, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The facts of each observed document of ``source``, in key order, streamed."""
        yield from self._queued(
            "SELECT key, result FROM work WHERE run = %s AND source = %s "
            "AND state = 'observed' ORDER BY key", (run, source))

    def observations(self, run: str, source: str) -> Iterator[bytes]:
        """The pickled observations of ``source`` waiting for their plan, streamed."""
        for (blob,) in self._queued(
                "SELECT observation FROM work WHERE run = %s AND source = %s "
                "AND state = 'observed' ORDER BY key", (run, source)):
            yield bytes(blob)

    def release(self, run: str, source: str, decision: Mapping[str, Any],
                notes: Mapping[str, Mapping[str, Any]]) -> None:
        """The coordinator has decided on ``source``: its observed documents are ready to
        apply, each with what the decision says of it (``notes``, by key: the origin of
        the move it is, the digests it shares with others)."""
        with self._transaction():
            crashpoint("queue.release")
            self._conn.execute(
                "INSERT INTO work (run, source, key, state, item) VALUES "
                "(%s, %s, '', 'decision', %s) ON CONFLICT (run, source, key) "
                "DO UPDATE SET item = excluded.item", (run, source, json.dumps(decision)))
            if notes:
                self._write_many(
                    "UPDATE work SET item = item || %s::jsonb "
                    "WHERE run = %s AND source = %s AND key = %s",
                    [(json.dumps(note), run, source, key) for key, note in notes.items()])
            self._conn.execute("UPDATE work SET state = 'ready' WHERE run = %s AND source = %s "
                               "AND state = 'observed'", (run, source))

    def hold_digests(self, digests: Collection[str]) -> None:
        """Hold these chunk digests until the claim's transaction ends, waiting for any
        other worker that holds one: batches sharing a new chunk embed it one after the
        other, the later finding it cached, never both. Taken in one order by every
        worker, before it writes anything, so two never wait on each other."""
        keys = sorted(_DIGEST_LOCKS | int(d[:15], 16) for d in digests)
        if keys:
            self._conn.execute("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) k",
                               (keys,))

    def decision(self, run: str, source: str) -> dict[str, Any]:
        """What the coordinator decided on ``source`` for this run (:meth:`release`)."""
        row = self._conn.execute("SELECT item FROM work WHERE run = %s AND source = %s "
                                 "AND key = '' AND state = 'decision'", (run, source)).fetchone()
        return {} if row is None else dict(row[0])

    def stored_many(self, source: str, keys: Sequence[str]) -> dict[str, StoredDocument]:
        """The stored documents of ``keys`` that exist, with their chunk digests (what a
        worker plans a batch against), in one query."""
        rows = self._conn.execute(
            f"SELECT {MANIFEST_COLUMNS}, ARRAY(SELECT c.digest FROM chunks c WHERE {CURRENT} "
            "ORDER BY c.idx) FROM documents d WHERE source = %s AND key = ANY(%s)",
            (source, list(keys)))
        return {r[0]: replace(stored_document(r), chunk_digests=tuple(r[-1])) for r in rows}

    def results(self, run: str, source: str) -> Iterator[dict[str, Any]]:
        """The tallies of the processed batches of one source of a run, streamed: those of
        reading first, then those of applying, each in the order of their keys."""
        for (result,) in self._queued(
                "SELECT result FROM work_results WHERE run = %s AND source = %s "
                "ORDER BY phase, first_key, id", (run, source)):
            yield result

    def _queued(self, sql: str, args: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        with self._transaction(), self._conn.cursor(name="kbsync_stream") as cur:
            cur.itersize = 200
            cur.execute(sql, args)
            yield from cur

    def end_run(self, run: str) -> None:
        """Forget the queue of a finished run."""
        crashpoint("queue.end_run")
        self._conn.execute("DELETE FROM work WHERE run = %s", (run,))
        self._conn.execute("DELETE FROM work_results WHERE run = %s", (run,))
        self._conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_RUN_LOCKS, run))
