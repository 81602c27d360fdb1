"""A folder source's racy stats, its root's identity, and reads of files being written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kbsync.sources.files as files
from kbsync.errors import DocumentChangingError
from kbsync.model import RACY_WINDOW_NS, RootIdentity, SourceItem, SourceStat
from kbsync.sources.files import FilesystemSource

SECOND = 10**9
WRITTEN = 1_700_000_000 * SECOND  # a whole second, as a 1-second file system stamps it


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def _source(root: Path, listed_at: int) -> FilesystemSource:
    return FilesystemSource(root, clock=lambda: listed_at)


def _note(root: Path, data: bytes = b"the harbour at night", when: int = WRITTEN) -> Path:
    path = root / "note.md"
    path.write_bytes(data)
    os.utime(path, ns=(when, when))
    return path


def test_a_stat_is_racy_unless_safely_older_than_the_listing() -> None:
    at = WRITTEN + 10 * SECOND
    assert SourceStat.listed(1, at - RACY_WINDOW_NS, 1, at).racy is False
    assert SourceStat.listed(1, at - RACY_WINDOW_NS + 1, 1, at).racy is True
    assert SourceStat.listed(1, at, 1, at).racy is True
    assert SourceStat.listed(1, at + 60 * SECOND, 1, at).racy is True  # a clock ahead


def test_the_window_covers_fat_timestamps_and_a_second_of_clock_difference() -> None:
    assert RACY_WINDOW_NS >= 2 * SECOND + SECOND


@pytest.mark.parametrize(("after", "racy"), [(0, True), (SECOND // 2, True),
                                             (2 * SECOND, True), (3 * SECOND, False),
                                             (3600 * SECOND, False)])
def test_a_listing_marks_a_file_written_just_before_it_racy(root: Path, after: int,
                                                           racy: bool) -> None:
    _note(root)
    [item] = _source(root, WRITTEN + after).list().items
    assert item.stat is not None
    assert item.stat.racy is racy
    assert (item.stat.mtime_ns, item.stat.size) == (WRITTEN, 20)


def test_the_listing_time_is_taken_once_before_any_stat(root: Path) -> None:
    for n in range(3):
        (root / f"n{n}.md").write_text("x")
    calls: list[int] = []

    def clock() -> int:
        calls.append(1)
        return WRITTEN

    FilesystemSource(root, clock=clock).list()
    assert len(calls) == 1


def test_a_listing_names_the_device_and_inode_of_its_root(root: Path) -> None:
    _note(root)
    st = root.stat()
    assert FilesystemSource(root).list().root == RootIdentity(st.st_dev, st.st_ino)


def test_a_listing_of_a_missing_root_names_none(tmp_path: Path) -> None:
    listing = FilesystemSource(tmp_path / "absent").list()
    assert (listing.complete, listing.root) == (False, None)


# -- reads ----------------------------------------------------------------------------------


def _listed(root: Path, listed_at: int = WRITTEN + 60 * SECOND) -> tuple[FilesystemSource,
                                                                         SourceItem]:
    source = _source(root, listed_at)
    [item] = source.list().items
    return source, item


def test_a_file_rewritten_after_the_listing_is_left_for_the_next_sync(root: Path) -> None:
    path = _note(root)
    source, item = _listed(root)
    _note(root, b"the harbour at dawn!", WRITTEN + 5 * SECOND)  # same size, later
    with pytest.raises(DocumentChangingError, match="changed after it was listed") as caught:
        source.read(item)
    assert caught.value.locator == str(path)


def test_a_file_truncated_after_the_listing_is_not_read_empty(root: Path) -> None:
    path = _note(root)
    source, item = _listed(root)
    with open(path, "wb"):  # truncated: the writer has not written yet
        pass
    with pytest.raises(DocumentChangingError):
        source.read(item)


def test_a_file_written_to_during_the_read_is_left_for_the_next_sync(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _note(root)
    source, item = _listed(root)
    real = files._read_capped
    reads: list[bytes] = []

    def appended_meanwhile(f: object, size: int, cap: int) -> bytes:
        data = real(f, size, cap)  # type: ignore[arg-type]
        reads.append(data)
        with open(path, "ab") as out:  # a writer appends while the read runs
            out.write(b" and at dawn")
        return data

    monkeypatch.setattr(files, "_read_capped", appended_meanwhile)
    with pytest.raises(DocumentChangingError, match="changed while it was read"):
        source.read(item)
    # Once: a file that changed never has its listed stat again, so reading it again
    # could not give bytes that stat describes.
    assert reads == [b"the harbour at night"]


def test_a_file_changed_after_the_listing_is_not_even_read(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _note(root)
    source, item = _listed(root)
    _note(root, b"the harbour at dusk, longer", WRITTEN + 5 * SECOND)
    reads: list[int] = []
    monkeypatch.setattr(files, "_read_capped", lambda *args: reads.append(1) or b"")
    with pytest.raises(DocumentChangingError):
        source.read(item)
    assert reads == []


def test_an_empty_file_with_a_racy_stat_may_be_half_written_and_waits(root: Path) -> None:
    _note(root, b"")
    source, item = _listed(root, WRITTEN + SECOND // 2)
    assert item.stat is not None
    assert item.stat.racy
    with pytest.raises(DocumentChangingError, match="is empty"):
        source.read(item)


def test_an_empty_file_written_long_before_the_listing_reads_empty(root: Path) -> None:
    _note(root, b"")
    source, item = _listed(root)
    assert source.read(item) == b""


def test_a_file_whose_stat_is_the_listed_one_reads_as_before(root: Path) -> None:
    _note(root)
    source, item = _listed(root, WRITTEN + SECOND // 2)  # racy, but not empty: read
    assert source.read(item) == b"the harbour at night"
