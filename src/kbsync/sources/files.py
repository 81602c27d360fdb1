"""A folder of documents as a source: walk a root, list regular files with their stat, read them.

Policies (DESIGN.md §6), each one a promise the rest of kbsync relies on:

- Keys are paths relative to the root in POSIX form, Unicode NFC, so the same
  file gets the same key on every platform and after a copy between
  file systems that store names decomposed (macOS) or composed (Linux).
  Two names that differ only in normalization would share a key: the first
  (in code-point order of the raw name) is listed, the other skipped with a
  warning in ``Listing.warnings`` (a twin directory with all it holds).
- ``include`` and ``exclude`` are globs matched against the whole key, case
  sensitively: ``*`` and ``?`` stay within one path segment, ``[...]`` is a
  character class, and a segment that is exactly ``**`` matches zero or more
  segments (``**/*.md`` matches ``a.md`` and ``x/y/a.md``; ``*.md`` matches
  only ``a.md``). A pattern ending in ``/`` means everything under that
  directory. An exclude pattern that matches a directory excludes everything
  under it (so ``exclude=("node_modules",)`` works), and that directory is
  not even scanned.
- Hidden entries, files or directories whose name starts with ``.`` (``.git``,
  ``.kbsync``, ``.env``, ``.DS_Store``), are skipped unless ``include_hidden``
  is true: they are version-control or tool state, or secrets, rather than
  documents.
- Regular files only. A FIFO, socket or device is skipped with a warning and
  is never opened (opening a FIFO blocks; opening a device can act on it).
- Symbolic links are followed only when their fully resolved target lies
  inside the root: a link to a file there is listed under the link's own key
  with the target's stat; a link to a directory there is descended into. A
  link that leads outside the root, dangles or loops is skipped with a
  warning, and a directory already on the current path is never entered
  again, so walking always ends.
- Listing never opens a file: the stat gate's ``SourceStat(size, mtime_ns,
  inode)`` comes from the directory scan (one ``lstat`` per entry). A stat whose
  modification time is not safely older than the start of the listing is marked
  ``racy`` (:meth:`~kbsync.model.SourceStat.listed`): on a file system with
  1-second (or FAT's 2-second) timestamps a rewrite of the same size within the
  same tick leaves the stat as it was, so the next sync compares its bytes.
- A file over ``max_bytes`` is reported in ``Listing.errors`` with its size and
  the cap, and not listed as an item.
- A file that vanishes while the listing runs is simply absent. A directory
  that cannot be scanned makes the listing incomplete (``complete=False``), so
  the caller deletes nothing; so does a missing root or a root that is not a
  directory. A directory that vanishes during the listing counts as removed
  only if its parent is still the directory it was found in and the root is
  still the same directory (device and inode) after the walk; otherwise (a
  folder renamed, a file system unmounted under the walk) the listing is
  incomplete. A root that is no longer the directory the walk began in makes one
  error for the whole source and ends the walk (a lazy unmount would otherwise
  report every folder left to scan). Listing never raises for those: a failed
  listing must not look like an empty folder. The listing names the root's
  device and inode (``Listing.root``), so the sync can tell a root on another
  device than last time (an unmounted disk's empty mount point).
- ``read()`` checks again that the locator is a regular file inside the root
  and under the cap, opening each path component without following links,
  and raises :class:`~kbsync.errors.DocumentError` naming the file otherwise.
- ``read()`` returns only bytes that the listed stat describes, since that stat
  is what gets recorded with them: the open file's stat before and after the
  read must both be the listed one. A file that changed since the listing or
  while it was read, or that is empty with a racy stat (a file caught between
  its truncation and its write), raises
  :class:`~kbsync.errors.DocumentChangingError`: it is left for the next sync,
  which lists its new stat, and never stored half-written. Reading it again at
  once would not help: a file that changed never has its listed stat again.
"""

from __future__ import annotations

import errno
import os
import stat
import time
import unicodedata
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import IO

from kbsync.core.media import media_type_for
from kbsync.errors import DocumentChangingError, DocumentError, ParameterError
from kbsync.model import ItemError, KnownItem, Listing, RootIdentity, SourceItem, SourceStat
from kbsync.sources import listing_of
from kbsync.sources.globs import (
    compile_globs,
    glob_directory,
    glob_patterns,
    glob_regex,
    match_glob,
)

__all__ = ["FilesystemSource", "glob_regex", "guess_media_type", "match_glob"]

DEFAULT_MAX_BYTES = 50_000_000


_O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY: int = getattr(os, "O_NOCTTY", 0)
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_O_BINARY: int = getattr(os, "O_BINARY", 0)


guess_media_type = media_type_for
"""Media type from the key's extension (case-insensitive); unknown ones are octet-stream."""



def _kind(mode: int) -> str:
    """A file type in words, for messages."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _reason(exc: OSError) -> str:
    """The operating system's words for an error, without the repeated file name."""
    return exc.strerror or exc.__class__.__name__


def _inside(root: str, path: str) -> bool:
    """Whether the resolved ``path`` is the resolved ``root`` or lies under it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _shown(path: str) -> str:
    """A path fit for a message even when its name is not valid UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return ascii(path)
    return path


@dataclass(slots=True)
class _Dir:
    """A directory waiting to be scanned: where it is, its key prefix, the directories above
    it, and its parent's path and identity (device, inode) when it was found there."""

    path: str
    prefix: str
    ancestors: frozenset[tuple[int, int]]
    parent: tuple[str, tuple[int, int]] | None = None
    ident: tuple[int, int] | None = None


def _same_directory(path: str, ident: tuple[int, int]) -> bool:
    """Whether ``path`` is still the directory it was (same device and inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == ident


class _Walk:
    """One listing run: the state of an iterative walk below a resolved root.

    ``listed_at`` is when the listing began (nanoseconds since the epoch): the time
    each stat's racy mark is measured against.
    """

    def __init__(self, source: FilesystemSource, root: str, root_st: os.stat_result,
                 listed_at: int) -> None:
        self.source = source
        self.root = root
        self.listed_at = listed_at
        self.found: list[SourceItem | ItemError] = []
        self.warnings: list[str] = []
        self.complete = True
        self.root_ident = (root_st.st_dev, root_st.st_ino)
        self.root_lost = False
        self.stack = [_Dir(root, "", frozenset({self.root_ident}), ident=self.root_ident)]
        self.taken: dict[str, str] = {}

    def entries(self) -> Generator[SourceItem | ItemError, None, Listing]:
        """Walk every directory, handing over what each one holds; then the listing's summary.

        Only the directories waiting to be scanned are held, never the whole listing.
        The root must still be the directory it was when the walk began (device and
        inode): a root renamed, replaced or unmounted meanwhile makes the walk incomplete.
        """
        while self.stack:
            self._scan(self.stack.pop())
            yield from self.found
            self.found.clear()
        self._root_moved()
        yield from self.found
        self.found.clear()
        return Listing(items=(), complete=self.complete, warnings=tuple(sorted(self.warnings)),
                       root=RootIdentity(*self.root_ident))

    def _root_moved(self) -> bool:
        """Whether the root is no longer the directory the walk began in (device and inode).

        Said once, as an error of the whole source, and the walk ends there: below a
        root unmounted (``umount -l``) or moved away, every folder left to scan would
        be "vanished", a line each, and none of them tells more than the first.
        """
        if self.root_lost:
            return True
        if _same_directory(self.root, self.root_ident):
            return False
        self.root_lost = True
        self.stack.clear()
        self._incomplete("", f"source root {_shown(self.root)} was moved, replaced or "
                             "unmounted during the listing; nothing will be deleted")
        return True

    def _scan(self, d: _Dir) -> None:
        """List one directory's entries; an unreadable directory makes the listing incomplete."""
        try:
            with os.scandir(d.path) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            if not d.prefix:  # the root itself went away: we know nothing
                self.root_lost = True
                self._incomplete("", f"source root {_shown(d.path)} vanished during the "
                                     "listing; nothing will be deleted")
            elif self._root_moved():
                pass
            elif d.parent is None or not _same_directory(*d.parent):
                # Its parent went too: a folder moved, not a directory removed from a
                # folder that is still there.
                self._incomplete(d.prefix.rstrip("/"),
                                 f"directory {_shown(d.path)} vanished during the listing "
                                 "with the folder above it; the listing is incomplete, so "
                                 "nothing will be deleted")
            return  # a directory removed from its parent during the listing: its files are gone
        except OSError as exc:
            self._incomplete(
                d.prefix.rstrip("/"),
                f"directory {_shown(d.path)} could not be listed ({_reason(exc)}); "
                "the listing is incomplete, so nothing will be deleted",
            )
            return
        if d.ident is not None and not _same_directory(d.path, d.ident):
            # The path now names another directory (the root remounted, a folder swapped).
            if not self._root_moved():
                self._incomplete(d.prefix.rstrip("/"),
                                 f"directory {_shown(d.path)} was replaced during the listing; "
                                 "the listing is incomplete, so nothing will be deleted")
            return
        # Twins (names equal after NFC) meet only within one directory: the first raw
        # name in code-point order takes the key.
        self.taken = {}
        for entry in sorted(entries, key=lambda e: e.name):
            self._entry(d, entry)

    def _incomplete(self, key: str, message: str) -> None:
        self.complete = False
        self.found.append(ItemError(key, message))

    def _twin(self, key: str, locator: str) -> bool:
        """Whether ``key`` is taken already in this directory (a warning says so)."""
        first = self.taken.setdefault(key, locator)
        if first == locator:
            return False
        # A warning, not an error with the key: the key is listed (by its twin),
        # and an error would say the document cannot be taken now.
        self.warnings.append(
            f"{key.rstrip('/')}: {_shown(locator)} has the same key as {_shown(first)} after "
            "Unicode NFC normalization; skipped, and the first name in code-point order is "
            "indexed"
        )
        return True

    def _entry(self, d: _Dir, entry: os.DirEntry[str]) -> None:
        """Classify one directory entry and record it; a vanished entry is just absent."""
        src = self.source
        name = entry.name
        if name.startswith(".") and not src.include_hidden:
            return
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            self.warnings.append(f"{_shown(entry.path)}: the name is not valid UTF-8; skipped")
            return
        key = d.prefix + unicodedata.normalize("NFC", name)
        try:
            if entry.is_symlink():
                self._link(d, entry, key)
            elif entry.is_dir(follow_symlinks=False):
                if not src.pruned(key):
                    self._dir(d, entry.path, key, entry.stat(follow_symlinks=False))
            elif src.selected(key):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    self._file(key, entry.path, st)
                elif stat.S_ISDIR(st.st_mode):  # replaced by a directory since the scan
                    if not src.pruned(key):
                        self._dir(d, entry.path, key, st)
                elif stat.S_ISLNK(st.st_mode):
                    self._link(d, entry, key)
                else:
                    self.warnings.append(
                        f"{key}: {_kind(st.st_mode)}, not a regular file; skipped and not opened"
                    )
        except FileNotFoundError:
            return
        except OSError as exc:
            self.found.append(ItemError(key, f"{_shown(entry.path)}: {_reason(exc)}"))

    def _dir(self, d: _Dir, path: str, key: str, st: os.stat_result) -> None:
        """Queue a directory unless it is already on the current path (a loop)."""
        if self._twin(key + "/", path):
            return
        ident = (st.st_dev, st.st_ino)
        if ident in d.ancestors:
            self.warnings.append(f"{key}: leads back to a directory above it (a loop); skipped")
            return
        parent = (d.path, d.ident) if d.ident is not None else None
        self.stack.append(_Dir(path, key + "/", d.ancestors | {ident}, parent, ident))

    def _file(self, key: str, locator: str, st: os.stat_result) -> None:
        """Record a regular file, or an error when it is over the size cap."""
        if self._twin(key, locator):
            return
        cap = self.source.max_bytes
        if st.st_size > cap:
            self.found.append(
                ItemError(
                    key,
                    f"{_shown(locator)} is {st.st_size:,} bytes, over the cap of {cap:,} bytes "
                    "(max_bytes); not listed",
                )
            )
            return
        self.found.append(SourceItem(key, locator, self.source.media_type(key),
                                     SourceStat.listed(st.st_size, st.st_mtime_ns, st.st_ino,
                                                       self.listed_at)))

    def _link(self, d: _Dir, entry: os.DirEntry[str], key: str) -> None:
        """Follow a symbolic link only when its resolved target is inside the root."""
        src = self.source
        if src.excluded(key):
            return
        target = os.path.realpath(entry.path)
        try:
            st = os.stat(target)
        except OSError as exc:
            if src.selected(key):
                self.warnings.append(
                    f"{key}: symbolic link is broken or loops ({_reason(exc)}); skipped"
                )
            return
        is_dir = stat.S_ISDIR(st.st_mode)
        if not is_dir and not src.selected(key):
            return
        if not _inside(self.root, target):
            self.warnings.append(
                f"{key}: symbolic link points outside the root (to {_shown(target)}); not followed"
            )
        elif is_dir:
            if not src.pruned(key):
                self._dir(d, entry.path, key, st)
        elif stat.S_ISREG(st.st_mode):
            self._file(key, entry.path, st)
        else:
            self.warnings.append(
                f"{key}: symbolic link to {_kind(st.st_mode)}, not a regular file; "
                "skipped and not opened"
            )


class FilesystemSource:
    """Documents in a folder: regular files below ``root`` whose keys match the globs.

    See the module docstring for the policies on keys, globs, hidden entries,
    symbolic links, special files, size caps and incomplete listings.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        include: Iterable[str] | str = ("**/*",),
        exclude: Iterable[str] | str = (),
        *,
        name: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        include_hidden: bool = False,
        media_type: Callable[[str], str] = guess_media_type,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        if name is not None and not name:
            raise ParameterError("name must not be empty")
        self._root = os.path.abspath(os.fspath(root))
        excludes = glob_patterns(exclude, "exclude")
        self._include = compile_globs(glob_patterns(include, "include"))
        self._exclude = compile_globs(excludes)
        # A directory is not scanned when an exclude glob matches it or means all of it.
        dirs = tuple(d for d in map(glob_directory, excludes) if d is not None)
        self._prune = compile_globs(excludes + dirs)
        self._name = name if name is not None else os.path.realpath(self._root)
        self.max_bytes = max_bytes
        self.include_hidden = include_hidden
        self.media_type = media_type
        #: Nanoseconds since the epoch, as the file system stamps times: what each
        #: listing measures the racy stats against.
        self.clock = clock

    @property
    def name(self) -> str:
        """Stable name of the source; by default the root's resolved path."""
        return self._name

    @property
    def root(self) -> str:
        """The root as resolved now (links in its own path followed)."""
        return os.path.realpath(self._root)

    def selected(self, key: str) -> bool:
        """Whether a file key matches an include glob and no exclude glob."""
        return (
            self._include is not None
            and self._include.fullmatch(key) is not None
            and not self.excluded(key)
        )

    def excluded(self, key: str) -> bool:
        """Whether a key matches an exclude glob."""
        return self._exclude is not None and self._exclude.fullmatch(key) is not None

    def pruned(self, key: str) -> bool:
        """Whether the directory with this key is excluded with everything under it."""
        return self._prune is not None and self._prune.fullmatch(key) is not None

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Every selected regular file below the root, sorted by key; never opens a file.

        ``known`` is not needed: the stat gate compares what the listing returns.
        """
        del known
        return listing_of(self.scan())

    def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
        """The listing one directory at a time, in no particular order, then its summary.

        Yields the items and the errors (those of a document, or with the key
        "" of the whole source) as the walk finds them and returns a
        :class:`Listing` without items that says whether the walk was complete
        and what it warns about. A sync uses this to hold no whole listing.
        """
        # Before any stat is taken, so every read of this listing's files comes later.
        listed_at = self.clock()
        root = self.root
        try:
            st = os.stat(root)
        except OSError as exc:
            return _failed(f"source root {_shown(root)} cannot be read ({_reason(exc)})")
        if not stat.S_ISDIR(st.st_mode):
            return _failed(f"source root {_shown(root)} is not a directory")
        return (yield from _Walk(self, root, st, listed_at).entries())

    def read(self, item: SourceItem) -> bytes:
        """The bytes of a listed file, after checking again that it may be read.

        Raises DocumentError when the file vanished, is no longer a regular
        file, resolves outside the root, is over the cap or cannot be read, and
        DocumentChangingError when it is not the version listed (see the module
        docstring).
        """
        locator = item.locator
        root = self.root
        real = os.path.realpath(locator)
        if not _inside(root, real) or real == root:
            raise DocumentError(
                locator, f"resolves to {_shown(real)}, outside the source root {root}; not read"
            )
        parts = tuple(os.path.relpath(real, root).split(os.sep))
        try:
            return self._read_within(root, parts, locator, item.stat)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise DocumentError(
                locator, "no longer exists: it was removed or renamed after the listing"
            ) from exc
        except PermissionError as exc:
            raise DocumentError(locator, "cannot be read: permission denied") from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise DocumentError(
                    locator, "a part of its path became a symbolic link; not followed"
                ) from exc
            raise DocumentError(locator, f"cannot be read ({_reason(exc)})") from exc

    def _read_within(self, root: str, parts: tuple[str, ...], locator: str,
                     listed: SourceStat | None) -> bytes:
        """Open ``root/parts...`` one component at a time, never following a link, and read it.

        Why component by component: a directory swapped for a link between the
        check and the open must not lead the read out of the root. ``listed`` is
        the stat the listing found, which the bytes returned must have.
        """
        cap = self.max_bytes
        dir_flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
        fd = os.open(root, dir_flags)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, dir_flags | _O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise DocumentError(
                    locator, f"is no longer a regular file (it is {_kind(st.st_mode)}); not read"
                )
            if st.st_size > cap:
                raise DocumentError(
                    locator,
                    f"is {st.st_size:,} bytes, over the cap of {cap:,} bytes (max_bytes); not read",
                )
            flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC | _O_BINARY
            file_fd = os.open(parts[-1], flags, dir_fd=fd)
        finally:
            os.close(fd)
        with open(file_fd, "rb") as f:
            now = os.fstat(f.fileno())
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise DocumentError(locator, "was replaced while being opened; not read")
            _check_listed(locator, listed, now)
            data = _read_capped(f, now.st_size, cap)
            if _version(os.fstat(f.fileno())) != _version(now):
                # Written to while it was read: the bytes may be half old, half new.
                raise DocumentChangingError(locator, "changed while it was read; left for the "
                                                     "next sync")
        if len(data) > cap:  # a file system whose sizes say less than the file holds
            raise DocumentError(
                locator, f"grew past the cap of {cap:,} bytes (max_bytes) while being read"
            )
        if not data and listed is not None and listed.racy:
            # What a file looks like between its truncation and its write: stored, it
            # would make its real text, one sync later, look like a collapse.
            raise DocumentChangingError(locator, "is empty and was modified just before the "
                                                 "listing (a write may be under way); left "
                                                 "for the next sync")
        return data


def _read_capped(f: IO[bytes], size: int, cap: int) -> bytes:
    """The file's bytes from where it stands, at most ``cap + 1`` of them (more than the cap
    says it is over)."""
    # Sized by the file, not the cap: a read of n bytes allocates n up front.
    expected = min(cap, size) + 1
    data = f.read(expected)
    if len(data) == expected:  # it grew since the stat: read on, up to the cap
        data += f.read(cap + 1 - expected)
    return data


def _version(st: os.stat_result) -> tuple[int, int, int]:
    """What changes when a file is written to: its size, modification and change times."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_listed(locator: str, listed: SourceStat | None, now: os.stat_result) -> None:
    """Raise DocumentChangingError unless the open file (``now``) is the version the listing
    found (``listed``): that stat is what gets recorded with the bytes, and it must not
    describe a version it never saw."""
    if listed is not None and (now.st_size, now.st_mtime_ns, now.st_ino) != (
            listed.size, listed.mtime_ns, listed.inode):
        raise DocumentChangingError(locator, "changed after it was listed; left for the next "
                                             "sync, which lists it anew")


def _failed(message: str) -> Listing:
    """An incomplete, empty listing: the caller must delete nothing."""
    return Listing(items=(), complete=False, errors=(ItemError(key="", message=message),))
