"""Metadata filters of a search: which documents' chunks a search may return.

A filter is a set of conditions on a document: ``source`` and ``path`` (the
document's key) are the store's own fields, any other name is a key of the
document's metadata (front matter, HTML meta, PDF info). Conditions on
different names must all hold (AND); several values for one name are
alternatives (OR). A value with ``*`` or ``?`` is a glob (``*`` any run of
characters, ``/`` included; ``?`` one character), any other is compared
exactly. A metadata value that is a list matches when one of its items does;
a document without the key matches no condition on it.

The stores turn a filter into SQL over the documents table, so a filtered
search ranks only the matching documents' chunks (never the best of all,
then filtered, which would lose results).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbsync.errors import ParameterError

__all__ = ["STORE_FIELDS", "Filters", "filters_from", "matches", "parse_where",
           "postgres_condition", "sqlite_condition"]

STORE_FIELDS = {"source": "d.source", "path": "d.key", "title": "d.title"}
"""Filter names that are the store's own fields (they win over metadata keys of the same name)."""

# A metadata key a filter can name: letters, digits and ``_ . : -`` (what front
# matter and HTML meta names use), so it can be quoted into a JSON path safely.
_NAME = re.compile(r"[\w.:-]+")


@dataclass(frozen=True, slots=True)
class Filters:
    """Conditions a document must meet: per name, the values of which one must match."""

    conditions: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def to_dict(self) -> dict[str, list[str]]:
        return {name: list(values) for name, values in self.conditions}


def _condition(name: str, value: str, where: str) -> tuple[str, str]:
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ParameterError(f"malformed filter {where!r}: the name before '=' must be letters, "
                             "digits or _ . : - (e.g. source=docs, path=guide/*, lang=en)")
    if name != name.lower() and name.lower() in STORE_FIELDS:
        raise ParameterError(f"filter {where!r}: the store's fields are lower case: "
                             f"{name.lower()}=…")
    return name, value


def _collect(pairs: Iterable[tuple[str, str]]) -> Filters:
    by_name: dict[str, list[str]] = {}
    for name, value in pairs:
        values = by_name.setdefault(name, [])
        if value not in values:
            values.append(value)
    return Filters(tuple((name, tuple(values)) for name, values in sorted(by_name.items())))


def parse_where(items: Iterable[str]) -> Filters:
    """Filters from ``NAME=VALUE`` strings (``--where``); a malformed one raises
    :class:`~kbsync.errors.ParameterError` naming it."""
    pairs = []
    for item in items:
        name, equals, value = item.partition("=")
        if not equals:
            raise ParameterError(f"malformed filter {item!r}: write NAME=VALUE "
                                 "(e.g. source=docs, path=guide/*, lang=en)")
        # `path = guide/*` means the path, not one that starts with a space.
        pairs.append(_condition(name, value.strip(), item))
    return _collect(pairs)


def filters_from(spec: Filters | Mapping[str, str | Iterable[str]] | None) -> Filters:
    """Filters from a mapping of name to a value or to alternative values (the API's form)."""
    if spec is None:
        return Filters()
    if isinstance(spec, Filters):
        return spec
    pairs = []
    for name, values in spec.items():
        if isinstance(values, str):
            values = [values]
        for value in values:
            if not isinstance(value, str):
                raise ParameterError(f"filter {name!r}: values are strings, not {value!r}")
            pairs.append(_condition(str(name), value, f"{name}={value}"))
    return _collect(pairs)


def _is_glob(value: str) -> bool:
    return "*" in value or "?" in value


def _text(value: Any) -> str:
    """A JSON scalar as the text a filter value is compared with."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _value_matches(pattern: str, text: str) -> bool:
    if _is_glob(pattern):
        # fnmatch's [...] classes are no part of kbsync's globs: a '[' is literal.
        return fnmatch.fnmatchcase(text, pattern.replace("[", "[[]"))
    return text == pattern


def matches(filters: Filters, source: str, key: str, metadata: Mapping[str, Any],
            title: str | None = None) -> bool:
    """Whether a document meets ``filters`` (what the stores' SQL computes, in Python)."""
    fields = {"source": source, "path": key, "title": title}
    for name, values in filters.conditions:
        if name in STORE_FIELDS:
            found: list[Any] = [fields[name]]
        elif name not in metadata or metadata[name] is None:
            return False
        else:
            raw = metadata[name]
            found = raw if isinstance(raw, list) else [raw]
        texts = [_text(v) for v in found if v is not None and not isinstance(v, (dict, list))]
        if not any(_value_matches(p, t) for p in values for t in texts):
            return False
    return True


def _sqlite_glob(value: str) -> str:
    # GLOB's [...] classes are no part of kbsync's globs: '[' is matched literally.
    return value.replace("[", "[[]")


_SQLITE_METADATA = "(CASE WHEN json_valid(d.metadata) THEN d.metadata ELSE '{}' END)"


def sqlite_condition(filters: Filters) -> tuple[str, list[str]]:
    """SQLite SQL over a document ``d`` that holds when it meets ``filters``, and its arguments."""
    parts: list[str] = []
    args: list[str] = []
    for name, values in filters.conditions:
        alternatives = []
        if name in STORE_FIELDS:
            column = STORE_FIELDS[name]
            for value in values:
                alternatives.append(f"{column} GLOB ?" if _is_glob(value) else f"{column} = ?")
                args.append(_sqlite_glob(value) if _is_glob(value) else value)
            parts.append("(" + " OR ".join(alternatives) + ")")
            continue
        # json_each walks a list's items, or yields a scalar as its one row.
        text = ("CASE j.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
                "ELSE CAST(j.value AS TEXT) END")
        for value in values:
            alternatives.append(f"{text} GLOB ?" if _is_glob(value) else f"{text} = ?")
        # An object's members are no values of its key: json_type keeps them out. A
        # damaged metadata column matches nothing instead of failing every search.
        parts.append(f"EXISTS (SELECT 1 FROM json_each({_SQLITE_METADATA}, ?) j WHERE "
                     f"json_type({_SQLITE_METADATA}, ?) <> 'object' AND j.type "
                     f"NOT IN ('null', 'object', 'array') AND ({' OR '.join(alternatives)}))")
        args += ['$."' + name + '"'] * 2
        args += [_sqlite_glob(v) if _is_glob(v) else v for v in values]
    return " AND ".join(parts) or "1", args


def _like(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def postgres_condition(filters: Filters) -> tuple[str, list[str]]:
    """PostgreSQL SQL over a document ``d`` that holds when it meets ``filters``, and its
    arguments (``%s`` placeholders; the metadata column is JSON text, read as jsonb)."""
    parts: list[str] = []
    args: list[str] = []
    for name, values in filters.conditions:
        if name in STORE_FIELDS:
            column = STORE_FIELDS[name]
            alternatives = [f"{column} LIKE %s" if _is_glob(v) else f"{column} = %s"
                            for v in values]
            args += [_like(v) if _is_glob(v) else v for v in values]
            parts.append("(" + " OR ".join(alternatives) + ")")
            continue
        alternatives = [("v.x LIKE %s" if _is_glob(v) else "v.x = %s") for v in values]
        # A list's items, or a scalar as a list of one; objects and nulls match nothing.
        parts.append(
            "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(d.metadata::jsonb -> %s) "
            "WHEN 'array' THEN d.metadata::jsonb -> %s "
            "ELSE jsonb_build_array(d.metadata::jsonb -> %s) END) e, "
            "LATERAL (SELECT e #>> '{}' AS x) v WHERE jsonb_typeof(e) IN "
            f"('string', 'number', 'boolean') AND ({' OR '.join(alternatives)}))")
        args += [name, name, name]
        args += [_like(v) if _is_glob(v) else v for v in values]
    return " AND ".join(parts) or "TRUE", args
