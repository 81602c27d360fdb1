"""A git repository as a source: the files of one ref, read from git's object store.

Why the ``git`` executable rather than pygit2 or dulwich: it is on every machine
that has repositories, it speaks every transport and credential helper the user
has set up, it reads every repository format (SHA-256 ones, partial clones,
alternates), and it adds no compiled dependency. It is run as a subprocess with
``-z`` output (no quoting of odd names), a process per listing step and one
``git cat-file --batch`` process for every blob read.

Policies, each a promise the rest of kbsync relies on:

- What is indexed is the tree of the commit ``ref`` names (default ``HEAD``: the
  default branch of a clone), never a working tree: uncommitted edits are not
  documents. ``subdirectory`` restricts it to one folder of the tree; keys are
  paths relative to it, POSIX form, Unicode NFC.
- ``include`` / ``exclude`` are the globs of folder sources
  (:mod:`kbsync.sources.files`); hidden entries (a segment starting with ``.``:
  ``.github/``, ``.gitignore``) are skipped unless ``include_hidden``. Symbolic
  links and submodules are skipped (a link's blob is its target's name, a
  submodule is another repository).
- The stat gate is the blob id: an item's ``SourceStat`` is (blob size, 0, the
  first 60 bits of the blob id) and its validators' ``etag`` the whole blob id,
  so an unchanged file is never read and a changed one always is. A hash of the
  content, not a time, it is never racy (:class:`~kbsync.model.SourceStat`).
- A local path is read in place (a clone or a bare repository); anything else
  (``https://``, ``ssh://``, ``file://``, ``user@host:path``) is fetched into a
  bare mirror under the state folder, ``.kbsync/git/``.
- A listing remembers the commit it listed and its tree (in the state folder), so
  the next one asks git for ``git diff-tree -r -M`` between the two commits and
  patches that tree: files the commits share are not even listed by git, and a
  file git finds renamed (``-M``, edits included) names its old key in
  ``renamed_from``, so that the sync reports it moved. Without
  that memory, or when the remembered commit is gone (a force-push, a garbage
  collection), the whole tree is listed with ``git ls-tree -r``. Either way the
  listing is exactly the tree of the new commit, whatever the last sync applied.
- Every document read carries ``git_commit`` (the commit its version was read at)
  and ``git_author_date`` (that commit's author date) in its metadata.
- A missing repository, an unknown ref, a failed fetch or any failing git command
  makes the listing incomplete, with an error naming the source and the
  repository: nothing is deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
import unicodedata
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import Path

from kbsync.core.media import media_type_for
from kbsync.errors import DocumentError, ParameterError, SourceError
from kbsync.model import ItemError, KnownItem, Listing, SourceItem, SourceStat, Validators
from kbsync.sources import listing_of
from kbsync.sources.files import DEFAULT_MAX_BYTES
from kbsync.sources.git_process import SAFE, Blobs, git_env, last_line
from kbsync.sources.globs import glob_regex

__all__ = ["GitError", "GitSettings", "GitSource", "is_remote"]

_TREE_FORMAT = 1
"""Version of the remembered-tree file; another version is ignored (the tree is listed)."""

_REGULAR_MODES = frozenset({"100644", "100755"})

_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")


class GitError(SourceError):
    """A git command failed; the message names the repository and what git said."""


def is_remote(repository: str) -> bool:
    """Whether ``repository`` is a URL git fetches (``scheme://`` or ``user@host:path``)
    rather than a local path."""
    return "://" in repository or _SCP_LIKE.match(repository) is not None


@dataclass(frozen=True, slots=True)
class GitSettings:
    """The settings of a ``kind = "git"`` source table."""

    repository: str
    """A local path (a clone or a bare repository) or any URL git can fetch."""
    ref: str = "HEAD"
    """A branch, tag or commit; ``HEAD`` is the default branch."""
    subdirectory: str = ""
    """Only this folder of the tree; keys are relative to it."""
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()
    include_hidden: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    fetch_timeout: float = 600.0
    """Seconds a clone or fetch of a remote repository may take."""

    def __post_init__(self) -> None:
        if not isinstance(self.repository, str) or not self.repository.strip():
            raise ParameterError("repository must be a path or URL of a git repository")
        if not isinstance(self.ref, str) or not self.ref or self.ref.startswith("-") \
                or any(c.isspace() or c in "\0" for c in self.ref):
            raise ParameterError(f"ref must be a branch, tag or commit name, got {self.ref!r}")
        sub = self.subdirectory
        if not isinstance(sub, str) or "\0" in sub or ".." in sub.split("/") \
                or sub.startswith("/"):
            raise ParameterError(f"subdirectory must be a relative folder of the repository "
                                 f"without '..', got {sub!r}")
        for what, patterns in (("include", self.include), ("exclude", self.exclude)):
            if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
                raise ParameterError(f"{what} must be a list of glob strings, got {patterns!r}")
        if not isinstance(self.max_bytes, int) or isinstance(self.max_bytes, bool) \
                or self.max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {self.max_bytes!r}")
        if not isinstance(self.fetch_timeout, (int, float)) or self.fetch_timeout <= 0:
            raise ParameterError(f"fetch_timeout must be a positive number of seconds, "
                                 f"got {self.fetch_timeout!r}")

    @property
    def folder(self) -> str:
        """The subdirectory as a tree path, without slashes at either end ("" for the root)."""
        return "/".join(p for p in self.subdirectory.split("/") if p not in ("", "."))


@dataclass(frozen=True, slots=True)
class _Entry:
    """A file of a tree: its mode, blob id and size."""

    mode: str
    blob: str
    size: int


@dataclass(slots=True)
class _Tree:
    """The files of a commit below the subdirectory, by repository path."""

    commit: str
    files: dict[str, _Entry] = field(default_factory=dict)
    renames: dict[str, str] = field(default_factory=dict)
    """New path to old path of each file git found renamed on the way to this commit."""


class GitSource:
    """The files of one ref of a git repository, read from its object store."""

    def __init__(self, settings: GitSettings, *, name: str | None = None,
                 state_dir: str | os.PathLike[str] | None = None,
                 media_type: Callable[[str], str] = media_type_for) -> None:
        if name is not None and not name:
            raise ParameterError("name must not be empty")
        self.settings = settings
        self._name = name if name is not None else settings.repository
        self._state = Path(state_dir) / "git" if state_dir is not None else None
        include = [f"(?:{glob_regex(p)})" for p in settings.include]
        exclude = [f"(?:{glob_regex(p)})" for p in settings.exclude]
        self._include = re.compile("|".join(include), re.DOTALL) if include else None
        self._exclude = re.compile("|".join(exclude), re.DOTALL) if exclude else None
        self.media_type = media_type
        self._git_dir: str | None = None
        self._blobs: Blobs | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def repository(self) -> str:
        return self.settings.repository

    def _where(self) -> str:
        return f"source {self._name!r} (git repository {_without_password(self.repository)})"

    # -- git -----------------------------------------------------------------------------

    def _run(self, args: Iterable[str], *, git_dir: str | None = None, bare: bool = False,
             stdin: bytes | None = None, timeout: float | None = None,
             ceiling: str | None = None) -> bytes:
        """Run one git command on ``git_dir`` (default: the repository; ``bare``: none, for
        clone and the lookup of a local repository); its output, or GitError."""
        args = list(args)
        verb = args[2] if args[0] == "-C" else args[0]  # what a message names
        argv = ["git", *SAFE]
        where = None if bare else git_dir if git_dir is not None else self._git_dir
        if where is not None:
            argv.append(f"--git-dir={where}")
        argv.extend(args)
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout,
                                  env=git_env(ceiling), check=False)
        except FileNotFoundError as exc:
            raise GitError(f"{self._where()}: the git executable is not installed "
                           "(or not on PATH)") from exc
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"{self._where()}: git {verb} took more than "
                           f"{timeout:g} s; stopped") from exc
        if done.returncode != 0:
            raise GitError(f"{self._where()}: git {verb} failed: {last_line(done.stderr)}")
        return done.stdout

    def _mirror(self) -> Path:
        assert self._state is not None
        return self._state / (_digest("mirror", self.repository) + ".git")

    def _located(self) -> str:
        """The git directory to read blobs from, without fetching: a process that only
        reads (a worker of a parallel sync) reads what the listing process fetched."""
        if self._git_dir is not None:
            return self._git_dir
        if is_remote(self.repository):
            if self._state is None or not (self._mirror() / "HEAD").is_file():
                raise GitError(f"{self._where()}: no mirror of it yet (a sync lists it first)")
            self._git_dir = str(self._mirror())
            return self._git_dir
        return self._open()

    def _open(self) -> str:
        """The git directory to read: the local repository, or the mirror, fetched now."""
        repo = self.repository
        if not is_remote(repo):
            path = os.path.abspath(repo)
            if not os.path.isdir(path):
                raise GitError(f"{self._where()}: no such folder")
            parent = os.path.dirname(path.rstrip(os.sep)) or path
            out = self._run(["-C", path, "rev-parse", "--absolute-git-dir"], bare=True,
                            ceiling=parent) if self._git_dir is None else b""
            if out:
                self._git_dir = out.decode("utf-8", "surrogateescape").strip()
            assert self._git_dir is not None
            return self._git_dir
        if self._state is None:
            raise GitError(f"{self._where()}: a remote repository needs a state folder "
                           "to keep its mirror in")
        mirror = self._mirror()
        timeout = self.settings.fetch_timeout
        if not (mirror / "HEAD").is_file():
            self._state.mkdir(parents=True, exist_ok=True)
            # Cloned beside its place, then renamed: a failed clone leaves no half mirror.
            with tempfile.TemporaryDirectory(dir=self._state, prefix=".clone-") as tmp:
                target = os.path.join(tmp, "mirror.git")
                self._run(["clone", "--mirror", "--quiet", "--", repo, target], bare=True,
                          timeout=timeout, ceiling=str(self._state))
                os.replace(target, mirror)
        else:
            self._run(["fetch", "--prune", "--quiet", "origin"], git_dir=str(mirror),
                      timeout=timeout)
        self._git_dir = str(mirror)
        return self._git_dir

    def _commit(self) -> tuple[str, str]:
        """The commit the ref names now, and its author date (ISO 8601)."""
        ref = self.settings.ref
        try:
            out = self._run(["rev-parse", "--verify", "--quiet", "--end-of-options",
                             ref + "^{commit}"])
        except GitError as exc:
            raise GitError(f"{self._where()}: ref {ref!r} names no commit there") from exc
        commit = out.decode("ascii").strip()
        date = self._run(["show", "-s", "--format=%aI", commit]).decode("ascii", "replace")
        return commit, date.strip()

    def _check_folder(self, commit: str) -> None:
        """GitError unless the subdirectory is a folder of the commit's tree: a misspelled
        one, or one moved away upstream, must not look like a folder emptied."""
        folder = self.settings.folder
        if not folder:
            return
        try:
            kind = self._run(["cat-file", "-t", f"{commit}:{folder}"]).strip()
        except GitError:
            kind = b""
        if kind != b"tree":
            raise GitError(f"{self._where()}: subdirectory {folder!r} is not a folder of "
                           f"commit {commit[:12]} ({self.settings.ref})")

    def _ls_tree(self, commit: str) -> _Tree:
        """Every file of the commit below the subdirectory (``git ls-tree -r``)."""
        folder = self.settings.folder
        args = ["ls-tree", "-r", "-z", "--long", "--full-tree", commit]
        if folder:
            args += ["--", folder + "/"]
        tree = _Tree(commit)
        for record in self._run(args).split(b"\0"):
            if not record:
                continue
            meta, _, raw = record.partition(b"\t")
            mode, kind, blob, size = meta.decode("ascii").split()
            if kind == "blob":
                tree.files[raw.decode("utf-8", "surrogateescape")] = _Entry(
                    mode, blob, int(size) if size != "-" else 0)
        return tree

    def _patched(self, old: _Tree, commit: str) -> _Tree:
        """The tree of ``commit``: ``old`` patched with what ``git diff-tree`` says changed."""
        folder = self.settings.folder
        args = ["diff-tree", "-r", "-z", "-M", "--raw", "--no-commit-id", old.commit, commit]
        if folder:
            args += ["--", folder + "/"]
        fields = self._run(args).split(b"\0")
        files = dict(old.files)
        renames: dict[str, str] = {}
        added: dict[str, tuple[str, str]] = {}
        i = 0
        while i < len(fields) and fields[i]:
            meta = fields[i].decode("ascii").lstrip(":").split()
            status = meta[4][0]
            paths = 2 if status in "RC" else 1
            names = [f.decode("utf-8", "surrogateescape") for f in fields[i + 1:i + 1 + paths]]
            i += 1 + paths
            if status in "DR":
                files.pop(names[0], None)
            if status == "R":
                renames[names[1]] = names[0]
            if status != "D":
                files.pop(names[-1], None)
                if meta[1] != "000000" and meta[1] != "160000":
                    added[names[-1]] = (meta[1], meta[3])
        sizes = self._sizes(sorted({blob for _, blob in added.values()}))
        for path, (mode, blob) in added.items():
            files[path] = _Entry(mode, blob, sizes.get(blob, 0))
        return _Tree(commit, files, renames)

    def _sizes(self, blobs: list[str]) -> dict[str, int]:
        """The size of each blob, from one ``git cat-file --batch-check``."""
        if not blobs:
            return {}
        out = self._run(["cat-file", "--batch-check"], stdin="".join(b + "\n" for b in blobs)
                        .encode("ascii"))
        sizes: dict[str, int] = {}
        for line in out.decode("ascii", "replace").splitlines():
            parts = line.split()
            if len(parts) == 3:
                sizes[parts[0]] = int(parts[2])
        return sizes

    # -- the remembered tree -------------------------------------------------------------

    def _memory(self) -> Path | None:
        if self._state is None:
            return None
        s = self.settings
        return self._state / (_digest("tree", self._name, s.repository, s.folder) + ".json")

    def _recall(self) -> _Tree | None:
        """The tree the previous listing listed, if remembered and its commit still exists."""
        path = self._memory()
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != _TREE_FORMAT:
                return None
            tree = _Tree(str(data["commit"]), {p: _Entry(str(m), str(b), int(n))
                                               for p, (m, b, n) in data["files"].items()},
                         {str(p): str(o) for p, o in data.get("renames", {}).items()})
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable or damaged: list the whole tree instead
        try:
            self._run(["cat-file", "-e", tree.commit + "^{commit}"])
        except GitError:
            return None  # force-pushed away and collected: nothing to diff against
        return tree

    def _remember(self, tree: _Tree) -> None:
        """Keep the tree for the next listing (written whole, then renamed into place)."""
        path = self._memory()
        if path is None:
            return
        data = {"format": _TREE_FORMAT, "commit": tree.commit,
                "files": {p: [e.mode, e.blob, e.size] for p, e in tree.files.items()},
                "renames": tree.renames}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tree-")
            with os.fdopen(fd, "w", encoding="ascii") as f:
                # dumps, not dump: dump streams through the pure-Python encoder (5x slower).
                # ASCII escapes keep a name that is not UTF-8 (a lone surrogate) as it is.
                f.write(json.dumps(data, separators=(",", ":")))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

    # -- listing -------------------------------------------------------------------------

    def selected(self, key: str) -> bool:
        """Whether a key matches an include glob, no exclude glob, and is not hidden."""
        if not self.settings.include_hidden and any(p.startswith(".") for p in key.split("/")):
            return False
        return (self._include is not None and self._include.fullmatch(key) is not None
                and not (self._exclude is not None and self._exclude.fullmatch(key)))

    def _key_of(self, path: str | None, prefix: str) -> str | None:
        """The key of a repository path, if it is one this source selects."""
        if path is None or not path.startswith(prefix):
            return None
        try:
            key = unicodedata.normalize("NFC", path[len(prefix):].encode("utf-8").decode("utf-8"))
        except UnicodeEncodeError:
            return None
        return key if self.selected(key) else None

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Every selected file of the ref's tree, sorted by key; reads no blob."""
        del known
        return listing_of(self.scan())

    def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
        """The listing as :data:`~kbsync.sources.Entries`; a failing git makes it incomplete."""
        with self._lock:
            try:
                self._open()
                commit, date = self._commit()
                self._check_folder(commit)
                old = self._recall()
                if old is not None and old.commit == commit:
                    tree = old  # listed before (a dry run, say): the same files and renames
                elif old is not None:
                    tree = self._patched(old, commit)
                else:
                    tree = self._ls_tree(commit)
            except GitError as exc:
                return _failed(f"{exc}; nothing will be deleted")
            except (OSError, ValueError) as exc:  # the state folder, or output git never gives
                return _failed(f"{self._where()}: cannot be listed ({type(exc).__name__}: "
                               f"{exc}); nothing will be deleted")
            if old is None or old.commit != commit:
                self._remember(tree)
        warnings: list[str] = []
        prefix = self.settings.folder + "/" if self.settings.folder else ""
        metadata = (("git_author_date", date), ("git_commit", commit))
        taken: dict[str, str] = {}
        cap = self.settings.max_bytes
        for path in sorted(tree.files):
            entry = tree.files[path]
            if not path.startswith(prefix):
                continue
            try:
                relative = path[len(prefix):].encode("utf-8").decode("utf-8")
            except UnicodeEncodeError:
                warnings.append(f"{path!a}: the name is not valid UTF-8; skipped")
                continue
            key = unicodedata.normalize("NFC", relative)
            if not self.selected(key):
                continue
            if entry.mode not in _REGULAR_MODES:
                if entry.mode == "120000":
                    warnings.append(f"{key}: a symbolic link in the repository; not followed")
                continue
            first = taken.setdefault(key, path)
            if first != path:
                warnings.append(f"{key}: {path!r} has the same key as {first!r} after Unicode "
                                "NFC normalization; skipped")
                continue
            if entry.size > cap:
                yield ItemError(key, f"{path} is {entry.size:,} bytes, over the cap of "
                                     f"{cap:,} bytes (max_bytes); not listed")
                continue
            yield SourceItem(key, path, self.media_type(key),
                             stat=SourceStat(entry.size, 0, int(entry.blob[:15], 16)),
                             validators=Validators(etag=entry.blob), metadata=metadata,
                             renamed_from=self._key_of(tree.renames.get(path), prefix))
        return Listing(items=(), warnings=tuple(sorted(warnings)), revision=f"{commit} {date}")

    def read(self, item: SourceItem) -> bytes:
        """The bytes of the item's blob, from the one ``git cat-file --batch`` process."""
        blob = item.validators.etag if item.validators is not None else None
        if not blob or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", blob):
            raise DocumentError(item.locator, "has no blob id to read (not listed by git)")
        with self._lock:
            if self._blobs is None:
                try:
                    git_dir = self._located()
                except GitError as exc:
                    raise DocumentError(item.locator, str(exc)) from exc
                self._blobs = Blobs(git_dir, self._where())
            return self._blobs.read(blob, item.locator, self.settings.max_bytes)

    def close(self) -> None:
        """Stop the ``git cat-file`` process, if one runs (a later read starts another)."""
        with self._lock:
            if self._blobs is not None:
                self._blobs.close()
                self._blobs = None


def _without_password(repository: str) -> str:
    """A URL fit for a message: a password (or token) written in it is not shown."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", repository)


def _digest(*parts: str) -> str:
    """A short name for a file of the state folder, from what identifies it."""
    h = blake2b(digest_size=12)
    for p in ("kbsync:git", *parts):
        h.update(len(p.encode("utf-8", "surrogateescape")).to_bytes(4, "big"))
        h.update(p.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _failed(message: str) -> Listing:
    """An incomplete, empty listing: the caller must delete nothing."""
    return Listing(items=(), complete=False, errors=(ItemError(key="", message=message),))

