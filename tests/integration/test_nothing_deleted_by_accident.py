"""Nothing is ever deleted by accident: a source missing from kbsync.toml, a misspelt
table or key, a folder that vanishes while it is listed (DESIGN.md §5)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.errors import ConfigError
from kbsync.model import ItemError, Listing, RootIdentity, SourceItem
from kbsync.sources.files import FilesystemSource
from kbsync.sync.listing import record_root, recorded_root

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    """Exit code, and what the command printed (stdout and stderr)."""
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _json(*args: str) -> tuple[int, Any]:
    """Exit code, and the JSON the command printed on stdout (``--json``)."""
    result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def _folder(root: Path, folders: int = 4, files: int = 3) -> None:
    for f in range(folders):
        for n in range(files):
            path = root / f"part{f}" / f"doc{n}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Part {f} document {n}\n\nThe text of document {n} "
                            f"in part {f}, about harbours and tides.\n")


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    _folder(tmp_path / "docs")
    assert _run("init", "docs", "--folder", str(tmp_path), "--embedder", "hashing")[0] == 0
    code, data = _json("sync", "-c", str(tmp_path))
    assert code == 0, data
    assert data["documents"]["new"] == 12
    return tmp_path


def _documents(kb: Path) -> int:
    return int(_json("status", "-c", str(kb))[1]["documents"])


# -- a source that disappears from kbsync.toml ---------------------------------------------


def test_a_source_that_vanished_from_the_configuration_keeps_its_documents(kb: Path) -> None:
    config = kb / "kbsync.toml"
    # The source's table goes (an editor slip, a merge gone wrong): no typo for the checker.
    text = config.read_text()
    config.write_text(text[: text.index("[[sources]]")])
    code, out = _run("sync", "-c", str(kb))
    assert code == 4
    assert "docs" in out
    assert "no longer configured" in out
    assert "its 12 documents were kept" in " ".join(out.split())
    assert _documents(kb) == 12
    code, report = _json("sync", "-c", str(kb))
    assert code == 4
    (docs,) = [s for s in report["sources"] if s["source"] == "docs"]
    assert docs["deletions_blocked"]
    assert docs["deletions_held"] == 12
    assert docs["documents"].get("deleted", 0) == 0


def test_sources_remove_lets_the_next_sync_delete_a_source_no_longer_configured(
        kb: Path) -> None:
    config = kb / "kbsync.toml"
    text = config.read_text()
    config.write_text(text[: text.index("[[sources]]")])
    assert _run("sync", "-c", str(kb))[0] == 4
    code, out = _run("sources", "remove", "docs", "-c", str(kb))
    assert code == 0, out
    code, data = _json("sync", "-c", str(kb))
    assert code == 0, data
    assert data["documents"]["deleted"] == 12
    assert _documents(kb) == 0
    # The release is spent: a source of that name added later is not deleted by it.
    assert _run("sources", "add", "docs", "-c", str(kb))[0] == 0
    assert _run("sync", "-c", str(kb))[0] == 0
    config.write_text(config.read_text()[: config.read_text().index("[[sources]]")])
    assert _run("sync", "-c", str(kb))[0] == 4
    assert _documents(kb) == 12


def test_sources_remove_of_a_configured_source_deletes_at_the_next_sync(kb: Path) -> None:
    assert _run("sources", "remove", "docs", "-c", str(kb))[0] == 0
    assert "[[sources]]" not in (kb / "kbsync.toml").read_text()
    code, data = _json("sync", "-c", str(kb))
    assert code == 0, data
    assert data["documents"]["deleted"] == 12


def test_remove_source_then_sync_with_the_same_knowledge_base_deletes_its_documents(
        kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        opened.remove_source("docs")
        assert opened.sources == []
        assert opened.sync().total("deleted") == 12
        with pytest.raises(ConfigError, match="no source named"):
            opened.remove_source("docs")


def test_allow_mass_delete_deletes_a_source_no_longer_configured(kb: Path) -> None:
    config = kb / "kbsync.toml"
    text = config.read_text()
    config.write_text(text[: text.index("[[sources]]")])
    code, data = _json("sync", "-c", str(kb), "--allow-mass-delete")
    assert code == 0, data
    assert data["documents"]["deleted"] == 12


@pytest.mark.parametrize(("typo", "named", "suggested"), [
    ("[[source]]", "[[source]]", "[[sources]]"),
    ("[embeder]", "[embeder]", "[embedder]"),
    ("[serach]", "[serach]", "[search]"),
    ("[stor]", "[stor]", "[store]"),
])
def test_a_misspelt_table_is_an_error_with_a_suggestion_and_deletes_nothing(
        kb: Path, typo: str, named: str, suggested: str) -> None:
    config = kb / "kbsync.toml"
    text = config.read_text()
    table = {"[[source]]": "[[sources]]", "[embeder]": "[embedder]", "[serach]": "[search]",
             "[stor]": "[store]"}[typo]
    config.write_text(text.replace(table, typo))
    code, out = _run("sync", "-c", str(kb))
    assert code == 1
    (line,) = out.strip().splitlines()
    assert str(config.name) in line
    assert named in line
    assert f"did you mean {suggested}" in line
    config.write_text(text)
    assert _documents(kb) == 12


@pytest.mark.parametrize(("table", "line", "suggestion"), [
    ("[[sources]]", 'inclde = ["**/*.md"]', "'include'"),
    ("[index]", "boilerplate_shar = 0.1", "'boilerplate_share'"),
    ("[search]", "context_token = 100", "'context_tokens'"),
    ("[store]", 'pth = "x.db"', "'path'"),
])
def test_a_misspelt_key_is_an_error_naming_the_file_the_key_and_the_suggestion(
        kb: Path, table: str, line: str, suggestion: str) -> None:
    config = kb / "kbsync.toml"
    text = config.read_text()
    if table not in text:
        text += f"\n{table}\n"
    head, tail = text.split(table, 1)
    config.write_text(f"{head}{table}\n{line}{tail}")
    with pytest.raises(ConfigError) as caught:
        KnowledgeBase.open(kb)
    message = str(caught.value)
    assert "kbsync.toml" in message
    assert line.split(" ")[0] in message
    assert f"did you mean {suggestion}" in message
    code, out = _run("sync", "-c", str(kb))
    assert code == 1
    assert len(out.strip().splitlines()) == 1


def test_a_misspelt_embedder_setting_names_the_one_meant(kb: Path) -> None:
    config = kb / "kbsync.toml"
    config.write_text(config.read_text().replace('kind = "hashing"',
                                                 'kind = "hashing"\ndimensoin = 256'))
    with pytest.raises(ConfigError, match="dimensoin; did you mean 'dimension'") as caught:
        KnowledgeBase.open(kb)
    assert "kbsync.toml" in str(caught.value)


# -- a folder that vanishes during the listing ---------------------------------------------


class _Vanishing(FilesystemSource):
    """A folder source that runs ``act`` once, after the listing handed over ``after`` items:
    the folder changes between two directory reads, deterministically."""

    def __init__(self, root: Path, act: object, after: int) -> None:
        super().__init__(root, name="docs")
        self._act = act
        self._after = after

    def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
        entries = super().scan()
        seen = 0
        try:
            while True:
                item = next(entries)
                yield item
                seen += 1
                if seen == self._after:
                    self._act()  # type: ignore[operator]
        except StopIteration as stop:
            listing: Listing = stop.value
            return listing


def test_a_source_root_that_is_gone_is_reported_as_not_listed_not_as_unchanged(
        kb: Path) -> None:
    (kb / "docs").rename(kb / "docs-moved-away")
    code, out = _run("sync", "-c", str(kb))
    assert code == 4
    assert "docs: not listed (the error is below); nothing of it was read, changed or" in out
    assert "its 12 documents are kept" in " ".join(out.split())
    assert "│    0 │" not in out  # no zeros that would read as "nothing changed"
    assert "cannot be read" in out
    assert _run("plan", "-c", str(kb))[0] == 4  # as the sync would end
    assert _documents(kb) == 12


def test_status_says_a_source_the_last_sync_could_not_list_keeps_its_documents(
        kb: Path) -> None:
    (kb / "docs").rename(kb / "docs-moved-away")
    assert _run("sync", "-c", str(kb))[0] == 4
    code, out = _run("status", "-c", str(kb))
    assert code == 0
    assert ("docs (12 documents; the last sync could not list it, so they are kept as they "
            "were)") in " ".join(out.split())
    assert _json("status", "-c", str(kb))[1]["last_run"]["unlisted"] == ["docs"]
    (kb / "docs-moved-away").rename(kb / "docs")
    assert _run("sync", "-c", str(kb))[0] == 0
    assert "could not list" not in _run("status", "-c", str(kb))[1]
    assert _json("status", "-c", str(kb))[1]["last_run"]["unlisted"] == []


def _sync_with(kb: Path, source: FilesystemSource, **options: bool) -> dict[str, object]:
    with KnowledgeBase.open(kb) as opened:
        opened.sources = [source]
        return opened.sync(**options).sources[0].to_dict()


def test_a_source_root_renamed_during_the_listing_deletes_nothing(kb: Path) -> None:
    docs = kb / "docs"
    moved = kb / "elsewhere"
    # After three folders' files the root goes away: the last folder would look removed,
    # a quarter of the documents, under the mass-deletion guard.
    report = _sync_with(kb, _Vanishing(docs, lambda: docs.rename(moved), after=9))
    assert report["listing_complete"] is False
    assert report["documents"].get("deleted", 0) == 0  # type: ignore[attr-defined]
    assert _documents(kb) == 12


def test_a_source_root_replaced_by_an_empty_folder_during_the_listing_deletes_nothing(
        kb: Path) -> None:
    docs = kb / "docs"

    def unmount() -> None:  # what a lazy unmount looks like: the mount point is empty
        docs.rename(kb / "elsewhere")
        docs.mkdir()

    report = _sync_with(kb, _Vanishing(docs, unmount, after=9))
    assert report["listing_complete"] is False
    assert report["documents"].get("deleted", 0) == 0  # type: ignore[attr-defined]
    assert _documents(kb) == 12


def test_a_subfolder_whose_parent_vanished_during_the_listing_deletes_nothing(
        kb: Path) -> None:
    deep = kb / "docs" / "deep"
    for n in range(4):
        sub = deep / f"sub{n}"
        sub.mkdir(parents=True)
        (sub / "x.md").write_text(f"# Deep {n}\n\nDeeper text number {n}.\n")
    assert _run("sync", "-c", str(kb))[0] == 0
    assert _documents(kb) == 16

    def vanish() -> None:
        if deep.exists():
            deep.rename(kb / "deep-moved")

    # Whichever folder the walk reads first, "deep" goes as soon as its entries are known.
    class _Deep(_Vanishing):
        def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
            entries = FilesystemSource.scan(self)
            try:
                while True:
                    item = next(entries)
                    yield item
                    if isinstance(item, SourceItem) and item.key.startswith("deep/"):
                        vanish()
            except StopIteration as stop:
                listing: Listing = stop.value
                return listing

    report = _sync_with(kb, _Deep(kb / "docs", vanish, after=0))
    assert report["documents"].get("deleted", 0) == 0  # type: ignore[attr-defined]
    assert _documents(kb) == 16


def test_a_subfolder_removed_while_its_parent_stays_is_deleted_as_usual(kb: Path) -> None:
    docs = kb / "docs"

    def remove() -> None:
        for path in sorted((docs / "part0").iterdir()):
            path.unlink()
        (docs / "part0").rmdir()

    listed: list[str] = []

    class _Recording(_Vanishing):
        def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
            entries = FilesystemSource.scan(self)
            try:
                while True:
                    item = next(entries)
                    listed.append(item.key)
                    yield item
                    if len(listed) == 1:
                        remove()
            except StopIteration as stop:
                listing: Listing = stop.value
                return listing

    report = _sync_with(kb, _Recording(docs, remove, after=0))
    assert not listed[0].startswith("part0/")  # the walk reads part0 last (a stack)
    assert report["listing_complete"] is True
    assert report["documents"]["deleted"] == 3  # type: ignore[index]
    assert _documents(kb) == 9


def test_the_scan_of_a_root_renamed_between_directory_reads_is_incomplete_in_one_error(
        tmp_path: Path) -> None:
    _folder(tmp_path / "docs", folders=6)
    source = FilesystemSource(tmp_path / "docs")
    entries = source.scan()
    first = next(entries)
    os.rename(tmp_path / "docs", tmp_path / "gone")  # as a lazy unmount takes the folders away
    rest = []
    try:
        while True:
            rest.append(next(entries))
    except StopIteration as stop:
        summary: Listing = stop.value
    assert isinstance(first, SourceItem)
    assert summary.complete is False
    errors = [e for e in rest if isinstance(e, ItemError)]
    # One line for the source, not one for each of the five folders left to scan.
    assert [(e.key, "moved, replaced or unmounted" in e.message) for e in errors] == [("", True)]


# -- a folder on another device than at the last sync ---------------------------------------


class _OnDevice(FilesystemSource):
    """The folder source as it would list its root on another device (``device``): what a
    disk unmounted before the sync leaves, its mount point, lies on the disk above it."""

    def __init__(self, root: Path, device: int) -> None:
        super().__init__(root, name="docs")
        self._device = device

    def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
        listing = yield from super().scan()
        assert listing.root is not None
        return replace(listing, root=RootIdentity(self._device, listing.root.inode))


def _recorded(kb: Path) -> RootIdentity | None:
    with KnowledgeBase.open(kb) as opened:
        return recorded_root(opened.store, "docs")


def _unmount(kb: Path) -> None:
    """What an unmounted disk looks like: its mount point is an empty folder."""
    shutil.rmtree(kb / "docs")
    (kb / "docs").mkdir()


def test_the_first_sync_records_the_device_and_inode_of_the_root(kb: Path) -> None:
    st = (kb / "docs").stat()
    assert _recorded(kb) == RootIdentity(st.st_dev, st.st_ino)


def test_a_folder_unmounted_before_the_sync_deletes_nothing_even_with_allow_mass_delete(
        kb: Path) -> None:
    recorded = _recorded(kb)
    assert recorded is not None
    _unmount(kb)
    other = recorded.device + 1
    for _ in range(2):  # and the next sync the same: the old root stays the one recorded
        report = _sync_with(kb, _OnDevice(kb / "docs", other), allow_mass_delete=True)
        assert report["listing_complete"] is False
        assert report["documents"].get("deleted", 0) == 0  # type: ignore[attr-defined]
        assert report["deletions_held"] == 12
        failures = report["failures"]
        assert isinstance(failures, list)
        assert len(failures) == 1
        message = failures[0]["message"]
        assert "on another device than at the last sync" in message
        assert f"now {os.major(other)}:{os.minor(other)}" in message
        assert "--accept-root" in message
        assert _documents(kb) == 12
        assert _recorded(kb) == recorded


def test_a_folder_moved_to_another_device_on_purpose_is_taken_with_accept_root(
        kb: Path) -> None:
    recorded = _recorded(kb)
    assert recorded is not None
    shutil.rmtree(kb / "docs" / "part0")  # moved without the three documents of part0
    other = recorded.device + 1
    refused = _sync_with(kb, _OnDevice(kb / "docs", other))
    assert refused["listing_complete"] is False
    assert _documents(kb) == 12
    taken = _sync_with(kb, _OnDevice(kb / "docs", other), accept_root=True)
    assert taken["listing_complete"] is True
    assert taken["documents"]["deleted"] == 3  # type: ignore[index]
    assert _documents(kb) == 9
    assert _recorded(kb) == RootIdentity(other, recorded.inode)
    again = _sync_with(kb, _OnDevice(kb / "docs", other))  # the new root is the one now
    assert again["listing_complete"] is True
    assert again["failures"] == []


def test_a_root_on_another_device_that_lacks_no_document_is_taken_as_it_is(kb: Path) -> None:
    recorded = _recorded(kb)
    assert recorded is not None
    other = recorded.device + 1  # a share mounted again under another device number
    report = _sync_with(kb, _OnDevice(kb / "docs", other))
    assert report["listing_complete"] is True
    assert report["failures"] == []
    assert _recorded(kb) == RootIdentity(other, recorded.inode)


def test_a_dry_run_records_no_root(kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        opened.store.set_meta("root docs", "")
        opened.plan()
        assert recorded_root(opened.store, "docs") is None


def test_an_emptied_mount_point_on_the_command_line_keeps_everything_until_accept_root(
        kb: Path) -> None:
    recorded = _recorded(kb)
    assert recorded is not None
    with KnowledgeBase.open(kb) as opened:  # as if the last sync had listed another disk
        record_root(opened.store, "docs", RootIdentity(recorded.device + 7, recorded.inode))
    _unmount(kb)
    code, out = _run("sync", "-c", str(kb), "--allow-mass-delete")
    assert code == 4
    assert "its 12 documents are kept" in " ".join(out.split())
    assert "--accept-root" in out
    assert _documents(kb) == 12
    code, data = _json("sync", "-c", str(kb), "--accept-root", "--allow-mass-delete")
    assert code == 0, data
    assert data["documents"]["deleted"] == 12
    assert _recorded(kb) == RootIdentity(recorded.device, (kb / "docs").stat().st_ino)


# -- concurrent edits of kbsync.toml -------------------------------------------------------


def _add(root: str, name: str, start: object) -> None:
    from kbsync.engine import add_source, load_config

    start.wait()  # type: ignore[attr-defined]
    try:
        add_source(load_config(root), name)
    except ConfigError as exc:
        raise SystemExit(f"error: {exc}") from None


def _init(root: str, start: object) -> None:
    from kbsync.engine import init_config

    start.wait()  # type: ignore[attr-defined]
    try:
        init_config(root, ["docs"])
    except ConfigError as exc:
        raise SystemExit(3 if "already configured" in str(exc) else 1) from None


def test_concurrent_sources_add_never_lose_a_source(tmp_path: Path) -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(20):
        root = tmp_path / f"kb{attempt}"
        KnowledgeBase.create(root, ["docs"]).close()
        for name in ("one", "two", "three"):
            (root / name).mkdir()
        start = context.Barrier(3)
        workers = [context.Process(target=_add, args=(str(root), name, start))
                   for name in ("one", "two", "three")]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert [w.exitcode for w in workers] == [0, 0, 0], attempt
        with KnowledgeBase.open(root) as kb:
            names = sorted(s.name for s in kb.config.sources)
        assert names == ["docs", "one", "three", "two"], attempt


def test_concurrent_inits_of_one_folder_leave_one_and_the_other_fails_clearly(
        tmp_path: Path) -> None:
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(20):
        root = tmp_path / f"kb{attempt}"
        start = context.Barrier(2)
        workers = [context.Process(target=_init, args=(str(root), start)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert sorted(w.exitcode or 0 for w in workers) == [0, 3], attempt
        with KnowledgeBase.open(root) as kb:
            assert [s.name for s in kb.config.sources] == ["docs"]


def test_parallel_workers_keep_a_source_no_longer_configured(
        tmp_path: Path, postgres_url: str) -> None:
    from tests.conftest import Backend

    pg = Backend("postgres", postgres_url)
    try:
        _folder(tmp_path / "docs")
        KnowledgeBase.create(tmp_path, ["docs"]).close()
        pg.configure(tmp_path)
        with KnowledgeBase.open(tmp_path) as kb:
            assert kb.sync(workers=1).total("new") == 12
        config = tmp_path / "kbsync.toml"
        text = config.read_text()
        config.write_text(text[: text.index("[[sources]]")])
        with KnowledgeBase.open(tmp_path) as kb:
            kept = kb.sync(workers=1)
            assert kept.failed
            (docs,) = kept.sources
            assert docs.source == "docs"
            assert docs.deletions_blocked
            assert docs.deletions_held == 12
            assert kb.status().documents == 12
            kb.remove_source("docs")
            assert kb.sync(workers=1).total("deleted") == 12
            assert kb.status().documents == 0
    finally:
        pg.drop()


def test_a_misspelt_chunker_parameter_names_the_one_meant(kb: Path) -> None:
    config = kb / "kbsync.toml"
    config.write_text(config.read_text().replace("max_tokens =", "max_token ="))
    with pytest.raises(ConfigError, match=r"\[chunker\] max_token; did you mean 'max_tokens'"):
        KnowledgeBase.open(kb)
