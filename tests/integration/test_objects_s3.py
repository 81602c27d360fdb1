"""An S3 bucket as a source, against a real S3-compatible server (moto) on 127.0.0.1.

The server counts the object downloads it answers, so "an unchanged object is
never downloaded" is what the server saw, not what the client says it did.
"""

from __future__ import annotations

import importlib
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import count
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.engine import load_config
from kbsync.extract.registry import extractor_for
from kbsync.report import SourceResult
from kbsync.sources.objects import ObjectStoreSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder


def _needed(module: str) -> ModuleType:
    """The module, or a skip naming the extra; under CI a missing one fails instead."""
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"needs {module} (pip install 'kbsync[dev]')")


_needed("s3fs")
boto3 = _needed("boto3")
_needed("moto")

from moto.moto_server.werkzeug_app import (  # noqa: E402  (after the skip)
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server  # noqa: E402

CHUNKER = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
_buckets = count()


class _Quiet(MotoRequestHandler):  # type: ignore[misc]
    """No access log on stderr."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class S3Server:
    """moto's S3 in a thread on 127.0.0.1, counting the object GETs per bucket."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        app = DomainDispatcherApplication(create_backend_app)

        def counting(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
            with self._lock:
                self.requests.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                      environ.get("QUERY_STRING", "")))
            return app(environ, start)  # type: ignore[no-any-return]

        self._server = make_server("127.0.0.1", 0, counting, threaded=True,
                                   request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def downloads(self, bucket: str) -> int:
        """Object GETs (not listings) the server answered for ``bucket``."""
        with self._lock:
            return sum(1 for method, path, query in self.requests
                       if method == "GET" and path.startswith(f"/{bucket}/")
                       and "list-type" not in query)

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One server for the module, with test credentials in the environment (as a user's
    would be) and no AWS configuration of the machine in the way."""
    nowhere = tmp_path_factory.mktemp("aws") / "none"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1",
                            "AWS_EC2_METADATA_DISABLED": "true",
                            "AWS_CONFIG_FILE": str(nowhere),
                            "AWS_SHARED_CREDENTIALS_FILE": str(nowhere)}.items():
            mp.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        server = S3Server()
        try:
            yield server
        finally:
            server.stop()


def _text(n: int) -> bytes:
    return (f"Object {n} is about lighthouse number {n} and the keeper word k{n}z. " * 20
            ).encode()


class Bucket:
    """A fresh bucket on the server with a few documents under ``docs/``."""

    def __init__(self, s3: S3Server, tmp: Path) -> None:
        self.server = s3
        self.name = f"kb-{next(_buckets)}"
        self.client = boto3.client("s3", endpoint_url=s3.url)
        self.client.create_bucket(Bucket=self.name)
        self.store = SqliteStore(tmp / "kb.db")
        for n in range(4):
            self.put(f"docs/guide/page{n}.md", _text(n))
        self.put("docs/notes.txt", _text(9))

    def put(self, key: str, body: bytes, **extra: Any) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=body, **extra)

    def source(self, url: str | None = None, **options: Any) -> ObjectStoreSource:
        return ObjectStoreSource(url or f"s3://{self.name}/docs", name="bucket",
                                 storage_options={"endpoint_url": self.server.url, **options})

    def sync(self, source: ObjectStoreSource | None = None) -> tuple[SourceResult, int]:
        """One sync; its report and how many objects the server sent for it."""
        before = self.server.downloads(self.name)
        result = sync_sources([source or self.source()], self.store, CountingEmbedder(),
                              extractor_for, CHUNKER)
        return result.sources[0], self.server.downloads(self.name) - before

    def documents(self) -> set[str]:
        return set(self.store.manifest("bucket"))


@pytest.fixture
def bucket(s3: S3Server, tmp_path: Path) -> Iterator[Bucket]:
    b = Bucket(s3, tmp_path)
    yield b
    b.store.close()


def test_a_bucket_syncs_and_an_unchanged_resync_downloads_nothing(bucket: Bucket) -> None:
    first, sent = bucket.sync()
    assert first.documents["new"] == 5
    assert first.listing_complete
    assert sent == 5
    assert bucket.documents() == {"guide/page0.md", "guide/page1.md", "guide/page2.md",
                                  "guide/page3.md", "notes.txt"}
    again, sent = bucket.sync()
    assert again.documents["unchanged"] == 5
    assert sent == 0
    assert again.embeddings_computed == 0


def test_an_edited_object_is_the_only_one_downloaded_again(bucket: Bucket) -> None:
    bucket.sync()
    bucket.put("docs/guide/page2.md", _text(2).replace(b"keeper", b"lamp trimmer", 3))
    report, sent = bucket.sync()
    assert sent == 1
    assert report.documents["modified"] == 1
    assert report.documents["unchanged"] == 4


def test_the_same_bytes_written_again_are_not_downloaded(bucket: Bucket) -> None:
    bucket.sync()
    bucket.put("docs/notes.txt", _text(9))  # a new last-modified time, the same ETag
    report, sent = bucket.sync()
    assert sent == 0
    assert report.documents["unchanged"] == 5


def test_a_deleted_object_is_deleted(bucket: Bucket) -> None:
    bucket.sync()
    bucket.client.delete_object(Bucket=bucket.name, Key="docs/guide/page1.md")
    report, sent = bucket.sync()
    assert sent == 0
    assert report.documents["deleted"] == 1
    assert "guide/page1.md" not in bucket.documents()


def test_an_object_copied_to_a_new_key_and_removed_is_a_move(bucket: Bucket) -> None:
    bucket.sync()
    bucket.client.copy_object(CopySource={"Bucket": bucket.name, "Key": "docs/guide/page3.md"},
                              Bucket=bucket.name, Key="docs/archive/page3.md")
    bucket.client.delete_object(Bucket=bucket.name, Key="docs/guide/page3.md")
    old = bucket.client.head_object(Bucket=bucket.name, Key="docs/guide/page0.md")["ETag"]
    assert old  # the copy keeps its ETag: the same bytes at a new key
    report, sent = bucket.sync()
    assert report.documents["moved"] == 1
    assert report.documents.get("deleted", 0) == 0
    assert report.documents.get("new", 0) == 0
    assert report.embeddings_computed == 0
    assert sent == 1  # the new key is read once, to match its text
    assert "archive/page3.md" in bucket.documents()
    assert "guide/page3.md" not in bucket.documents()


def test_an_unreadable_object_fails_alone_and_keeps_its_stored_version(bucket: Bucket) -> None:
    bucket.sync()
    # Moved to an archive storage class: listed, but a GET is refused until restored.
    bucket.put("docs/guide/page0.md", _text(0) + b" Archived.", StorageClass="GLACIER")
    bucket.put("docs/cold.md", _text(7), StorageClass="GLACIER")
    report, _ = bucket.sync()
    failed = dict(report.failures)
    assert set(failed) == {"guide/page0.md", "cold.md"}
    assert "storage class" in failed["cold.md"]  # the store's own reason
    assert report.documents["unchanged"] == 4
    assert report.documents.get("deleted", 0) == 0
    assert "guide/page0.md" in bucket.documents()  # the stored version stays


def test_a_vanished_bucket_deletes_nothing(bucket: Bucket) -> None:
    bucket.sync()
    for item in bucket.client.list_objects_v2(Bucket=bucket.name)["Contents"]:
        bucket.client.delete_object(Bucket=bucket.name, Key=item["Key"])
    bucket.client.delete_bucket(Bucket=bucket.name)
    report, _ = bucket.sync()
    assert not report.listing_complete
    assert report.documents.get("deleted", 0) == 0
    assert len(bucket.documents()) == 5
    (key, message), = report.failures
    assert key == ""
    assert f"s3://{bucket.name}/docs" in message
    assert "nothing will be deleted" in message


def test_a_misspelled_prefix_deletes_nothing(bucket: Bucket) -> None:
    bucket.sync()
    report, _ = bucket.sync(bucket.source(f"s3://{bucket.name}/dosc"))
    assert not report.listing_complete
    assert report.documents.get("deleted", 0) == 0
    assert len(bucket.documents()) == 5


def test_an_unreachable_endpoint_deletes_nothing_and_names_the_url(bucket: Bucket) -> None:
    bucket.sync()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    source = ObjectStoreSource(f"s3://{bucket.name}/docs", name="bucket", storage_options={
        "endpoint_url": f"http://127.0.0.1:{port}", "retries": 1,
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}})
    report, _ = bucket.sync(source)
    assert not report.listing_complete
    assert report.documents.get("deleted", 0) == 0
    assert len(bucket.documents()) == 5
    assert f"s3://{bucket.name}/docs" in report.failures[0][1]


def test_an_object_over_the_cap_is_reported_and_not_downloaded(bucket: Bucket) -> None:
    bucket.put("docs/huge.txt", _text(5) * 50)
    source = ObjectStoreSource(f"s3://{bucket.name}/docs", name="bucket", max_bytes=10_000,
                               storage_options={"endpoint_url": bucket.server.url})
    report, sent = bucket.sync(source)
    assert sent == 5
    failed = dict(report.failures)
    assert "over the cap of 10,000 bytes" in failed["huge.txt"]
    assert report.documents["new"] == 5


def test_the_readme_s3_table_syncs_and_searches_with_credentials_named_in_it(
        s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = Bucket(s3, tmp_path)
    b.store.close()
    home = tmp_path / "kb"
    KnowledgeBase.create(home, embedder={"kind": "hashing"}).close()
    with (home / "kbsync.toml").open("a") as toml:
        toml.write(f"""
[[sources]]
kind = "s3"
name = "handbook"
url = "s3://{b.name}/docs"
include = ["**/*.md"]
storage_options = {{ endpoint_url = "{s3.url}" }}
storage_options_env = {{ key = "HANDBOOK_KEY_ID", secret = "HANDBOOK_SECRET" }}
""")
    # Only the variables the table names hold the credentials.
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("HANDBOOK_KEY_ID", "testing")
    monkeypatch.setenv("HANDBOOK_SECRET", "testing")
    with KnowledgeBase.open(home) as kb:
        report = kb.sync().sources[0]
        assert report.documents["new"] == 4  # notes.txt is not included
        hits = kb.search("keeper word k2z", k=1, mode="text")
        assert hits[0].key == "guide/page2.md"
        again = kb.sync().sources[0]
        assert again.documents["unchanged"] == 4
    assert load_config(home).sources[0].location == f"s3://{b.name}/docs"


def test_credentials_the_server_refuses_delete_nothing(
        bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket.sync()
    import moto.settings

    # From now on the server checks every request's credentials, and knows none of them.
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    report, sent = bucket.sync()
    assert sent == 0
    assert not report.listing_complete
    assert report.documents.get("deleted", 0) == 0
    assert len(bucket.documents()) == 5
    (_, message), = report.failures
    assert f"s3://{bucket.name}/docs could not be listed" in message
    assert "PermissionError" in message


def test_init_and_sources_add_with_an_endpoint_url_sync_from_that_server(
        s3: S3Server, tmp_path: Path) -> None:
    b = Bucket(s3, tmp_path)
    b.store.close()
    home = tmp_path / "kb"
    runner = CliRunner()
    made = runner.invoke(app, ["init", f"s3://{b.name}/docs/guide", "--folder", str(home),
                               "--embedder", "hashing", "--endpoint-url", s3.url])
    assert made.exit_code == 0, made.output
    added = runner.invoke(app, ["sources", "add", f"s3://{b.name}/docs", "--name", "all",
                                "--endpoint-url", s3.url, "-c", str(home)])
    assert added.exit_code == 0, added.output
    with KnowledgeBase.open(home) as kb:
        assert {s.source: s.documents["new"] for s in kb.sync().sources} == {
            b.name: 4, "all": 5}
    refused = runner.invoke(app, ["sources", "add", str(tmp_path), "--endpoint-url", s3.url,
                                  "-c", str(home)])
    assert refused.exit_code == 1
    assert "--endpoint-url is for object stores" in refused.stderr
