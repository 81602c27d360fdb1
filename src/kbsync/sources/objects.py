"""Objects in a store that fsspec reaches (S3, GCS, Azure, memory, local) as a source.

Policies, each one a promise the rest of kbsync relies on:

- One URL names the source: ``s3://bucket/prefix``, ``gs://bucket``,
  ``memory://folder``, ``file:///srv/docs``; a key is the object's path
  below it (POSIX, exactly as the store spells it). ``include``/``exclude``
  globs and hidden entries (a path segment starting with ``.``) behave as
  for a folder (:mod:`kbsync.sources.files`); a key ending in ``/`` (a
  "folder" marker object) is not a document.
- The stat gate of a bucket: the listing carries each object's change
  signals, so an unchanged object is never downloaded. With an ETag or a
  version id (S3, GCS, Azure) the stat is ``SourceStat(size, 0, signature)``
  where ``signature`` is a 63-bit digest of the version id and ETag: the
  store changes them whenever the bytes change, while its last-modified time
  also moves when identical bytes are written again. Without them the
  modification time (and inode, for local files) stands in, as for a
  folder. With nothing but a size (no filesystem that fsspec ships) there
  is no stat and every object is read, so the bytes gate decides.
- A modification time that stands in for the version is racy when it is not
  safely older than the listing (:meth:`~kbsync.model.SourceStat.listed`):
  a store whose times have 1-second resolution (``Last-Modified``, SFTP, FTP)
  gives a rewrite of the same size within that second the same stat, so the
  next sync compares the object's bytes rather than trust it. ETags and
  version ids change with the bytes: a stat made of them is never racy.
- A ``file://`` root names its device and inode with the listing
  (``Listing.root``), as a folder source does.
- ``validators`` carry the ETag and last-modified time, for the record.
- Renames: an object at a new key is read once, and the sync matches it by
  its text to the object that vanished, so the same bytes at a new key are a
  move and nothing is re-embedded.
- The listing never trusts a cache (fsspec keeps listings): it is dropped
  before each listing. Any error of the listing (network, permission,
  a missing bucket) makes it incomplete with an error naming the URL, so
  nothing is deleted; so does a root with nothing under it that does not
  exist (a misspelled prefix looks like an empty one).
- An object over ``max_bytes`` is reported in ``Listing.errors`` and not
  listed; ``read()`` streams, stops past the cap, and raises
  :class:`~kbsync.errors.DocumentError` naming the object's URL for any
  failure (gone since the listing, permission denied, archived).
- Credentials come from the environment or fsspec's own configuration
  (for S3: the AWS variables, profiles, instance roles). ``storage_options``
  takes non-secret options (``endpoint_url``, ``anon``, ``region_name``...);
  a secret option there is refused: ``storage_options_env`` maps an option to
  the NAME of the environment variable that holds its value.
"""

from __future__ import annotations

import os
import posixpath
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kbsync.core.identity import object_signature
from kbsync.core.media import media_type_for
from kbsync.errors import ConfigError, DependencyMissingError, DocumentError, ParameterError
from kbsync.model import (
    ItemError,
    KnownItem,
    Listing,
    RootIdentity,
    SourceItem,
    SourceStat,
    Validators,
)
from kbsync.sources import listing_of
from kbsync.sources.globs import glob_regex

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ObjectStoreSettings",
    "ObjectStoreSource",
    "S3Settings",
    "secret_option",
]

DEFAULT_MAX_BYTES = 50_000_000
_READ_BLOCK = 1 << 20
# What a listing may call these fields, across the filesystems fsspec knows.
_ETAG_FIELDS = ("ETag", "etag", "e_tag")
_VERSION_FIELDS = ("VersionId", "version_id", "generation")
_MTIME_FIELDS = ("LastModified", "last_modified", "updated", "mtime", "modified", "created")
# An option named like one of these is a credential: never in kbsync.toml.
_SECRET_WORDS = ("secret", "password", "passwd", "token", "credential", "account_key",
                 "sas", "connection_string", "private", "passphrase", "api_key")

def secret_option(name: str) -> bool:
    """Whether a storage option's name says it holds a credential (``key``, ``secret``...)."""
    lowered = name.lower()
    return lowered in ("key", "access_key", "aws_access_key_id") or any(
        w in lowered for w in _SECRET_WORDS)


def _secrets_in(options: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The names of the secret options in ``options``, nested tables included."""
    found: list[str] = []
    for name, value in options.items():
        if isinstance(value, Mapping):
            found += _secrets_in(value, f"{prefix}{name}.")
        elif secret_option(str(name)):
            found.append(prefix + str(name))
    return found


@dataclass(frozen=True, slots=True)
class ObjectStoreSettings:
    """A ``[[sources]]`` table of an object store, typed and checked; see the module docstring.

    ``scheme`` is not a key of the table: the ``s3`` kind sets it, and then the URL
    must have it.
    """

    url: str
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    storage_options_env: Mapping[str, str] = field(default_factory=dict)
    max_bytes: int = DEFAULT_MAX_BYTES
    include_hidden: bool = False

    def __post_init__(self) -> None:
        if not self.url:
            raise ParameterError("`url` is required (like s3://bucket/prefix)")
        if self.max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {self.max_bytes}")
        for pattern in (*self.include, *self.exclude):
            glob_regex(pattern)
        secrets = _secrets_in(self.storage_options)
        if secrets:
            raise ParameterError(
                f"storage_options holds {', '.join(secrets)}, a secret; never write one in "
                "kbsync.toml: name the environment variable that holds it in "
                f"storage_options_env (like {{ {secrets[0].split('.')[-1]} = \"MY_VAR\" }}), "
                "or let the store's own configuration provide it")

    def require_scheme(self, scheme: str) -> None:
        """ParameterError unless the URL starts with ``scheme://`` (an ``s3`` source's)."""
        if not self.url.lower().startswith(scheme + "://"):
            raise ParameterError(f"the url {self.url!r} must start with {scheme}://")

    def resolved_options(self, environ: Mapping[str, str]) -> dict[str, Any]:
        """``storage_options`` with each ``storage_options_env`` entry read from ``environ``.

        Raises ConfigError naming the variable when it is not set.
        """
        options = dict(self.storage_options)
        for option, variable in self.storage_options_env.items():
            value = environ.get(variable)
            if value is None:
                raise ConfigError(f"{self.url}: storage_options_env names {variable} for "
                                  f"{option}, and it is not set")
            options[option] = value
        return options


@dataclass(frozen=True, slots=True)
class S3Settings(ObjectStoreSettings):
    """An ``s3`` source's table: an object store whose URL is an ``s3://`` one."""

    def __post_init__(self) -> None:
        ObjectStoreSettings.__post_init__(self)
        self.require_scheme("s3")


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    regexes = [f"(?:{glob_regex(p)})" for p in patterns]
    return re.compile("|".join(regexes), re.DOTALL) if regexes else None


class ObjectStoreSource:
    """Objects below an fsspec URL, listed with the store's change signals and read by streaming.

    ``storage_options`` go to fsspec as they are (programmatic use may pass
    anything; the configuration file refuses secrets, see
    :class:`ObjectStoreSettings`). ``filesystem`` uses a filesystem already
    made instead of the one the URL names (then the URL only gives the root).
    ``clock`` gives the time a listing begins, in nanoseconds since the epoch (what
    its racy stats are measured against).
    """

    def __init__(
        self,
        url: str,
        include: Iterable[str] | str = ("**/*",),
        exclude: Iterable[str] | str = (),
        *,
        name: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        include_hidden: bool = False,
        filesystem: AbstractFileSystem | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        if name is not None and not name:
            raise ParameterError("name must not be empty")
        stripped = url.rstrip("/")
        self.url = url if stripped.endswith(":") or not stripped else stripped  # keep s3://
        self._name = name if name is not None else self.url
        self._include = _compile((include,) if isinstance(include, str) else include)
        self._exclude = _compile((exclude,) if isinstance(exclude, str) else exclude)
        self.max_bytes = max_bytes
        self.include_hidden = include_hidden
        self._fs, root = _filesystem(url, dict(storage_options or {}), filesystem)
        self._root = root.rstrip("/")
        self.clock = clock

    @property
    def name(self) -> str:
        """Stable name of the source; by default its URL."""
        return self._name

    @property
    def filesystem(self) -> AbstractFileSystem:
        """The fsspec filesystem the objects are listed and read through."""
        return self._fs

    @property
    def local_root(self) -> str | None:
        """The folder on this machine that holds the objects (a ``file://`` URL), else None."""
        protocol = self._fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        return self._root if "file" in protocols else None

    def selected(self, key: str) -> bool:
        """Whether a key is a document: not hidden, matched by include and by no exclude."""
        if not self.include_hidden and any(p.startswith(".") for p in key.split("/")):
            return False
        return (self._include is not None and self._include.fullmatch(key) is not None
                and (self._exclude is None or self._exclude.fullmatch(key) is None))

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Every selected object below the URL, sorted by key; downloads nothing.

        ``known`` is not needed: the stat gate compares what the listing returns.
        """
        del known
        return listing_of(self.scan())

    def scan(self) -> Generator[SourceItem | ItemError, None, Listing]:
        """The listing as items and errors, then its summary (see :data:`kbsync.sources.Entries`).

        The store is listed in one recursive call before anything is handed
        over: a listing that fails part way must not look like a shorter one.
        """
        fs, root = self._fs, self._root
        # Before any object's time is listed, so every read of this listing's objects comes later.
        listed_at = self.clock()
        where = self._root_identity()
        try:
            fs.invalidate_cache()
            found: dict[str, dict[str, Any]] = fs.find(root, withdirs=False, detail=True)
            if not found and not fs.isdir(root):
                return _failed(f"{self.url}: nothing is there (no such bucket, prefix or "
                               "folder, or it is not visible with these credentials); "
                               "the listing is incomplete, so nothing will be deleted")
        except Exception as exc:  # fsspec's filesystems raise whatever their client does
            return _failed(f"{self.url} could not be listed ({_reason(exc)}); "
                           "the listing is incomplete, so nothing will be deleted")
        prefix = root + "/" if root else ""
        for path in sorted(found):
            info = found[path]
            if info.get("type", "file") != "file":
                continue
            if not path.startswith(prefix):
                if path == root:
                    return _failed(f"{self.url} is an object, not a bucket, prefix or folder; "
                                   "name the folder above it (and use include to pick it)")
                continue
            key = path[len(prefix):]
            if not key or key.endswith("/") or not self.selected(key):
                continue
            locator = self._locator(path)
            size = info.get("size")
            if isinstance(size, int) and size > self.max_bytes:
                yield ItemError(key, f"{locator} is {size:,} bytes, over the cap of "
                                     f"{self.max_bytes:,} bytes (max_bytes); not listed")
                continue
            yield SourceItem(key, locator, media_type_for(key), _stat(info, listed_at),
                             _validators(info))
        return Listing(items=(), root=where)

    def read(self, item: SourceItem) -> bytes:
        """The object's bytes, streamed and stopped past ``max_bytes``.

        Raises DocumentError naming the object's URL when it cannot be read.
        """
        locator = item.locator
        path = self._path(item)
        cap = self.max_bytes
        data = bytearray()
        try:
            with self._fs.open(path, "rb") as f:
                while block := f.read(min(_READ_BLOCK, cap + 1 - len(data))):
                    data += block
                    if len(data) > cap:
                        raise DocumentError(
                            locator, f"is over the cap of {cap:,} bytes (max_bytes); not read")
        except DocumentError:
            raise
        except FileNotFoundError as exc:
            raise DocumentError(
                locator, "no longer exists: it was removed or renamed after the listing"
            ) from exc
        except PermissionError as exc:
            raise DocumentError(locator, f"cannot be read: permission denied ({exc})") from exc
        except Exception as exc:  # whatever the filesystem's client raises
            raise DocumentError(locator, f"cannot be read ({_reason(exc)})") from exc
        return bytes(data)

    def _root_identity(self) -> RootIdentity | None:
        """The device and inode of a ``file://`` root (None for a remote store, or a root
        that cannot be read: the listing says why)."""
        local = self.local_root
        if local is None:
            return None
        try:
            st = os.stat(local or "/")
        except OSError:
            return None
        return RootIdentity(st.st_dev, st.st_ino)

    def _locator(self, path: str) -> str:
        """The object's URL, as errors and search results show it."""
        return str(self._fs.unstrip_protocol(path))

    def _path(self, item: SourceItem) -> str:
        """The filesystem path of a listed item (its key below the root, never the locator
        alone: a key cannot lead out of the root)."""
        if item.key.startswith("/") or ".." in item.key.split("/"):
            raise DocumentError(item.locator, "its key leads out of the source; not read")
        return posixpath.join(self._root, item.key) if self._root else item.key


def _filesystem(url: str, options: dict[str, Any], filesystem: AbstractFileSystem | None,
                ) -> tuple[AbstractFileSystem, str]:
    """The filesystem and root path a URL names; a clear error for a missing package."""
    try:
        import fsspec
        from fsspec.core import split_protocol
    except ImportError as exc:
        raise DependencyMissingError("an object store source", "fsspec", "fsspec",
                                     exc) from exc
    if filesystem is not None:
        protocol, _ = split_protocol(url)
        return filesystem, str(filesystem._strip_protocol(url)) if protocol else url
    try:
        fs, root = fsspec.url_to_fs(url, **options)
    except ImportError as exc:
        protocol = (split_protocol(url)[0] or "file").lower()
        if protocol in ("s3", "s3a"):
            raise DependencyMissingError("an s3:// source", "s3", "s3fs", exc) from exc
        raise DependencyMissingError(f"a {protocol}:// source", "fsspec",
                                     f"the fsspec implementation of {protocol}",
                                     exc) from exc
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{url}: {exc}") from exc
    return fs, str(root)


def _first(info: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for n in names:
        value = info.get(n)
        if value not in (None, ""):
            return value
    return None


def _mtime_ns(value: Any) -> int | None:
    """A listing's time (datetime, epoch seconds or ISO 8601 text) in nanoseconds."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        when: datetime = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value * 1_000_000_000)
    return None


def _stat(info: Mapping[str, Any], listed_at: int) -> SourceStat | None:
    """What the stat gate compares for one listed object (see the module docstring);
    ``listed_at`` is when the listing began, in nanoseconds since the epoch."""
    size = info.get("size")
    if not isinstance(size, int):
        return None
    etag = _first(info, _ETAG_FIELDS)
    version = _first(info, _VERSION_FIELDS)
    if etag is not None or version is not None:
        return SourceStat(size, 0, object_signature(str(version or ""), str(etag or "")))
    mtime = _mtime_ns(_first(info, _MTIME_FIELDS))
    if mtime is None:
        return None
    inode = info.get("ino")
    return SourceStat.listed(size, mtime, inode if isinstance(inode, int) else 0, listed_at)


def _validators(info: Mapping[str, Any]) -> Validators | None:
    """The ETag and last-modified time of a listed object, when the store gives them."""
    etag = _first(info, _ETAG_FIELDS)
    mtime = _mtime_ns(_first(info, _MTIME_FIELDS))
    modified = (datetime.fromtimestamp(mtime / 1e9, UTC).isoformat(timespec="seconds")
                if mtime is not None else None)
    if etag is None and modified is None:
        return None
    return Validators(etag=None if etag is None else str(etag), last_modified=modified)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _failed(message: str) -> Listing:
    """An incomplete, empty listing: the caller must delete nothing."""
    return Listing(items=(), complete=False, errors=(ItemError(key="", message=message),))

