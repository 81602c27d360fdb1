"""Source kinds: every ``[[sources]]`` table has one, old tables get theirs inferred."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import add_source, init_config, load_config
from kbsync.errors import ConfigError
from kbsync.sources.files import FilesystemSource
from kbsync.sources.kinds import SOURCE_KINDS, SourceConfig, kind_for_argument, source_kind

OLD_FILE = """\
[store]
path = ".kbsync/kbsync.db"

[embedder]
kind = "hashing"

[[sources]]
name = "docs"
path = "docs"
include = ["**/*.md"]

[[sources]]
name = "site"
urls = ["https://example.org/"]
max_pages = 3
"""


def test_a_file_written_before_kinds_existed_loads_with_inferred_kinds(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text(OLD_FILE)
    config = load_config(tmp_path)
    assert [(s.name, s.kind) for s in config.sources] == [("docs", "folder"), ("site", "web")]
    assert config.sources[0].options["include"] == ["**/*.md"]
    assert (tmp_path / "kbsync.toml").read_text() == OLD_FILE  # loading rewrites nothing


def test_an_explicit_command_writes_the_inferred_kind_into_the_file(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text(OLD_FILE)
    (tmp_path / "notes").mkdir()
    add_source(load_config(tmp_path), "notes")
    text = (tmp_path / "kbsync.toml").read_text()
    assert text.count('kind = "folder"') == 2
    assert text.count('kind = "web"') == 1
    config = load_config(tmp_path)
    assert [s.kind for s in config.sources] == ["folder", "web", "folder"]
    assert config.sources[1].options["max_pages"] == 3  # the web settings survive the rewrite


def test_an_unknown_kind_is_refused_with_the_kinds_there_are(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text('[[sources]]\nname = "x"\nkind = "foldr"\npath = "x"\n')
    with pytest.raises(ConfigError, match=r"unknown source kind 'foldr' \(known: .*folder"):
        load_config(tmp_path)


def test_a_misspelled_setting_names_the_source_and_the_setting_it_resembles(
        tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text(
        '[[sources]]\nname = "docs"\nkind = "folder"\npath = "d"\nexclud = ["*.tmp"]\n')
    with pytest.raises(ConfigError, match=r"'docs': exclud; did you mean 'exclude'") as raised:
        load_config(tmp_path)
    assert str(raised.value).count("[[sources]]") == 1  # the table named once, not twice


def test_a_table_with_neither_kind_nor_location_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text('[[sources]]\nname = "x"\n')
    with pytest.raises(ConfigError, match="needs a `kind`"):
        load_config(tmp_path)


def test_the_argument_of_init_picks_its_kind() -> None:
    assert kind_for_argument("docs/guide").name == "folder"
    assert kind_for_argument("https://example.org/docs/").name == "web"
    with pytest.raises(ConfigError, match=r"ftp://example.org: no kind of source takes ftp://"):
        kind_for_argument("ftp://example.org")


def test_each_kind_builds_its_adapter_and_says_where_it_is(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    config = init_config(tmp_path, ["docs"], embedder={"kind": "hashing"})
    folder = config.sources[0]
    assert folder.location == "docs"
    source = source_kind(folder.kind).build(folder, config.root, lambda *_: None)
    assert isinstance(source, FilesystemSource)
    assert source.name == "docs"
    assert source_kind("folder").watched_folder(folder, config.root) == config.root / "docs"
    web = SourceConfig("site", "web", {"urls": ["https://example.org/"],
                                       "sitemaps": ["https://example.org/sitemap.xml"]})
    assert web.location == "https://example.org/, https://example.org/sitemap.xml"
    assert source_kind("web").watched_folder(web, config.root) is None


def test_every_registered_kind_is_registered_under_its_own_name() -> None:
    assert all(kind.name == name for name, kind in SOURCE_KINDS.items())


def test_a_knowledge_base_adds_a_source_and_builds_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    init_config(tmp_path, ["a"], embedder={"kind": "hashing"})
    with KnowledgeBase.open(tmp_path) as kb:
        kb.add_source("b", name="second")
        assert [s.name for s in kb.sources] == ["a", "second"]
    assert [s.name for s in load_config(tmp_path).sources] == ["a", "second"]


def test_a_git_source_of_a_missing_local_repository_is_refused_as_a_missing_folder_is(
        tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    config = init_config(tmp_path, ["docs"], embedder={"kind": "hashing"})
    with pytest.raises(ConfigError, match=r"\.\./nowhere: no such repository \(relative to"):
        add_source(config, "git+../nowhere")
    remote = kind_for_argument("git+https://example.org/team/handbook.git")
    assert remote.from_argument(tmp_path, "git+https://example.org/team/handbook.git",
                                None).name == "handbook"  # a remote is not looked for here


def test_a_source_its_kind_cannot_build_is_an_error_that_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text(
        '[embedder]\nkind = "hashing"\n\n[[sources]]\nname = "office"\nkind = "folder"\n')
    with pytest.raises(ConfigError, match=r"kbsync\.toml: \[\[sources\]\] 'office' needs `path`"):
        KnowledgeBase.open(tmp_path)


@pytest.mark.parametrize(("argument", "name", "paths"), [
    ("crawl.warc.gz", "crawl", ["crawl.warc.gz"]),
    ("crawl/*.warc*", "crawl", ["crawl/*.warc*"]),
    ("warc+crawls/", "crawls", ["crawls/"]),
    ("s3://bucket/cc/2024/*.warc.gz", "2024", ["s3://bucket/cc/2024/*.warc.gz"]),
])
def test_warc_files_globs_and_warc_plus_folders_are_warc_sources(
        tmp_path: Path, argument: str, name: str, paths: list[str]) -> None:
    kind = kind_for_argument(argument)
    assert kind.name == "warc"
    config = kind.from_argument(tmp_path, argument, None)
    assert (config.name, config.options) == (name, {"paths": paths})
    assert config.settings.paths == tuple(paths)
    assert kind_for_argument("crawls").name == "folder"  # a folder stays a folder
