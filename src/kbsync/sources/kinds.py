"""Source kinds: the one place that maps a ``[[sources]]`` table's ``kind`` to its adapter.

A kind is a name, a frozen settings type (every key of its table, typed and checked
before anything runs, see :mod:`kbsync.settings`) and a build function. A new kind of
source is one :class:`SourceKind` here and one entry in :data:`SOURCE_KINDS`; the
configuration, ``kbsync init``/``sources add``, the dashboard and ``kbsync watch`` ask
the kind, never the keys of the table. Adapters with an extra are imported inside
:meth:`SourceKind.build`, so a missing extra fails only the source that needs it, while
its settings are checked all the same. A kind's settings type is imported when a table of
that kind is checked: reading a configuration of folders loads no crawler or git code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kbsync.errors import ConfigError, ParameterError
from kbsync.settings import parse_settings
from kbsync.sources.globs import glob_regex

if TYPE_CHECKING:
    from kbsync.sources import Source
    from kbsync.sources.objects import ObjectStoreSettings

__all__ = [
    "SOURCE_KINDS",
    "CrawlProgress",
    "FolderKind",
    "FolderSettings",
    "GitKind",
    "ObjectStoreKind",
    "SourceConfig",
    "SourceKind",
    "WarcKind",
    "WebKind",
    "infer_kind",
    "kind_for_argument",
    "source_kind",
]

CrawlProgress = Callable[[str, int, int], None]
"""``(source name, pages done, pages known)``: how a crawl reports its progress."""


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """One ``[[sources]]`` table: its name, its kind, and its other keys as the file has them."""

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> Any:
        """The table's keys checked into the kind's settings type; ConfigError naming the key."""
        kind = source_kind(self.kind)
        return parse_settings(self.options, kind.settings_type, f"[[sources]] {self.name!r}:")

    @property
    def location(self) -> str:
        """Where the source is, as status and the dashboard show it."""
        return source_kind(self.kind).location(self)


class SourceKind(Protocol):
    """What kbsync needs to know of one kind of source."""

    name: str

    @property
    def settings_type(self) -> type:
        """The frozen dataclass a table of this kind is checked into (its keys besides
        ``name`` and ``kind``)."""
        ...

    def claims(self, argument: str) -> bool:
        """Whether ``kbsync init ARG`` or ``kbsync sources add ARG`` names a source of this kind."""
        ...

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        """The table for ``argument`` (a path relative to ``root``, a URL, …)."""
        ...

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        """The adapter; ConfigError naming the source for a setting it refuses."""
        ...

    def location(self, config: SourceConfig) -> str:
        """Where the source is, in a few words."""
        ...

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        """The folder ``kbsync watch`` watches for file events; None to check on its interval."""
        ...


@dataclass(frozen=True, slots=True)
class FolderSettings:
    """A folder source's table: the folder (relative to ``kbsync.toml``) and its globs."""

    path: str
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.path:
            raise ParameterError("path must name a folder")
        for key, patterns in (("include", self.include), ("exclude", self.exclude)):
            for pattern in patterns:
                try:
                    glob_regex(pattern)
                except ParameterError as exc:
                    raise ParameterError(f"{key}: {exc}") from None


class FolderKind:
    """A folder of files (``path``, ``include`` and ``exclude`` globs)."""

    name = "folder"
    settings_type = FolderSettings

    def claims(self, argument: str) -> bool:
        return "://" not in argument

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        folder = Path(argument)
        shown = str(folder if folder.is_absolute() else folder.as_posix())
        return SourceConfig(name=name or folder.name or shown, kind=self.name,
                            options={"path": shown, "include": ["**/*"], "exclude": []})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.files import FilesystemSource

        settings: FolderSettings = config.settings
        return FilesystemSource(root / settings.path, settings.include, settings.exclude,
                                name=config.name)

    def location(self, config: SourceConfig) -> str:
        return str(config.options.get("path", ""))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return root / str(config.options.get("path", ""))


class WebKind:
    """A website: seed ``urls`` and/or ``sitemaps``, and the crawl's settings."""

    name = "web"

    @property
    def settings_type(self) -> type:
        from kbsync.sources.web.config import WebSettings

        return WebSettings

    def claims(self, argument: str) -> bool:
        return argument.startswith(("http://", "https://"))

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        host = argument.split("://", 1)[1].split("/", 1)[0]
        return SourceConfig(name=name or host, kind=self.name, options={"urls": [argument]})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.web.source import WebSource  # needs the `web` extra

        return WebSource(config.settings, name=config.name, progress=progress)

    def location(self, config: SourceConfig) -> str:
        return ", ".join(str(u) for u in (*config.options.get("urls", ()),
                                          *config.options.get("sitemaps", ())))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return None


class ObjectStoreKind:
    """Objects below an fsspec ``url`` (``s3://bucket/prefix``, ``gs://``, ``memory://``...).

    ``s3`` takes ``s3://`` URLs only (extra ``s3``); ``fsspec`` any URL (extra ``fsspec``).
    """

    def __init__(self, name: str, schemes: tuple[str, ...], settings_name: str) -> None:
        self.name = name
        self._schemes = schemes
        self._settings_name = settings_name  # of kbsync.sources.objects

    @property
    def settings_type(self) -> type[ObjectStoreSettings]:
        from kbsync.sources import objects

        found: type[ObjectStoreSettings] = getattr(objects, self._settings_name)
        return found

    def claims(self, argument: str) -> bool:
        return argument.lower().startswith(tuple(f"{s}://" for s in self._schemes))

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        # The bucket names the source, a local folder its last part: a name without a
        # slash reads as one word in filters and reports.
        scheme, _, path = argument.partition("://")
        parts = [p for p in path.split("/") if p]
        shown = (parts[-1] if scheme.lower() == "file" else parts[0]) if parts else argument
        return SourceConfig(name=name or shown, kind=self.name,
                            options={"url": argument, "include": ["**/*"], "exclude": []})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.objects import ObjectStoreSource

        settings: ObjectStoreSettings = config.settings
        try:  # an s3:// source needs the `s3` extra, others `fsspec` (the error says which)
            return ObjectStoreSource(settings.url, settings.include, settings.exclude,
                                     name=config.name, max_bytes=settings.max_bytes,
                                     include_hidden=settings.include_hidden,
                                     storage_options=settings.resolved_options(os.environ))
        except ParameterError as exc:
            raise ConfigError(f"source {config.name!r}: {exc}") from exc

    def location(self, config: SourceConfig) -> str:
        return str(config.options.get("url", ""))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        url = str(config.options.get("url", ""))
        if not url.lower().startswith("file://"):
            return None  # a bucket has no file events: checked on the interval
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(url).path))


class GitKind:
    """The files of a ref of a git repository (``repository``, ``ref``, ``subdirectory``,
    ``include`` and ``exclude`` globs); ``kbsync init git+URL`` or ``git+PATH``."""

    name = "git"
    _PREFIX = "git+"

    @property
    def settings_type(self) -> type:
        from kbsync.sources.git import GitSettings

        return GitSettings

    def claims(self, argument: str) -> bool:
        return argument.startswith(self._PREFIX)

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        repository = argument.removeprefix(self._PREFIX)
        remote = "://" in repository or re.match(r"[\w.-]+@[\w.-]+:", repository)
        if not remote and not (root / repository).is_dir():  # as a missing folder is refused
            where = "" if Path(repository).is_absolute() else f" (relative to {root})"
            raise ConfigError(f"{repository}: no such repository{where}")
        tail = repository.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return SourceConfig(name=name or tail.removesuffix(".git") or repository,
                            kind=self.name, options={"repository": repository})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.git import GitSettings, GitSource, is_remote

        settings: GitSettings = config.settings
        if not is_remote(settings.repository):  # a local path is relative to the knowledge base
            settings = replace(settings, repository=str(root / settings.repository))
        return GitSource(settings, name=config.name, state_dir=root / ".kbsync")

    def location(self, config: SourceConfig) -> str:
        where = str(config.options.get("repository", ""))
        ref = config.options.get("ref")
        return f"{where}@{ref}" if ref else where

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return None


class WarcKind:
    """The WARC files of a crawl (``paths``: files, folders or globs, local or fsspec URLs);
    ``kbsync init crawl.warc.gz``, ``'crawl/*.warc.gz'`` or ``warc+FOLDER``."""

    name = "warc"
    _PREFIX = "warc+"

    @property
    def settings_type(self) -> type:
        from kbsync.sources.warc.settings import WarcSettings

        return WarcSettings

    def claims(self, argument: str) -> bool:
        from kbsync.sources.warc.settings import is_glob

        tail = argument.rstrip("/").rsplit("/", 1)[-1].lower()
        return argument.startswith(self._PREFIX) or tail.endswith((".warc", ".warc.gz")) or (
            ".warc" in tail and is_glob(tail))

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        from kbsync.sources.warc.settings import is_glob

        path = argument.removeprefix(self._PREFIX)
        # The last part that is no glob, without its suffix: `crawl/*.warc.gz` is "crawl".
        parts = [p for p in path.split("://", 1)[-1].split("/") if p and not is_glob(p)]
        shown = parts[-1].removesuffix(".gz").removesuffix(".warc") if parts else ""
        return SourceConfig(name=name or shown or "crawl", kind=self.name,
                            options={"paths": [path]})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.warc.settings import WarcSettings
        from kbsync.sources.warc.source import WarcSource  # needs the `warc` extra

        settings: WarcSettings = config.settings
        paths = [p if "://" in p else str(root / p) for p in settings.paths]
        return WarcSource(paths, name=config.name, media_types=settings.media_types,
                          max_bytes=settings.max_bytes,
                          storage_options=settings.resolved_options(os.environ),
                          index_dir=root / ".kbsync" / "warc-index")

    def location(self, config: SourceConfig) -> str:
        return ", ".join(str(p) for p in config.options.get("paths", ()))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return None  # a crawler writes files as it goes: checked on the interval


_KINDS: tuple[SourceKind, ...] = (
    # git and warc first: their claims are the narrowest (a `git+` prefix, a WARC file's
    # name), and a local path would otherwise be taken for a folder.
    GitKind(), WarcKind(), FolderKind(), WebKind(),
    ObjectStoreKind("s3", ("s3", "s3a"), "S3Settings"),
    ObjectStoreKind("fsspec", ("gs", "gcs", "az", "abfs", "abfss", "memory", "file"),
                    "ObjectStoreSettings"))

SOURCE_KINDS: dict[str, SourceKind] = {kind.name: kind for kind in _KINDS}
"""Every kind of source, by the ``kind`` its table names."""


def source_kind(name: str) -> SourceKind:
    """The kind ``name``; ConfigError listing the kinds for one kbsync does not know."""
    try:
        return SOURCE_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown source kind {name!r} (known: "
                          f"{', '.join(sorted(SOURCE_KINDS))})") from None


def infer_kind(table: Mapping[str, Any]) -> str:
    """The kind of a table written before sources had one: a ``path`` is a folder, ``urls``
    or ``sitemaps`` a website."""
    if "path" in table:
        return FolderKind.name
    if "urls" in table or "sitemaps" in table:
        return WebKind.name
    raise ConfigError("a source needs a `kind`, or a `path` (folder) or `urls` / `sitemaps` "
                      "(website)")


def kind_for_argument(argument: str) -> SourceKind:
    """The kind that takes ``kbsync init ARG`` (a folder, a URL, …); ConfigError if none does."""
    for kind in SOURCE_KINDS.values():
        if kind.claims(argument):
            return kind
    scheme = argument.split("://", 1)[0]
    raise ConfigError(f"{argument}: no kind of source takes {scheme}:// addresses "
                      "(folders, http and https URLs"
                      + "".join(f", {k}" for k in SOURCE_KINDS if k not in ("folder", "web"))
                      + ")")
