"""The PostgreSQL store: amcheck in verify, and driver errors as one-line StoreErrors."""

from __future__ import annotations

import pytest

from kbsync.errors import StoreError
from kbsync.store.postgres import PostgresStore


def test_verify_checks_the_unique_indexes_with_amcheck_or_from_the_rows(
        postgres_url: str) -> None:
    store = PostgresStore(postgres_url, schema="kbtest_amcheck")
    try:
        assert store.verify("model", None) == []
        # A unique index that lets a key in twice is what a damaged one does; dropping
        # the index lets the duplicate in, and the rows read without an index show it.
        store._conn.execute("ALTER TABLE chunk_texts DROP CONSTRAINT chunk_texts_pkey")
        store._conn.execute("INSERT INTO chunk_texts (digest, text) VALUES ('d', 'a'), ('d', 'b')")
        found = store.damage()
        assert len(found) == 1
        assert "chunk_texts" in found[0]
        assert "REINDEX" in found[0]
    finally:
        store._conn.execute('DROP SCHEMA IF EXISTS "kbtest_amcheck" CASCADE')
        store.close()


def test_a_driver_error_reaches_the_caller_as_one_line_naming_the_store(
        postgres_url: str) -> None:
    store = PostgresStore(postgres_url, schema="kbtest_driver_error")
    try:
        store._conn.execute("DROP TABLE runs")
        with pytest.raises(StoreError) as caught:
            store.runs()
        message = str(caught.value)
        assert "\n" not in message
        assert "runs" in message
        assert message.startswith("postgresql://")
        assert ":***@" in message or "@" not in message.split("?")[0]
    finally:
        store._conn.execute('DROP SCHEMA IF EXISTS "kbtest_driver_error" CASCADE')
        store.close()
