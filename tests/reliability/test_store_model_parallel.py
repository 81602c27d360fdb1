"""The store state machine on the parallel driver: PostgreSQL, a coordinator and two workers.

The machine of ``test_store_model.py``, each sync run by
:func:`~kbsync.sync.parallel.sync_parallel` with two more workers draining the
queue beside the coordinator (threads with connections of their own: the source
lives in memory), and syncs killed at a random write step of any of them (the
whole process dies). After the next sync the store holds exactly the model's
documents and every invariant holds.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from kbsync.extract.registry import extractor_for
from kbsync.store.postgres import PostgresStore
from kbsync.sync import SyncOptions
from kbsync.sync.parallel import sync_parallel
from kbsync.sync.work import drain, worker_context
from tests.reliability.harness import crash_in_child, killed
from tests.store_machine import BODIES, CHUNKER, KEYS, EditedSource

EXAMPLES = int(os.environ.get("KBSYNC_PARALLEL_MODEL_EXAMPLES", "8"))
_SCHEMAS = itertools.count()


def test_the_parallel_driver_keeps_the_store_equal_to_the_model(postgres_url: str) -> None:
    schemas: list[str] = []

    class ParallelStore(EditedSource):
        def open_store(self) -> PostgresStore:
            if not hasattr(self, "schema"):
                self.schema = f"kbmodel_{os.getpid()}_{next(_SCHEMAS)}"
                schemas.append(self.schema)
            return PostgresStore(postgres_url, schema=self.schema)

        def _spawn(self, run: str, count: int) -> Callable[[], list[int]]:
            """Workers as threads, each with a connection of its own."""
            codes: list[int] = []

            def work() -> None:
                store = PostgresStore(postgres_url, schema=self.schema)
                try:
                    drain(run, [self.source],
                          worker_context(store, self.embedder, extractor_for, CHUNKER))
                    codes.append(0)
                except Exception:
                    codes.append(1)
                    raise
                finally:
                    store.close()

            threads = [threading.Thread(target=work) for _ in range(count)]
            for thread in threads:
                thread.start()

            def wait() -> list[int]:
                for thread in threads:
                    thread.join()
                return codes
            return wait

        def sync(self) -> None:
            self._sync(self.store)

        def _sync(self, store: PostgresStore | object) -> None:
            assert isinstance(store, PostgresStore)
            sync_parallel([self.source], store, self.embedder, extractor_for, CHUNKER,
                          SyncOptions(allow_mass_delete=True, accept_replacements=True),
                          workers=3, spawn=self._spawn)

        @rule(key=KEYS)
        def erase(self, key: str) -> None:
            self.source.documents.pop(key, None)
            self.store.erase(key)
            self.sync()

        @rule(edits=st.lists(st.tuples(KEYS, st.none() | BODIES), min_size=1, max_size=4),
              at=st.integers(1, 120))
        def crashing_sync(self, edits: list[tuple[str, bytes | None]], at: int) -> None:
            """Edit, then sync in a child killed at its ``at``-th write step; then sync again."""
            for key, body in edits:
                if body is None:
                    self.source.documents.pop(key, None)
                else:
                    self.source.documents[key] = body
            self.store.close()  # a connection must not cross a fork

            def doomed() -> None:
                self._sync(self.open_store())

            status = crash_in_child(doomed, crash_at=at)
            assert killed(status) or status == 0  # 0: the sync had fewer write steps
            self.store = self.open_store()
            self.sync()

    try:
        run_state_machine_as_test(ParallelStore, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=8, deadline=None))
    finally:
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for name in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
