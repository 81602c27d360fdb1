"""``WarcSource``: the WARC files of a crawl as a kbsync source (see ``docs/warc.md``).

The listing is the set of files ``paths`` names now, each scanned for its captures
(:func:`.records.scan_file`), merged into one listing (:func:`.captures.merge`): each
page is what its latest decisive capture says. A path that matches nothing or cannot
be listed, and a file that cannot be read to its end, make the listing incomplete, so
nothing is deleted. Files are the unit a driver splits the work on: :meth:`shards`
names them, :meth:`scan_shard` scans one (in any process), and :func:`.captures.merge`
joins the scans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbsync.errors import ConfigError, DependencyMissingError, DocumentError, ParameterError
from kbsync.model import KnownItem, Listing, SourceItem
from kbsync.sources.warc.captures import ShardScan, merge
from kbsync.sources.warc.index import ScanIndex, signature_of
from kbsync.sources.warc.records import read_payload, scan_file
from kbsync.sources.warc.settings import DEFAULT_MAX_BYTES, WARC_SUFFIXES, is_glob
from kbsync.sources.web.config import DEFAULT_MEDIA_TYPES

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["Shards", "WarcSource"]


@dataclass(frozen=True, slots=True)
class Shards:
    """The WARC files ``paths`` names now (URLs, sorted), and why a path named none
    (each failure makes the listing incomplete)."""

    files: tuple[str, ...]
    failures: tuple[str, ...] = ()


class WarcSource:
    """Pages captured in WARC files (local paths, or any filesystem fsspec reaches).

    ``paths`` are WARC files, folders holding them, or globs of them; local paths
    are taken as they are (the ``warc`` kind makes them relative to ``kbsync.toml``).
    ``media_types`` (None: all) and ``max_bytes`` are as the settings say;
    ``storage_options`` go to fsspec; ``filesystem`` reads every path through a
    filesystem already made (tests), instead of the one each URL names;
    ``index_dir`` keeps each file's scan there between listings (:mod:`.index`).
    """

    def __init__(
        self,
        paths: Iterable[str] | str,
        *,
        name: str | None = None,
        media_types: Iterable[str] | None = DEFAULT_MEDIA_TYPES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        storage_options: Mapping[str, Any] | None = None,
        filesystem: AbstractFileSystem | None = None,
        index_dir: Path | None = None,
    ) -> None:
        self.paths = (paths,) if isinstance(paths, str) else tuple(paths)
        if not self.paths or not all(self.paths):
            raise ParameterError("paths must name WARC files, folders or globs")
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {max_bytes!r}")
        if name is not None and not name:
            raise ParameterError("name must not be empty")
        self._name = name if name is not None else self.paths[0]
        self.media_types = (None if media_types is None
                            else frozenset(t.lower() for t in media_types))
        self.max_bytes = max_bytes
        self._options = dict(storage_options or {})
        self._filesystem = filesystem
        self._index = None if index_dir is None else ScanIndex(index_dir)

    @property
    def name(self) -> str:
        """Stable name of the source; by default its first path."""
        return self._name

    def shards(self) -> Shards:
        """The WARC files the paths name now: the unit a driver splits the listing on."""
        files: set[str] = set()
        failures: list[str] = []
        for pattern in self.paths:
            try:
                fs, path = self._resolve(pattern)
                fs.invalidate_cache()
                found = _files(fs, path)
            except (DependencyMissingError, ConfigError):
                raise
            except Exception as exc:  # fsspec's filesystems raise whatever their client does
                failures.append(f"{pattern} could not be listed ({_reason(exc)}); the "
                                "listing is incomplete, so nothing will be deleted")
                continue
            if not found:
                failures.append(f"{pattern}: no WARC file is there (*.warc, *.warc.gz); the "
                                "listing is incomplete, so nothing will be deleted")
            files.update(str(fs.unstrip_protocol(p)) for p in found)
        return Shards(tuple(sorted(files)), tuple(failures))

    def scan_shard(self, file: str) -> ShardScan:
        """The captures of one WARC file (a URL :meth:`shards` named); an error in the scan
        when it cannot be read, never an exception. With an ``index_dir``, the kept scan
        of a file whose size and time are unchanged (:mod:`.index`)."""
        try:
            fs, path = self._resolve(file)
            info = fs.info(path) if self._index is not None else {}
            signature = signature_of(info) if self._index is not None else None
            if self._index is not None and signature is not None:
                kept = self._index.get(file, signature)
                if kept is not None:
                    return kept
            with fs.open(path, "rb") as stream:
                scan = scan_file(stream, file)
            if self._index is not None and signature is not None:
                self._index.put(scan, signature, info)
            return scan
        except (DependencyMissingError, ConfigError):
            raise
        except Exception as exc:  # the file vanished, permission, network
            return ShardScan(file, errors=(f"{file} could not be read ({_reason(exc)}); the "
                                           "listing is incomplete",))

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Every page the files capture, as its latest decisive capture says.

        ``known`` tells which pages the store holds: an error that keeps a page is
        reported only for a stored one, and a revisit of a payload no file holds
        lists a stored page unchanged when the digests agree.
        """
        shards = self.shards()
        return merge((self.scan_shard(f) for f in shards.files), known, self.media_types,
                     shards.failures)

    def read(self, item: SourceItem) -> bytes:
        """The page's payload: the record the listing found, by its file and offset."""
        where = dict(item.metadata)
        file, offset, record_id = (where.get("warc_file"), where.get("warc_offset"),
                                   where.get("warc_record_id", ""))
        if not file or not offset or not offset.isdigit():
            raise DocumentError(item.locator, "it is a revisit of a capture that no file of "
                                              "the source holds; its payload cannot be read")
        at = f"{file} at offset {offset}"
        try:
            fs, path = self._resolve(file)
            with fs.open(path, "rb") as stream:
                return read_payload(stream, int(offset), record_id, self.max_bytes,
                                    item.locator, at)
        except DocumentError:
            raise
        except FileNotFoundError as exc:
            raise DocumentError(item.locator, f"{at}: the file no longer exists") from exc
        except Exception as exc:  # whatever the filesystem's client raises
            raise DocumentError(item.locator, f"{at}: cannot be read ({_reason(exc)})") from exc

    def _resolve(self, url: str) -> tuple[AbstractFileSystem, str]:
        """The filesystem and path of a path or URL; a clear error for a missing package."""
        try:
            import fsspec
            from fsspec.core import split_protocol
        except ImportError as exc:
            raise DependencyMissingError("The WARC source", "warc", "fsspec", exc) from exc
        if self._filesystem is not None:
            protocol, _ = split_protocol(url)
            fs = self._filesystem
            return fs, str(fs._strip_protocol(url)) if protocol else url
        try:
            fs, path = fsspec.url_to_fs(url, **self._options)
        except ImportError as exc:
            protocol = (split_protocol(url)[0] or "file").lower()
            extra = "s3" if protocol in ("s3", "s3a") else "fsspec"
            raise DependencyMissingError(f"a {protocol}:// WARC path", extra,
                                         f"the fsspec implementation of {protocol}",
                                         exc) from exc
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{url}: {exc}") from exc
        return fs, str(path)

    def __repr__(self) -> str:
        return f"WarcSource(name={self._name!r}, paths={self.paths!r})"


def _files(fs: AbstractFileSystem, path: str) -> list[str]:
    """The WARC files a path names: the file, those below a folder, those a glob matches."""
    if is_glob(path):
        found = fs.glob(path, detail=True)
        return [p for p, info in found.items()
                if info.get("type", "file") == "file" and _is_warc(p)]
    if fs.isdir(path):
        below = fs.find(path, withdirs=False, detail=True)
        return [p for p, info in below.items()
                if info.get("type", "file") == "file" and _is_warc(p)]
    return [path] if fs.isfile(path) else []


def _is_warc(path: str) -> bool:
    return path.lower().endswith(WARC_SUFFIXES)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text
