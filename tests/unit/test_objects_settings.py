"""An object store's settings and change signals, checked without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import load_config
from kbsync.errors import ConfigError
from kbsync.sources.kinds import SourceConfig, kind_for_argument, source_kind
from kbsync.sources.objects import ObjectStoreSettings, _stat, secret_option


def _settings(options: dict[str, object], kind: str = "s3") -> ObjectStoreSettings:
    """The settings of a ``[[sources]]`` table named ``bucket``, checked as a file's are."""
    settings: ObjectStoreSettings = SourceConfig("bucket", kind, options).settings
    return settings


def test_a_secret_in_storage_options_is_refused_with_the_way_to_name_a_variable() -> None:
    for options in ({"secret": "abc"}, {"client_kwargs": {"aws_secret_access_key": "abc"}},
                    {"key": "AKIA", "endpoint_url": "http://127.0.0.1:9000"},
                    {"token": "t"}, {"account_key": "k"}):
        with pytest.raises(ConfigError, match="storage_options_env") as caught:
            _settings({"url": "s3://b/docs", "storage_options": options})
        assert "abc" not in str(caught.value)  # the secret itself is never echoed
        assert "'bucket'" in str(caught.value)


def test_non_secret_storage_options_pass_as_they_are() -> None:
    settings = _settings({
        "url": "s3://b/docs", "storage_options": {"endpoint_url": "http://127.0.0.1:9000",
                                                  "anon": False,
                                                  "client_kwargs": {"region_name": "eu-west-1"}},
        "include": ["**/*.md"], "exclude": ["drafts/"]})
    assert settings.include == ("**/*.md",)
    assert settings.exclude == ("drafts/",)
    assert settings.resolved_options({}) == {"endpoint_url": "http://127.0.0.1:9000",
                                             "anon": False,
                                             "client_kwargs": {"region_name": "eu-west-1"}}


def test_storage_options_env_reads_the_named_variables() -> None:
    settings = _settings({
        "url": "s3://b", "storage_options_env": {"key": "KB_KEY", "secret": "KB_SECRET"}})
    assert settings.resolved_options({"KB_KEY": "id", "KB_SECRET": "s"}) == {
        "key": "id", "secret": "s"}
    with pytest.raises(ConfigError, match=r"KB_SECRET.*not set"):
        settings.resolved_options({"KB_KEY": "id"})


def test_an_unknown_setting_or_a_missing_url_is_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting .*'bucket': endpoint"):
        _settings({"url": "s3://b", "endpoint": "x"})
    with pytest.raises(ConfigError, match="'bucket' needs `url`"):
        _settings({})
    with pytest.raises(ConfigError, match="must start with s3://"):
        _settings({"url": "gs://b"})
    assert _settings({"url": "gs://b"}, kind="fsspec").url == "gs://b"


def test_option_names_that_hold_credentials_are_told_apart() -> None:
    for name in ("aws_secret_access_key", "key", "secret", "sas_token", "connection_string",
                 "client_secret", "session_token", "Password"):
        assert secret_option(name), name
    for name in ("endpoint_url", "anon", "region_name", "requester_pays", "version_aware"):
        assert not secret_option(name), name


# When the listings below begin: a day after any time they list.
LISTED = int(datetime(2026, 1, 3, tzinfo=UTC).timestamp()) * 10**9


def test_the_etag_is_the_stat_and_a_new_last_modified_alone_changes_nothing() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    base = {"size": 10, "ETag": '"abc"', "LastModified": when, "type": "file"}
    first = _stat(base, LISTED)
    assert first is not None
    assert first.size == 10
    assert _stat({**base, "LastModified": when + timedelta(hours=1)}, LISTED) == first
    assert _stat({**base, "ETag": '"abd"'}, LISTED) != first
    assert _stat({**base, "VersionId": "v2"}, LISTED) != first
    assert _stat({**base, "size": 11}, LISTED) != first
    assert 0 <= first.inode < 2**63


def test_without_an_etag_the_modification_time_is_the_stat() -> None:
    local = _stat({"size": 5, "mtime": 1_700_000_000.5, "ino": 42}, LISTED)
    assert local is not None
    assert (local.size, local.mtime_ns, local.inode) == (5, 1_700_000_000_500_000_000, 42)
    iso = _stat({"size": 5, "last_modified": "2026-01-02T03:04:05Z"}, LISTED)
    assert iso is not None
    assert iso.mtime_ns == int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()) * 10**9
    assert _stat({"size": 5}, LISTED) is None  # nothing to compare: let the bytes decide


def test_a_time_as_new_as_the_listing_is_racy_and_an_etag_never_is() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # 1-second resolution, as S3 gives it
    listed_at = int(when.timestamp()) * 10**9 + 400_000_000  # within that second
    timed = _stat({"size": 5, "LastModified": when}, listed_at)
    assert timed is not None
    assert timed.racy
    later = _stat({"size": 5, "LastModified": when}, listed_at + 60 * 10**9)
    assert later is not None
    assert not later.racy
    tagged = _stat({"size": 5, "LastModified": when, "ETag": '"abc"'}, listed_at)
    assert tagged is not None
    assert not tagged.racy


def test_init_arguments_of_object_stores_pick_their_kind() -> None:
    assert kind_for_argument("s3://bucket/docs").name == "s3"
    assert kind_for_argument("gs://bucket").name == "fsspec"
    assert kind_for_argument("memory://notes").name == "fsspec"
    assert kind_for_argument("docs").name == "folder"
    assert kind_for_argument("https://example.org/").name == "web"
    config = source_kind("s3").from_argument(Path("."), "s3://bucket/docs/", None)
    assert (config.name, config.kind, config.location) == ("bucket", "s3",
                                                           "s3://bucket/docs/")
    local = source_kind("fsspec").from_argument(Path("."), "file:///srv/team/docs", None)
    assert local.name == "docs"


def test_a_file_url_is_watched_as_a_folder_and_a_bucket_is_polled(tmp_path: Path) -> None:
    kind = source_kind("fsspec")
    local = SourceConfig("local", "fsspec", {"url": (tmp_path / "my docs").as_uri()})
    assert kind.watched_folder(local, tmp_path) == tmp_path / "my docs"
    bucket = SourceConfig("b", "s3", {"url": "s3://bucket/docs"})
    assert source_kind("s3").watched_folder(bucket, tmp_path) is None


def test_a_misspelled_object_store_setting_is_named_when_the_file_loads(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    (tmp_path / "kbsync.toml").write_text(
        '[[sources]]\nname = "notes"\nkind = "fsspec"\nurl = "memory://notes"\n'
        'storage_option = { anon = true }\n')
    with pytest.raises(ConfigError, match=r"'notes': storage_option; did you mean "
                                          r"'storage_options'"):
        load_config(tmp_path)


def test_a_secret_in_kbsync_toml_stops_the_knowledge_base_from_opening(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    (tmp_path / "kbsync.toml").write_text(
        '[embedder]\nkind = "hashing"\n\n[[sources]]\nname = "notes"\nkind = "fsspec"\n'
        'url = "memory://notes"\nstorage_options = { password = "hunter2" }\n')
    with pytest.raises(ConfigError, match="password, a secret") as caught:
        KnowledgeBase.open(tmp_path)
    assert "hunter2" not in str(caught.value)
