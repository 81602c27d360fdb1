"""Configuration -> components -> sync: the one place that knows concrete classes.

A knowledge base is a ``kbsync.toml`` file; every path in it is relative to the
file's folder. The engine builds the sources, the store, the embedder and the
extractors from it and hands them, as protocols, to :func:`kbsync.sync.sync_sources`.
"""

from __future__ import annotations

import json
import os
import threading
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from kbsync.chunking import identity_for
from kbsync.compare import compare
from kbsync.crashpoints import crashpoint
from kbsync.embed import Embedder
from kbsync.embed.hashing import HashingEmbedder
from kbsync.errors import ConfigError, KbsyncError, ParameterError
from kbsync.extract.registry import extractor_for
from kbsync.model import ChangeReport
from kbsync.normalize import normalize
from kbsync.sources import Source
from kbsync.sources.files import FilesystemSource
from kbsync.store import DocumentText, Hit, StoreStatus
from kbsync.store.lock import WriterLock
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, Progress, SyncReport, sync_sources
from kbsync.watch import watch

__all__ = [
    "CONFIG_NAME",
    "Config",
    "Engine",
    "SearchMode",
    "SourceConfig",
    "add_source",
    "init_config",
    "load_config",
    "remove_source",
]

CONFIG_NAME = "kbsync.toml"
# Embed small, return big (DESIGN.md §7; benchmarks/retrieval): ~130-token chunks fit
# every model's window and halve re-embedding after edits; a search returns each
# hit with its section neighbours up to 512 tokens.
DEFAULT_CHUNKER = Chunker("tttd", {"min_tokens": 48, "max_tokens": 192, "primary_bits": 6,
                                   "backup_bits": 4})
DEFAULT_CONTEXT_TOKENS = 512
SearchMode = Literal["vector", "text", "hybrid"]
_RRF_K = 60


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """A source: a folder (``path`` and globs) or a website (``urls`` and web settings)."""

    name: str
    path: str = ""
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def is_web(self) -> bool:
        return bool(self.urls or self.options.get("sitemaps"))


@dataclass(frozen=True, slots=True)
class Config:
    """A parsed ``kbsync.toml``."""

    file: Path
    store: str = ".kbsync/kbsync.db"
    chunker: Chunker = field(default_factory=Chunker)
    embedder: dict[str, Any] = field(default_factory=lambda: {"kind": "hashing",
                                                              "dimension": 1024})
    sources: tuple[SourceConfig, ...] = ()
    index: dict[str, Any] = field(default_factory=dict)
    context_tokens: int = 0

    @property
    def root(self) -> Path:
        return self.file.parent

    @property
    def store_path(self) -> Path:
        return self.root / self.store

    @property
    def lock_path(self) -> Path:
        return self.store_path.with_name(self.store_path.name + ".lock")


def load_config(path: str | Path = CONFIG_NAME) -> Config:
    """Read and validate a configuration file (a folder means its ``kbsync.toml``)."""
    file = Path(path)
    if file.is_dir():
        file = file / CONFIG_NAME
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{file}: no knowledge base here; run `kbsync init` first") from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the configuration: {exc}") from exc
    try:
        chunker_table = dict(data.get("chunker", {}))
        chunker = Chunker(str(chunker_table.pop("strategy", "tttd")), chunker_table)
        chunker.validate()
        sources = tuple(_source_config(dict(s)) for s in data.get("sources", []))
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ConfigError(f"{file}: two sources share a name")
        index = dict(data.get("index", {}))
        unknown = set(index) - {"boilerplate_share", "index_boilerplate"}
        if unknown:
            raise ConfigError(f"{file}: unknown [index] settings: {', '.join(sorted(unknown))}")
        if not 0.0 < float(index.get("boilerplate_share", 0.05)) <= 1.0:
            raise ConfigError(f"{file}: [index] boilerplate_share must be in (0, 1]")
        search = dict(data.get("search", {}))
        context = int(search.pop("context_tokens", 0))
        if search or context < 0:
            raise ConfigError(f"{file}: [search] takes only context_tokens (>= 0)")
        return Config(file=file.resolve(), store=str(data.get("store", {}).get("path",
                      ".kbsync/kbsync.db")), chunker=chunker,
                      embedder=dict(data.get("embedder", {"kind": "hashing", "dimension": 1024})),
                      sources=sources, index=index, context_tokens=context)
    except (KeyError, TypeError, ValueError) as exc:  # ParameterError is a ValueError
        raise ConfigError(f"{file}: invalid configuration: {exc}") from exc


def _source_config(table: dict[str, Any]) -> SourceConfig:
    name = table.pop("name", None)
    if "path" in table:
        path = str(table.pop("path"))
        return SourceConfig(name=str(name or path), path=path,
                            include=tuple(table.pop("include", ("**/*",))),
                            exclude=tuple(table.pop("exclude", ())), options=table)
    urls = tuple(str(u) for u in table.pop("urls", ()))
    if not urls and not table.get("sitemaps"):
        raise ConfigError("a source needs a `path` (folder) or `urls` / `sitemaps` (website)")
    return SourceConfig(name=str(name or urls[0]), urls=urls, options=table)


def init_config(folder: str | Path, sources: Sequence[str] = ()) -> Config:
    """Write a new ``kbsync.toml`` with defaults and the given folder sources."""
    file = Path(folder) / CONFIG_NAME
    if file.exists():
        raise ConfigError(f"{file}: a knowledge base is already configured here")
    config = Config(file=file.resolve(), chunker=DEFAULT_CHUNKER,
                    sources=tuple(_source_for(file.parent, s) for s in sources),
                    context_tokens=DEFAULT_CONTEXT_TOKENS)
    _write(config)
    return config


def add_source(config: Config, path: str, name: str | None = None) -> Config:
    """The configuration with one more folder source, written back to its file."""
    new = _source_for(config.root, path, name)
    if any(s.name == new.name for s in config.sources):
        raise ConfigError(f"a source named {new.name!r} already exists")
    updated = replace(config, sources=(*config.sources, new))
    _write(updated)
    return updated


def remove_source(config: Config, name: str) -> Config:
    """The configuration without the source ``name`` (its documents go at the next sync)."""
    kept = tuple(s for s in config.sources if s.name != name)
    if len(kept) == len(config.sources):
        raise ConfigError(f"no source named {name!r}")
    updated = replace(config, sources=kept)
    _write(updated)
    return updated


def _source_for(root: Path, path: str, name: str | None = None) -> SourceConfig:
    if "://" in path:
        if not path.startswith(("http://", "https://")):
            raise ConfigError(f"{path}: only http and https URLs can be crawled")
        return SourceConfig(name=name or path.split("://", 1)[1].split("/", 1)[0], urls=(path,))
    folder = Path(path)
    shown = str(folder if folder.is_absolute() else folder.as_posix())
    return SourceConfig(name=name or folder.name or shown, path=shown)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _write(config: Config) -> None:
    lines = ["# kbsync knowledge base; paths are relative to this file.", "",
             "[store]", f"path = {_toml(config.store)}", "",
             "[chunker]", f"strategy = {_toml(config.chunker.strategy)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in sorted(config.chunker.params.items())]
    lines += ["", "[embedder]"] + [f"{k} = {_toml(v)}" for k, v in config.embedder.items()]
    if config.index:
        lines += ["", "[index]"] + [f"{k} = {_toml(v)}" for k, v in sorted(config.index.items())]
    if config.context_tokens:
        lines += ["", "[search]", f"context_tokens = {config.context_tokens}"]
    for s in config.sources:
        lines += ["", "[[sources]]", f"name = {_toml(s.name)}"]
        if s.is_web:
            lines.append(f"urls = {_toml(s.urls)}")
        else:
            lines += [f"path = {_toml(s.path)}", f"include = {_toml(s.include)}",
                      f"exclude = {_toml(s.exclude)}"]
        lines += [f"{k} = {_toml(v)}" for k, v in sorted(s.options.items())]
    _replace_file(config.file, ("\n".join(lines) + "\n").encode())


def _replace_file(file: Path, data: bytes) -> None:
    """Write ``file`` whole or not at all: temp file, fsync, rename, fsync of the folder.

    A crash or a full disk at any step leaves the old file (or none), never half of one.
    """
    temp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(file)
        mode = file.stat().st_mode & 0o777 if file.exists() else 0o644
        crashpoint("config.write")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            crashpoint("config.fsync")
            os.fsync(fd)
        finally:
            os.close(fd)
        crashpoint("config.rename")
        os.replace(temp, file)
        crashpoint("config.fsync_dir")
        folder = os.open(file.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ConfigError(f"{file}: cannot write the configuration: {exc}") from exc


def _remove_stale_temps(file: Path) -> None:
    """Temp files that a killed writer left beside ``file`` (their process is gone)."""
    for stale in file.parent.glob(f".{file.name}.*.tmp"):
        pid = stale.name[len(file.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _make_source(root: Path, s: SourceConfig,
                 crawled: Callable[[str, int, int], None]) -> Source:
    if s.is_web:
        from kbsync.sources.web import WebSource  # needs the `web` extra

        try:
            return WebSource(s.urls, name=s.name, progress=crawled, **s.options)
        except TypeError as exc:
            raise ConfigError(f"source {s.name!r}: {exc}") from exc
    if s.options:
        raise ConfigError(f"source {s.name!r}: unknown settings {', '.join(sorted(s.options))}")
    return FilesystemSource(root / s.path, s.include, s.exclude, name=s.name)


def make_embedder(settings: dict[str, Any]) -> Embedder:
    """The embedder a configuration names: ``hashing``, ``local`` or ``openai``."""
    options = {k: v for k, v in settings.items() if k not in ("kind", "allow_truncation")}
    kind = settings.get("kind", "hashing")
    try:
        if kind == "hashing":
            return HashingEmbedder(**options)
        if kind == "local":
            from kbsync.embed.providers.local import LocalEmbedder  # needs the `local` extra

            return LocalEmbedder(**options)
        if kind == "openai":
            from kbsync.embed.providers.openai import OpenAIEmbedder

            remote: Embedder = OpenAIEmbedder(**options)
            return remote
    except TypeError as exc:
        raise ConfigError(f"[embedder] {kind}: {exc}") from exc
    raise ConfigError(f"unknown embedder kind {kind!r} (available: hashing, local, openai)")


# Model word pieces per estimated (cl100k-like) token: MiniLM's WordPiece count of
# the sample corpus's chunks is 1.07 times ours on average, 1.25 at the 95th percentile.
_WORD_PIECES_PER_TOKEN = 1.25


def check_fit(chunker: Chunker, embedder: Embedder, settings: dict[str, Any]) -> None:
    """Refuse chunks that the embedder would silently truncate, unless allowed."""
    limit = embedder.max_input_tokens
    if limit is None or settings.get("allow_truncation", False):
        return
    max_tokens = int(chunker.params.get("max_tokens", 512))
    fits = int(limit / _WORD_PIECES_PER_TOKEN)
    if max_tokens > fits:
        raise ConfigError(
            f"[chunker] max_tokens = {max_tokens} does not fit the embedder's input window "
            f"({limit} model tokens, about {fits} of ours): the end of longer chunks would never "
            f"be retrievable. Lower max_tokens to {fits} or less (embed small chunks and return "
            "big context with `search --context`), or set allow_truncation = true in [embedder]."
        )


class Engine:
    """An opened knowledge base: plan, sync, search, diff, status, verify, erase, gc."""

    def __init__(self, config: Config, *, create: bool = True) -> None:
        """Open the knowledge base; with ``create`` false a missing store is not created
        (read-only commands such as ``plan`` and ``status`` then see an empty one)."""
        self.config = config
        self.embedder = make_embedder(config.embedder)
        check_fit(config.chunker, self.embedder, config.embedder)
        exists = config.store_path.exists()
        self.store = SqliteStore(config.store_path if create or exists else ":memory:")
        self._progress: Progress | None = None
        self.sources = [_make_source(config.root, s, self._crawled) for s in config.sources]

    def _crawled(self, url: str, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress("crawl", done, total)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lock(self, wait: bool, on_wait: Callable[[str], None] | None) -> WriterLock:
        return WriterLock(self.config.lock_path, wait=wait, on_wait=on_wait)

    def plan(self, *, progress: Progress | None = None) -> SyncReport:
        """What a sync would do, without writing anything."""
        self._progress = progress
        return sync_sources(self.sources, self.store, self.embedder, extractor_for,
                            self.config.chunker, dry_run=True, progress=progress,
                            **self._index_settings())

    def sync(self, *, verify: bool = False, allow_mass_delete: bool = False,
             progress: Progress | None = None, wait: bool = True,
             on_wait: Callable[[str], None] | None = None) -> SyncReport:
        """Bring the store in step with the sources (one writer at a time)."""
        self._progress = progress
        with self._lock(wait, on_wait):
            return sync_sources(self.sources, self.store, self.embedder, extractor_for,
                                self.config.chunker, verify=verify,
                                allow_mass_delete=allow_mass_delete, progress=progress,
                                **self._index_settings())

    def _index_settings(self) -> dict[str, Any]:
        index = self.config.index
        return {"boilerplate_share": float(index.get("boilerplate_share", 0.05)),
                "index_boilerplate": bool(index.get("index_boilerplate", False))}

    def watch(self, *, interval: float = 86_400.0, full_every: float = 30 * 86_400.0,
              stop: threading.Event | None = None,
              on_report: Callable[[SyncReport, str], None] | None = None) -> None:
        """Sync on file events and on schedule, with a periodic full revalidation."""
        folders = [self.config.root / s.path for s in self.config.sources if not s.is_web]
        watch(lambda verify: self.sync(verify=verify), folders, interval=interval,
              full_every=full_every, stop=stop, on_report=on_report,
              ignore=[self.config.store_path.parent, self.config.lock_path])

    def search(self, query: str, k: int = 5, mode: SearchMode = "hybrid",
               context_tokens: int | None = None) -> list[Hit]:
        """Chunks of the current generation best matching ``query``.

        With ``context_tokens`` (default: the configuration's ``[search]`` setting;
        0 for none) each hit comes with a context window: its chunk and the
        neighbouring chunks of the same section, up to that many tokens; a hit
        inside a window already returned is merged into it. (Embed small chunks,
        return big context: see DESIGN.md §7.)
        """
        if context_tokens is None:
            context_tokens = self.config.context_tokens
        if not context_tokens:
            return self._ranked(query, k, mode)
        results: list[Hit] = []
        for hit in self._ranked(query, 3 * k, mode):
            if any(r.source == hit.source and r.key == hit.key and r.first <= hit.index <= r.last
                   for r in results):
                continue
            window = self.store.window(hit, context_tokens)
            results.append(replace(hit, context=window.text, context_tokens=window.tokens,
                                   first=window.first, last=window.last))
            if len(results) == k:
                break
        return results

    def _ranked(self, query: str, k: int, mode: SearchMode) -> list[Hit]:
        query = normalize(query).text  # the same form as the indexed chunk texts
        if mode == "text":
            return self.store.search_text(query, k)
        vector = self.embedder.embed([query])[0]
        if mode == "vector":
            return self.store.search_vector(self.embedder.identity, vector, k)
        if mode != "hybrid":
            raise ParameterError(f"unknown search mode {mode!r}: use vector, text or hybrid")
        pool = max(k * 4, 20)
        ranked: dict[tuple[str, str, int], float] = {}
        hits: dict[tuple[str, str, int], Hit] = {}
        for results in (self.store.search_vector(self.embedder.identity, vector, pool),
                        self.store.search_text(query, pool)):
            for rank, hit in enumerate(results):
                key = (hit.source, hit.key, hit.index)
                ranked[key] = ranked.get(key, 0.0) + 1.0 / (_RRF_K + rank + 1)
                hits.setdefault(key, hit)
        best = sorted(ranked, key=lambda key: -ranked[key])[:k]
        return [_rescored(hits[key], ranked[key]) for key in best]

    def status(self) -> StoreStatus:
        return self.store.status()

    def diff(self, key: str) -> tuple[DocumentText, ChangeReport]:
        """The last change of a document: its texts and the change report between them."""
        doc = self.store.document(key)
        if doc is None:
            raise KbsyncError(f"{key}: no such document in the knowledge base")
        return doc, compare(doc.previous if doc.previous is not None else "", doc.text)

    def chunk_identity(self) -> Callable[[str], str]:
        """The identity function of the configured chunker (for verify)."""
        return identity_for(self.config.chunker.strategy, **self.config.chunker.params)

    def verify(self) -> list[str]:
        return self.store.verify(self.embedder.identity, self.chunk_identity())

    def erase(self, pattern: str, *, wait: bool = True) -> list[tuple[str, str]]:
        with self._lock(wait, None):
            return self.store.erase(pattern)

    def gc(self, *, wait: bool = True) -> dict[str, int]:
        with self._lock(wait, None):
            return self.store.gc()


def _rescored(hit: Hit, score: float) -> Hit:
    return replace(hit, score=score)
