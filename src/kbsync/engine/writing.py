"""Writing ``kbsync.toml``: ``kbsync init``, adding and removing sources, one edit at a time
and never half a file."""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from kbsync.crashpoints import crashpoint
from kbsync.embed.kinds import EmbedderConfig
from kbsync.engine.config import (
    CONFIG_NAME,
    DEFAULT_CONTEXT_TOKENS,
    Config,
    IndexSettings,
    SearchSettings,
    default_chunker,
)
from kbsync.engine.loading import load_config
from kbsync.errors import ConfigError
from kbsync.sources.kinds import ObjectStoreKind, SourceConfig, kind_for_argument, source_kind
from kbsync.store.kinds import StoreConfig

__all__ = [
    "add_source",
    "init_config",
    "missing_folders",
    "refuse_missing_folders",
    "remove_source",
]

def init_config(folder: str | Path, sources: Sequence[str] = (), *,
                embedder: Mapping[str, Any] | None = None, store: str | None = None,
                allow_private: Sequence[str] = (), endpoint_url: str | None = None,
                exist_ok: bool = False, overwrite: bool = False) -> Config:
    """Write a new ``kbsync.toml`` with defaults and the given sources (folders or URLs).

    ``embedder`` is an ``[embedder]`` table (default: the offline hashing embedder);
    ``store`` the store's path relative to ``folder`` (default ``.kbsync/kbsync.db``);
    ``allow_private`` the loopback or private addresses and ranges the websites may
    be crawled at (an intranet, a test server), written into each website's table;
    ``endpoint_url`` the server of the object-store sources (an S3-compatible one).
    With ``exist_ok``, a folder already configured is loaded as it is, provided it
    has every source asked for (the file is never rewritten). With ``overwrite``, the
    file is written anew over the one there; the store it named is left as it is
    (nothing of it is deleted or opened).
    """
    file = Path(folder) / CONFIG_NAME
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot write the configuration: {exc}") from exc
    with _editing(file):
        if file.exists() and exist_ok:
            return _existing(load_config(file), sources)
        if file.exists() and not overwrite:
            raise ConfigError(f"{file}: a knowledge base is already configured here "
                              "(--force writes a new configuration over it; the store stays)")
        made = tuple(_source_for(file.parent, s) for s in sources)
        if allow_private:
            made = _allowing_private(made, allow_private)
        if endpoint_url is not None:
            made = _at_endpoint(made, endpoint_url)
        config = Config(file=file.resolve(), sources=made,
                        search=SearchSettings(context_tokens=DEFAULT_CONTEXT_TOKENS))
        if embedder is not None:
            config = replace(config, embedder=EmbedderConfig(dict(embedder)))
        # The chunker a kbsync.toml without [chunker] would have: written out, to be seen.
        config = replace(config, chunker=default_chunker(config.embedder.kind))
        if store is not None:
            config = replace(config, store=StoreConfig({"path": store}))
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
    store = dict(config.store.table)
    if config.store.kind == "sqlite":  # where the file is, written out even by default
        store["path"] = config.store.settings.path
    lines = ["# kbsync knowledge base; paths are relative to this file.", "",
             "[store]", *_lines(store), "",
             "[chunker]", f"strategy = {_toml(config.chunker.strategy)}",
             *_lines(dict(sorted(config.chunker.params.items()))),
             "", "[embedder]", *_lines(config.embedder.table)]
    for name, table in (("index", _changed(config.index)), ("search", _changed(config.search)),
                        ("vectors", {} if config.vectors is None else config.vectors.table)):
        if table:
            lines += ["", f"[{name}]", *_lines(table)]
    for s in config.sources:
        lines += ["", "[[sources]]", f"name = {_toml(s.name)}", f"kind = {_toml(s.kind)}",
                  *_lines(s.options)]
    _replace_file(config.file, ("\n".join(lines) + "\n").encode())


def _lines(table: Mapping[str, Any]) -> list[str]:
    return [f"{_toml_key(k)} = {_toml(v)}" for k, v in table.items()]


def _changed(settings: IndexSettings | SearchSettings) -> dict[str, Any]:
    """The settings that differ from their defaults: what the table needs to say."""
    default = type(settings)()
    return {f.name: getattr(settings, f.name) for f in fields(settings)
            if getattr(settings, f.name) != getattr(default, f.name)}


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
