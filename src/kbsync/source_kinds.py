"""Source kinds: the one place that maps a ``[[sources]]`` table's ``kind`` to its adapter.

A new kind of source is one :class:`SourceKind` here and one entry in
:data:`SOURCE_KINDS`; the configuration, ``kbsync init``/``sources add``, the
dashboard and ``kbsync watch`` ask the kind, never the keys of the table. Adapters
with an extra are imported inside :meth:`SourceKind.build`, so a missing extra
fails only the source that needs it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from kbsync.errors import ConfigError
from kbsync.sources import Source

__all__ = [
    "SOURCE_KINDS",
    "CrawlProgress",
    "FolderKind",
    "GitKind",
    "ObjectStoreKind",
    "SourceConfig",
    "SourceKind",
    "WebKind",
    "infer_kind",
    "kind_for_argument",
    "source_kind",
]

CrawlProgress = Callable[[str, int, int], None]
"""``(source name, pages done, pages known)``: how a crawl reports its progress."""


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """One ``[[sources]]`` table: its name, its kind, and every other setting of it."""

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def location(self) -> str:
        """Where the source is, as status and the dashboard show it."""
        return source_kind(self.kind).location(self)


class SourceKind(Protocol):
    """What kbsync needs to know of one kind of source."""

    name: str

    def settings(self) -> tuple[str, ...]:
        """The keys its table takes besides ``name`` and ``kind``; () when its extra is missing
        (then :meth:`build` says what to install)."""
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


class FolderKind:
    """A folder of files (``path``, ``include`` and ``exclude`` globs)."""

    name = "folder"

    def settings(self) -> tuple[str, ...]:
        return ("path", "include", "exclude")

    def claims(self, argument: str) -> bool:
        return "://" not in argument

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        folder = Path(argument)
        shown = str(folder if folder.is_absolute() else folder.as_posix())
        return SourceConfig(name=name or folder.name or shown, kind=self.name,
                            options={"path": shown, "include": ["**/*"], "exclude": []})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.files import FilesystemSource

        options = config.options
        if "path" not in options:
            raise ConfigError(f"source {config.name!r}: a folder source needs a `path`")
        return FilesystemSource(root / str(options["path"]),
                                tuple(options.get("include", ("**/*",))),
                                tuple(options.get("exclude", ())), name=config.name)

    def location(self, config: SourceConfig) -> str:
        return str(config.options.get("path", ""))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return root / str(config.options.get("path", ""))


class WebKind:
    """A website: seed ``urls`` and/or ``sitemaps``, and the crawl's settings."""

    name = "web"

    def settings(self) -> tuple[str, ...]:
        try:
            from kbsync.sources.web import WebSettings  # needs the `web` extra
        except ImportError:
            return ()
        return tuple(sorted({f.name for f in fields(WebSettings)} - {"seeds"} | {"urls"}))

    def claims(self, argument: str) -> bool:
        return argument.startswith(("http://", "https://"))

    def from_argument(self, root: Path, argument: str, name: str | None) -> SourceConfig:
        host = argument.split("://", 1)[1].split("/", 1)[0]
        return SourceConfig(name=name or host, kind=self.name, options={"urls": [argument]})

    def build(self, config: SourceConfig, root: Path, progress: CrawlProgress) -> Source:
        from kbsync.sources.web import WebSettings, WebSource  # needs the `web` extra

        options = dict(config.options)
        urls = [str(u) for u in options.pop("urls", ())]
        if not urls and not options.get("sitemaps"):
            raise ConfigError(f"source {config.name!r}: a website needs `urls` or `sitemaps`")
        try:
            return WebSource(WebSettings(seeds=urls, **options), name=config.name,
                             progress=progress)
        except TypeError as exc:
            raise ConfigError(f"source {config.name!r}: {exc}") from exc

    def location(self, config: SourceConfig) -> str:
        return ", ".join(str(u) for u in (*config.options.get("urls", ()),
                                          *config.options.get("sitemaps", ())))

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return None


class ObjectStoreKind:
    """Objects below an fsspec ``url`` (``s3://bucket/prefix``, ``gs://``, ``memory://``...).

    ``s3`` takes ``s3://`` URLs only (extra ``s3``); ``fsspec`` any URL (extra ``fsspec``).
    """

    def __init__(self, name: str, schemes: tuple[str, ...], package: str) -> None:
        self.name = name
        self._schemes = schemes
        self._package = package  # what its extra installs; without it, settings() is ()

    def settings(self) -> tuple[str, ...]:
        from kbsync.sources.objects import SETTINGS

        return SETTINGS if importlib.util.find_spec(self._package) is not None else ()

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
        from kbsync.errors import ParameterError
        from kbsync.sources.objects import ObjectStoreSettings, ObjectStoreSource

        scheme = "s3" if self.name == "s3" else None
        settings = ObjectStoreSettings.from_options(config.name, config.options, scheme)
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

    def settings(self) -> tuple[str, ...]:
        from kbsync.sources.git import GitSettings

        return tuple(GitSettings.__dataclass_fields__)

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
        from kbsync.errors import KbsyncError
        from kbsync.sources.git import GitSettings, GitSource, is_remote

        options = dict(config.options)
        if "repository" not in options:
            raise ConfigError(f"source {config.name!r}: a git source needs a `repository`")
        repository = str(options.pop("repository"))
        if not is_remote(repository):  # a local path is relative to the knowledge base
            repository = str(root / repository)
        for key in ("include", "exclude"):
            if key in options and isinstance(options[key], list):
                options[key] = tuple(options[key])
        try:
            settings = GitSettings(repository, **options)
        except (TypeError, KbsyncError) as exc:
            raise ConfigError(f"source {config.name!r}: {exc}") from exc
        return GitSource(settings, name=config.name, state_dir=root / ".kbsync")

    def location(self, config: SourceConfig) -> str:
        where = str(config.options.get("repository", ""))
        ref = config.options.get("ref")
        return f"{where}@{ref}" if ref else where

    def watched_folder(self, config: SourceConfig, root: Path) -> Path | None:
        return None


SOURCE_KINDS: dict[str, SourceKind] = {
    # git first: its claim is the narrowest (a `git+` prefix), and a `git+` local path
    # would otherwise be taken for a folder.
    kind.name: kind for kind in (
        GitKind(), FolderKind(), WebKind(), ObjectStoreKind("s3", ("s3", "s3a"), "s3fs"),
        ObjectStoreKind("fsspec", ("gs", "gcs", "az", "abfs", "abfss", "memory", "file"),
                        "fsspec"))}
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
