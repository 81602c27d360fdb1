"""The crash scenarios on the parallel driver: knowledge bases in PostgreSQL databases.

Each copy of a knowledge base (the reference, the state before each step, the
copy a crash is tried on) has a database of its own, so the state before a step
is cloned exactly and cheaply with ``CREATE DATABASE … TEMPLATE``. The dumps
here are what a PostgreSQL store means, free of row ids, timestamps, inodes and
absolute paths, like :func:`tests.reliability.harness.dump` for SQLite.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.store.postgres import PostgresStore
from kbsync.sync.listing import ROOT_PREFIX
from tests.reliability.harness import Scenario, clone, own_root

__all__ = [
    "PARALLEL",
    "SCHEMA",
    "WORKERS",
    "Databases",
    "ParallelScenario",
    "clone_kb",
    "content",
    "logical_dump",
    "use_database",
]

SCHEMA = "kb"
WORKERS = 2


def database_url(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def use_database(root: Path, url: str) -> None:
    """Point the knowledge base in ``root`` at the store in database ``url`` (schema ``kb``)."""
    file = root / "kbsync.toml"
    text = file.read_text(encoding="utf-8")
    section = f'[store]\nurl = "{url}"\nschema = "{SCHEMA}"\n'
    text, found = re.subn(r"\[store\]\n(path|url) = [^\n]*\n(schema = [^\n]*\n)?",
                          lambda _: section, text)
    assert found == 1, "no [store] table in kbsync.toml"
    file.write_text(text, encoding="utf-8")


class Databases:
    """The databases of one replay on a server, named after a prefix; dropped at the end."""

    def __init__(self, url: str, prefix: str) -> None:
        import psycopg

        self.url, self.prefix = url, prefix
        self._conn = psycopg.connect(url, autocommit=True)
        self._made: list[str] = []

    def url_of(self, name: str) -> str:
        return database_url(self.url, f"{self.prefix}_{name}")

    def create(self, name: str, template: str | None = None) -> str:
        """A new database (empty, or a copy of ``template``, which nobody may be using)."""
        full = f"{self.prefix}_{name}"
        self.drop(name)
        like = f' TEMPLATE "{self.prefix}_{template}"' if template else ""
        self._conn.execute(f'CREATE DATABASE "{full}"{like}')
        self._made.append(full)
        return self.url_of(name)

    def drop(self, name: str) -> None:
        self._conn.execute(f'DROP DATABASE IF EXISTS "{self.prefix}_{name}" WITH (FORCE)')

    def close(self) -> None:
        for full in self._made:
            self._conn.execute(f'DROP DATABASE IF EXISTS "{full}" WITH (FORCE)')
        self._conn.close()


def clone_kb(src: Path, dst: Path, databases: Databases, src_db: str, dst_db: str) -> None:
    """A copy of a knowledge base and of its database (its source files hard links)."""
    clone(src, dst)
    url = databases.create(dst_db, template=src_db)
    use_database(dst, url)
    store = PostgresStore(url, schema=SCHEMA)
    try:
        own_root(store, dst)
    finally:
        store.close()


def _sync(root: Path) -> None:
    with KnowledgeBase.open(root) as kb:
        kb.sync(allow_mass_delete=True, workers=WORKERS)


@dataclass(frozen=True)
class ParallelScenario(Scenario):
    """The steps of :class:`~tests.reliability.harness.Scenario`, each sync with workers."""

    @property
    def steps(self) -> tuple[tuple[str, Callable[[Path], None], Callable[[Path], None]], ...]:
        return tuple((name, change, _sync if operation != self._erase else operation)
                     for name, change, operation in super().steps)


# Smaller than the single driver's: each sync starts a worker process.
PARALLEL = ParallelScenario(documents=16, edits=5, deletes=3, adds=3, renames=2)


_KEY = "SELECT id, source, key FROM documents"


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{SCHEMA}", public')
        return conn.execute(sql).fetchall()


def logical_dump(url: str) -> dict[str, Any]:
    """Everything a PostgreSQL store holds but its run reports, without ids or paths.

    Documents, both chunk generations, texts with their previous version, chunk
    texts, vectors, boilerplate, meta, erasures, the outbox, the frontier and
    the work queue (empty once a run ended): a crashed history must leave all of
    it as an uncrashed one does.
    """
    key_of = {r[0]: (r[1], r[2]) for r in _query(url, _KEY)}
    return {
        "documents": sorted(_query(url,
            "SELECT source, key, media_type, size, bytes_hash, text_hash, derivation, title, "
            "metadata, status, generation, missing FROM documents")),
        "texts": sorted((*key_of[d], t, p) for d, t, p in _query(url,
            "SELECT doc_id, text, previous FROM texts")),
        "chunks": sorted((*key_of[d], *rest) for d, *rest in _query(url,
            'SELECT doc_id, generation, idx, digest, section, heading, start, "end", tokens, '
            "boundary FROM chunks")),
        "chunk_texts": sorted(_query(url, "SELECT digest, text FROM chunk_texts")),
        "vectors": sorted((d, e, n, hashlib.sha256(v.encode()).hexdigest()) for d, e, n, v in
                          _query(url, "SELECT digest, embedder, dimension, vector::text "
                                      "FROM embeddings")),
        "boilerplate": sorted(_query(url, "SELECT source, digest FROM boilerplate")),
        "digest_counts": sorted(_query(url, "SELECT source, grp, digest, documents "
                                            "FROM digest_counts")),
        "meta": _meta(url),
        "erasures": sorted(_query(url, "SELECT pattern FROM erasures")),
        "outbox": sorted(_query(url, "SELECT vector_id FROM outbox")),
        "frontier": sorted(_query(url, "SELECT source, key FROM frontier")),
        "work": sorted(_query(url, "SELECT run, source, key, state FROM work")),
    }


def runs(url: str) -> int:
    return int(_query(url, "SELECT count(*) FROM runs")[0][0])


def content(url: str) -> dict[str, Any]:
    """What the documents are now, whatever history led there: documents, their current
    text and chunks, the chunk texts and vectors those use, boilerplate, meta, queue.

    Two stores synced from the same files through different histories (a fresh one,
    one killed a hundred times) must agree on it; generations and previous texts
    are history and differ.
    """
    current = ("JOIN chunks c ON c.doc_id = d.id AND c.generation = d.generation")
    return {
        "documents": sorted(_query(url,
            "SELECT d.source, d.key, d.media_type, d.size, d.bytes_hash, d.text_hash, "
            "d.derivation, d.title, d.metadata, d.status, d.missing, t.text FROM documents d "
            "JOIN texts t ON t.doc_id = d.id")),
        "chunks": sorted(_query(url,
            "SELECT d.source, d.key, c.idx, c.digest, c.section, c.heading, c.start, c.\"end\", "
            f"c.tokens, c.boundary FROM documents d {current}")),
        "chunk_texts": sorted(_query(url,
            f"SELECT DISTINCT t.digest, t.text FROM documents d {current} "
            "JOIN chunk_texts t ON t.digest = c.digest")),
        "vectors": sorted(_query(url,
            f"SELECT DISTINCT e.digest, e.embedder, e.dimension, e.vector::text "
            f"FROM documents d {current} JOIN embeddings e ON e.digest = c.digest")),
        "boilerplate": sorted(_query(url, "SELECT source, digest FROM boilerplate")),
        "digest_counts": sorted(_query(url, "SELECT source, grp, digest, documents "
                                            "FROM digest_counts")),
        "meta": _meta(url),
        "work": sorted(_query(url, "SELECT run, source, key, state FROM work")),
    }


def _meta(url: str) -> list[tuple[Any, ...]]:
    """The meta entries but the roots' device and inode (a copy's folder is another inode)."""
    return sorted(r for r in _query(url, "SELECT name, value FROM meta")
                  if not r[0].startswith(ROOT_PREFIX))


def remove(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
