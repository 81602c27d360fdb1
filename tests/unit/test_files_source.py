from __future__ import annotations

import builtins
import io
import os
import shutil
import socket
import threading
import tracemalloc
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbsync.errors import DocumentError, ParameterError
from kbsync.model import SourceItem
from kbsync.sources import Scan, Source
from kbsync.sources.files import FilesystemSource, guess_media_type, match_glob


def _write(root: Path, rel: str, data: str = "text") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data, encoding="utf-8")
    return path


def _keys(source: FilesystemSource) -> list[str]:
    return [item.key for item in source.list().items]


def _item(source: FilesystemSource, key: str) -> SourceItem:
    return next(item for item in source.list().items if item.key == key)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def test_a_filesystem_source_satisfies_the_source_protocol(root: Path) -> None:
    assert isinstance(FilesystemSource(root), Source)


def test_the_name_defaults_to_the_resolved_root_and_can_be_set(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "alias"
    link.symlink_to(root)
    assert FilesystemSource(link).name == str(root.resolve())
    assert FilesystemSource(root, name="docs").name == "docs"


def test_keys_are_relative_posix_paths_sorted_with_a_locator_to_read(root: Path) -> None:
    for rel in ("b.md", "a/z.txt", "a/b/c.html", "A.txt"):
        _write(root, rel)
    listing = FilesystemSource(root).list()
    assert listing.complete
    assert [i.key for i in listing.items] == ["A.txt", "a/b/c.html", "a/z.txt", "b.md"]
    item = listing.items[1]
    assert Path(item.locator) == root.resolve() / "a" / "b" / "c.html"
    assert item.media_type == "text/html"


def test_keys_are_nfc_even_when_the_file_name_on_disk_is_decomposed(root: Path) -> None:
    decomposed = "caf" + "e\u0301" + ".md"
    _write(root, f"d{chr(0x0301)}ir/{decomposed}", "bonjour")
    source = FilesystemSource(root)
    [item] = source.list().items
    assert item.key == unicodedata.normalize("NFC", f"d\u0301ir/{decomposed}")
    assert "café.md" in item.key
    assert item.key == unicodedata.normalize("NFC", item.key)
    assert source.read(item) == b"bonjour"  # the locator keeps the name as stored


def test_two_names_equal_after_nfc_give_one_item_and_a_warning(root: Path) -> None:
    _write(root, "caf\u00e9.md", "composed")
    _write(root, "cafe\u0301.md", "decomposed")
    listing = FilesystemSource(root).list()
    assert [i.key for i in listing.items] == ["caf\u00e9.md"]
    assert listing.errors == ()
    [warning] = listing.warnings
    assert warning.startswith("caf\u00e9.md: ")
    assert "NFC" in warning
    assert listing.complete


def test_of_two_directories_equal_after_nfc_the_first_is_listed_and_the_other_reported(
        root: Path) -> None:
    _write(root, "cafe\u0301/decomposed.txt")
    _write(root, "caf\u00e9/composed.txt")
    listing = FilesystemSource(root).list()
    # "e" + U+0301 comes before U+00E9 in code-point order of the raw names.
    assert [i.key for i in listing.items] == ["caf\u00e9/decomposed.txt"]
    [warning] = listing.warnings
    assert warning.startswith("caf\u00e9: ")
    assert "NFC" in warning


def test_a_scan_hands_over_the_same_items_and_errors_as_the_listing(root: Path) -> None:
    for i in range(30):
        _write(root, f"d{i % 4}/sub{i % 3}/f{i}.txt")
    _write(root, "big.txt", "x" * 50)
    source = FilesystemSource(root, max_bytes=20)
    scan = Scan(source.scan())
    scanned = list(scan)
    summary = scan.summary
    listing = source.list()
    assert sorted(e.key for e in scanned) == sorted(
        [i.key for i in listing.items] + [e.key for e in listing.errors])
    assert summary.items == ()
    assert summary.complete
    assert listing.complete
    assert listing.errors[0].key == "big.txt"


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("**/*.md", "x/y/a.txt", False),
        ("*.md", "a.md", True),
        ("*.md", "x/a.md", False),
        ("docs/**", "docs/a/b.txt", True),
        ("docs/", "docs/a/b.txt", True),
        ("docs/**/b.txt", "docs/b.txt", True),
        ("docs/**/b.txt", "docs/x/y/b.txt", True),
        ("docs/**/b.txt", "other/docs/b.txt", False),
        ("**", "any/thing", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("[!x]y", "/y", False),
        ("[!x]y", "zy", True),
        ("[a-c]*.txt", "b1.txt", True),
        ("./*.txt", "a.txt", True),
        ("a+b(c).md", "a+b(c).md", True),
        ("*.MD", "a.md", False),
        ("caf\u00e9/*", "caf\u00e9/x", True),
        ("cafe\u0301/*", "caf\u00e9/x", True),
    ],
)
def test_globs_match_whole_keys_with_double_star_spanning_directories(
    pattern: str, key: str, expected: bool
) -> None:
    assert match_glob(pattern, key) is expected


def test_include_and_exclude_globs_select_files(root: Path) -> None:
    for rel in ("a.md", "notes/b.md", "notes/draft/c.md", "d.txt", "notes/e.pdf"):
        _write(root, rel)
    assert _keys(FilesystemSource(root, include=("**/*.md",))) == [
        "a.md",
        "notes/b.md",
        "notes/draft/c.md",
    ]
    assert _keys(FilesystemSource(root, include="*.md")) == ["a.md"]
    assert _keys(FilesystemSource(root, exclude=("notes/draft/**", "*.txt"))) == [
        "a.md",
        "notes/b.md",
        "notes/e.pdf",
    ]
    assert _keys(FilesystemSource(root, include=())) == []


def test_an_excluded_directory_is_not_scanned(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(root, "keep.md")
    _write(root, "node_modules/pkg/readme.md")
    _write(root, "build/out/x.md")
    scanned: list[str] = []
    real_scandir = os.scandir

    def spy(path: Any = ".") -> Any:
        scanned.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    source = FilesystemSource(root, exclude=("node_modules", "build/**"))
    assert _keys(source) == ["keep.md"]
    assert scanned
    assert not [p for p in scanned if "node_modules" in p or "build" in p]


def test_an_empty_glob_or_a_bad_cap_is_a_parameter_error(root: Path) -> None:
    with pytest.raises(ParameterError, match="empty glob"):
        FilesystemSource(root, include=("",))
    with pytest.raises(ParameterError, match="max_bytes"):
        FilesystemSource(root, max_bytes=0)


def test_hidden_files_and_directories_are_skipped_unless_asked_for(root: Path) -> None:
    _write(root, "a.md")
    _write(root, ".git/config")
    _write(root, ".kbsync/state.db")
    _write(root, "sub/.env", "SECRET=1")
    _write(root, "sub/.hidden/b.md")
    assert _keys(FilesystemSource(root)) == ["a.md"]
    assert _keys(FilesystemSource(root, include_hidden=True, exclude=(".git",))) == [
        ".kbsync/state.db",
        "a.md",
        "sub/.env",
        "sub/.hidden/b.md",
    ]


def test_a_fifo_is_skipped_with_a_warning_and_never_opened(root: Path) -> None:
    _write(root, "a.md")
    fifo = root / "pipe.md"
    os.mkfifo(fifo)
    listing: list[Any] = []
    # Opening a FIFO with no writer blocks: a listing that opened it would never finish.
    worker = threading.Thread(target=lambda: listing.append(FilesystemSource(root).list()))
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # unblock the thread before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("listing opened the FIFO")
    [result] = listing
    assert [i.key for i in result.items] == ["a.md"]
    assert result.complete
    assert any("pipe.md" in w and "FIFO" in w for w in result.warnings)


def test_reading_a_fifo_swapped_in_after_listing_fails_without_blocking(root: Path) -> None:
    path = _write(root, "a.md")
    source = FilesystemSource(root)
    item = _item(source, "a.md")
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(DocumentError, match="FIFO"):
        source.read(item)


def test_a_socket_is_skipped_with_a_warning(root: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "s.md"))
        listing = FilesystemSource(root).list()
    finally:
        sock.close()
    assert listing.items == ()
    assert any("socket" in w for w in listing.warnings)


def test_a_symlink_out_of_the_root_is_not_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "secret.md", "secret")
    _write(outside, "dir/inner.md", "secret")
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "leakdir").symlink_to(outside / "dir")
    _write(root, "a.md")
    source = FilesystemSource(root)
    listing = source.list()
    assert [i.key for i in listing.items] == ["a.md"]
    assert listing.complete
    assert any("leak.md" in w and "outside the root" in w for w in listing.warnings)
    assert any("leakdir" in w and "outside the root" in w for w in listing.warnings)
    forged = SourceItem("leak.md", str(root / "leak.md"), "text/markdown")
    with pytest.raises(DocumentError, match="outside the source root"):
        source.read(forged)


def test_a_symlink_to_a_file_inside_the_root_is_listed_under_its_own_key(root: Path) -> None:
    target = _write(root, "real/a.md", "content")
    (root / "alias.md").symlink_to(target)
    (root / "aliasdir").symlink_to(root / "real")
    source = FilesystemSource(root)
    items = {i.key: i for i in source.list().items}
    assert sorted(items) == ["alias.md", "aliasdir/a.md", "real/a.md"]
    assert items["alias.md"].stat == items["real/a.md"].stat
    assert source.read(items["alias.md"]) == b"content"
    assert source.read(items["aliasdir/a.md"]) == b"content"


def test_symlink_loops_do_not_hang(root: Path) -> None:
    _write(root, "sub/a.md")
    (root / "sub" / "up").symlink_to(root)
    (root / "self").symlink_to(root / "self")
    (root / "ping").symlink_to(root / "pong")
    (root / "pong").symlink_to(root / "ping")
    (root / "sub" / "again").symlink_to(root / "sub")
    listing: list[Any] = []
    worker = threading.Thread(target=lambda: listing.append(FilesystemSource(root).list()))
    worker.daemon = True
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "listing did not finish"
    [result] = listing
    assert [i.key for i in result.items] == ["sub/a.md"]
    assert any("loop" in w for w in result.warnings)


def test_a_dangling_symlink_is_skipped_with_a_warning(root: Path) -> None:
    (root / "gone.md").symlink_to(root / "missing.md")
    listing = FilesystemSource(root).list()
    assert listing.items == ()
    assert listing.complete
    assert any("gone.md" in w and "broken" in w for w in listing.warnings)


def test_a_file_over_the_size_cap_is_an_error_with_its_size_and_the_cap(root: Path) -> None:
    _write(root, "big.txt", "x" * 101)
    _write(root, "small.txt", "x" * 100)
    listing = FilesystemSource(root, max_bytes=100).list()
    assert [i.key for i in listing.items] == ["small.txt"]
    [error] = listing.errors
    assert error.key == "big.txt"
    assert "101 bytes" in error.message
    assert "100 bytes" in error.message
    assert listing.complete


def test_a_file_that_grew_over_the_cap_after_listing_is_not_read(root: Path) -> None:
    path = _write(root, "a.txt", "x" * 10)
    source = FilesystemSource(root, max_bytes=100)
    item = _item(source, "a.txt")
    path.write_text("x" * 200, encoding="utf-8")
    with pytest.raises(DocumentError, match="over the cap of 100 bytes"):
        source.read(item)


def test_a_missing_root_gives_an_incomplete_listing_and_does_not_raise(tmp_path: Path) -> None:
    listing = FilesystemSource(tmp_path / "nowhere").list()
    assert listing.items == ()
    assert not listing.complete
    [error] = listing.errors
    assert error.key == ""
    assert "nowhere" in error.message


def test_a_root_that_is_a_file_gives_an_incomplete_listing(tmp_path: Path) -> None:
    path = _write(tmp_path, "file.txt")
    listing = FilesystemSource(path).list()
    assert listing.items == ()
    assert not listing.complete
    assert "not a directory" in listing.errors[0].message


def test_a_directory_that_cannot_be_scanned_makes_the_listing_incomplete(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(root, "a.md")
    _write(root, "locked/b.md")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    listing = FilesystemSource(root).list()
    assert [i.key for i in listing.items] == ["a.md"]
    assert not listing.complete
    [error] = listing.errors
    assert error.key == "locked"
    assert "Permission denied" in error.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and lists files whatever their mode")
def test_an_unreadable_directory_and_file_are_reported(root: Path) -> None:
    locked = root / "locked"
    _write(locked, "b.md")
    path = _write(root, "a.md")
    source = FilesystemSource(root)
    item = _item(source, "a.md")
    locked.chmod(0)
    path.chmod(0)
    try:
        listing = source.list()
        assert not listing.complete
        with pytest.raises(DocumentError, match="permission denied"):
            source.read(item)
    finally:
        locked.chmod(0o755)
        path.chmod(0o644)


def test_a_file_replaced_by_a_directory_after_listing_cannot_be_read(root: Path) -> None:
    path = _write(root, "a.md")
    source = FilesystemSource(root)
    item = _item(source, "a.md")
    path.unlink()
    path.mkdir()
    with pytest.raises(DocumentError, match="no longer a regular file") as caught:
        source.read(item)
    assert caught.value.locator == item.locator


def test_a_file_vanishing_between_list_and_read_raises_a_document_error_naming_it(
    root: Path,
) -> None:
    path = _write(root, "sub/a.md")
    source = FilesystemSource(root)
    item = _item(source, "sub/a.md")
    path.unlink()
    with pytest.raises(DocumentError, match="no longer exists") as caught:
        source.read(item)
    assert caught.value.locator == item.locator
    assert item.locator in str(caught.value)
    shutil.rmtree(root / "sub")
    with pytest.raises(DocumentError, match="no longer exists"):
        source.read(item)


def test_a_parent_directory_swapped_for_a_link_out_of_the_root_is_not_read(
    root: Path, tmp_path: Path
) -> None:
    _write(root, "sub/a.md", "inside")
    _write(tmp_path / "outside", "a.md", "outside")
    source = FilesystemSource(root)
    item = _item(source, "sub/a.md")
    (root / "sub").rename(root / "moved")
    (root / "sub").symlink_to(tmp_path / "outside")
    with pytest.raises(DocumentError, match="outside the source root"):
        source.read(item)


def test_a_file_vanishing_during_listing_is_just_absent(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(root, "a.md")
    doomed = _write(root, "b.md")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        entries = list(real_scandir(path))
        doomed.unlink(missing_ok=True)  # gone after the scan, before its stat
        return _Entries(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    listing = FilesystemSource(root).list()
    assert [i.key for i in listing.items] == ["a.md"]
    assert listing.complete
    assert listing.errors == ()


class _Entries:
    """A stand-in for the scandir iterator over a fixed list of entries."""

    def __init__(self, entries: list[os.DirEntry[str]]) -> None:
        self.entries = entries

    def __enter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self.entries)

    def __exit__(self, *exc: object) -> None:
        return None


def test_stat_values_equal_os_stat(root: Path) -> None:
    path = _write(root, "a/b.md", "hello world")
    os.utime(path, ns=(1_600_000_000_123_456_789, 1_700_000_000_987_654_321))
    [item] = FilesystemSource(root).list().items
    st = os.stat(path)
    assert item.stat is not None
    assert item.stat.size == st.st_size == 11
    assert item.stat.mtime_ns == st.st_mtime_ns == 1_700_000_000_987_654_321
    assert item.stat.inode == st.st_ino


def test_listing_two_thousand_files_opens_none_of_them(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for d in range(20):
        for f in range(100):
            _write(root, f"d{d:02}/f{f:03}.md", "x")

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"list() opened {args[0]!r}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(io, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    listing = FilesystemSource(root).list()
    monkeypatch.undo()
    assert len(listing.items) == 2000
    assert listing.complete
    assert listing.items[0].key == "d00/f000.md"


def test_read_returns_the_bytes_of_a_listed_file(root: Path) -> None:
    _write(root, "a.md", "# Title\n\nbody")
    source = FilesystemSource(root)
    assert source.read(_item(source, "a.md")) == b"# Title\n\nbody"


def test_media_types_come_from_the_extension_or_a_given_function(root: Path) -> None:
    assert guess_media_type("a/B.MD") == "text/markdown"
    assert guess_media_type("x.markdown") == "text/markdown"
    assert guess_media_type("x.rst") == "text/plain"
    assert guess_media_type("x.htm") == "text/html"
    assert guess_media_type("x.pdf") == "application/pdf"
    assert guess_media_type("Makefile") == "application/octet-stream"
    assert guess_media_type("v1.2/README") == "application/octet-stream"
    _write(root, "a.md")
    [item] = FilesystemSource(root, media_type=lambda key: f"test/{key}").list().items
    assert item.media_type == "test/a.md"


def test_a_name_that_is_not_utf8_is_skipped_with_a_warning(root: Path) -> None:
    _write(root, "a.md")
    with open(os.path.join(os.fsencode(root), b"bad\xff.md"), "wb") as f:
        f.write(b"x")
    listing = FilesystemSource(root).list()
    assert [i.key for i in listing.items] == ["a.md"]
    assert any("not valid UTF-8" in w for w in listing.warnings)


def test_reading_a_small_file_allocates_by_its_size_not_by_the_cap(root: Path) -> None:
    _write(root, "small.txt", "tiny")
    source = FilesystemSource(root)  # the default cap: 50 MB
    [item] = source.list().items
    tracemalloc.start()
    try:
        assert source.read(item) == b"tiny"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000

