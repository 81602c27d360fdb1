"""Reading ``kbsync.toml``: every table and key checked, a misspelling refused with the name
it resembles."""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from kbsync.chunking import STRATEGY_PARAMS
from kbsync.engine.components import embedder_class, refuse_unknown_options
from kbsync.engine.config import CONFIG_NAME, EMBEDDER_SETTINGS, Config
from kbsync.errors import ConfigError
from kbsync.model import SEARCH_MODES
from kbsync.plan import BOILERPLATE_SHARE
from kbsync.source_kinds import SourceConfig, infer_kind, source_kind
from kbsync.sync import Chunker

__all__ = ["load_config"]

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
        context = int(search.get("context_tokens", 0))
        if context < 0:
            raise ConfigError(f"{file}: [search] context_tokens must be 0 or more")
        mode = search.get("mode")
        if mode is not None and mode not in SEARCH_MODES:
            raise ConfigError(f"{file}: [search] mode must be hybrid, vector or text, "
                              f"not {mode!r}")
        vectors = dict(data.get("vectors", {}))
        _check_vectors(vectors)
        store = dict(data.get("store", {}))
        _check_store(store)
        return Config(file=file.resolve(), store=str(store.get("path", ".kbsync/kbsync.db")),
                      chunker=chunker,
                      embedder=dict(data.get("embedder", {"kind": "hashing", "dimension": 1024})),
                      sources=sources, index=index, context_tokens=context,
                      search_mode=mode, vectors=vectors,
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


_SEARCH_SETTINGS = ("context_tokens", "mode")


_STORE_SETTINGS = ("path", "url", "password_env", "schema", "index_memory")


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
        cls = embedder_class(kind)
        if cls is not None:  # an unknown kind is refused with the list of kinds
            try:
                refuse_unknown_options(cls, {k: v for k, v in embedder.items()
                                              if k not in EMBEDDER_SETTINGS},
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


def _source_config(table: dict[str, Any]) -> SourceConfig:
    """A ``[[sources]]`` table as a value; a table without ``kind`` (older files) is inferred."""
    name = table.pop("name", None)
    kind = str(table.pop("kind", None) or infer_kind(table))
    source_kind(kind)  # an unknown kind is refused here, with the list of kinds
    config = SourceConfig(name="", kind=kind, options=table)
    return replace(config, name=str(name or config.location.split(", ", 1)[0]))
