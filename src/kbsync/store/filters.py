"""Metadata filters of a search: which documents' chunks a search may return.

A filter is a set of conditions on a document: ``source``, ``path`` (the
document's key) and ``title`` are the store's own fields, any other name is a
key of the document's metadata (front matter, HTML meta, PDF info), whose values
keep their types (text, number, boolean, date as ISO 8601 text, list).

- ``NAME=VALUE``: equal; a value with ``*`` or ``?`` is a glob (``*`` any run of
  characters, ``/`` included; ``?`` one character); a number equals the same
  number (``3`` matches ``3.0``). Several values for one name are alternatives (OR).
- ``NAME!=VALUE``: not equal (globs too); a document without the key meets it.
  Several values for one name must all differ.
- ``NAME<VALUE``, ``<=``, ``>``, ``>=``: a number compares with numbers, a date
  (``2024-05-01``, or with a time ``2024-05-01T10:30``) with dates and times,
  over as much of them as the bound gives (``date<=2024-05-01`` holds all day).

A metadata list meets a condition when one of its items does (``tags=intro``
finds ``tags: [intro, install]``); for ``!=`` when none of its items is equal.
A document without the key meets no condition on it but ``!=``. Conditions on
different names, and range conditions, must all hold (AND).

The stores turn a filter into SQL over the documents table, so a filtered
search ranks only the matching documents' chunks (never the best of all,
then filtered, which would lose results); :func:`matches` is the same in Python.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from kbsync.errors import ParameterError

__all__ = ["OPERATORS", "STORE_FIELDS", "Condition", "Filters", "Operator", "filters_from",
           "matches", "parse_where", "postgres_condition", "sqlite_condition"]

STORE_FIELDS = {"source": "d.source", "path": "d.key", "title": "d.title"}
"""Filter names that are the store's own fields (they win over metadata keys of the same name)."""

Operator = Literal["=", "!=", "<", "<=", ">", ">="]
OPERATORS: tuple[Operator, ...] = ("!=", "<=", ">=", "=", "<", ">")
"""The operators, the two-character ones first (``<=`` is not ``<`` and ``=VALUE``)."""
_RANGES = ("<", "<=", ">", ">=")

# Names of the operators in filter mappings of the LangChain and Chroma style.
_NAMED: dict[str, Operator | Literal["in", "nin"]] = {
    "$eq": "=", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">=",
    "$in": "in", "$nin": "nin", "=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=",
    ">": ">", ">=": ">=", "in": "in", "nin": "nin"}

# A metadata key a filter can name: letters, digits and ``_ . : -`` (what front
# matter and HTML meta names use), so it can be quoted into a JSON path safely.
_NAME = re.compile(r"[\w.:-]+")
_WHERE = re.compile(r"\s*([^=!<>]*?)\s*(!=|<=|>=|=|<|>)\s*(.*)", re.DOTALL)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?")
_DATE_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*"  # a value that starts with a date


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition: ``name`` compared by ``op`` with ``values`` (alternatives for ``=``,
    all excluded for ``!=``, one bound for a range)."""

    name: str
    op: Operator
    values: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join(f"{self.name}{self.op}{v}" for v in self.values)


@dataclass(frozen=True, slots=True)
class Filters:
    """Conditions a document must all meet."""

    conditions: tuple[Condition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def to_dict(self) -> dict[str, Any]:
        """The filters as :func:`filters_from` takes them: name -> the values of its
        equality, or name -> {operator: values} where other operators compare it; a
        second condition of one name and operator (``$and`` of two tags) under ``$and``."""
        out: dict[str, Any] = {}
        more: list[dict[str, Any]] = []
        for c in self.conditions:
            if any(o.name == c.name and o.op != "=" for o in self.conditions):
                given = out.setdefault(c.name, {})
                if c.op in given:
                    more.append({c.name: {c.op: list(c.values)}})
                else:
                    given[c.op] = list(c.values)
            elif c.name in out:
                more.append({c.name: list(c.values)})
            else:
                out[c.name] = list(c.values)
        if more:
            out["$and"] = more
        return out

    def values_of(self, name: str) -> tuple[str, ...]:
        """The alternatives an equality condition on ``name`` names (none if no such one)."""
        return next((c.values for c in self.conditions if c.name == name and c.op == "="), ())


def _number(text: str) -> float | None:
    if not _NUMBER.fullmatch(text.strip()):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _bound(name: str, op: Operator, value: str, where: str) -> str:
    """A range's bound as compared: a number, or a date or time (``T`` between them)."""
    value = value.strip()
    if name in STORE_FIELDS:
        raise ParameterError(f"filter {where!r}: {op} compares metadata numbers and dates, "
                             f"not the store's {name}")
    if _number(value) is not None:
        return value
    if _DATE.fullmatch(value):
        return value.replace(" ", "T")
    raise ParameterError(f"filter {where!r}: the bound of {op} must be a number or a date "
                         "(2024-05-01, or 2024-05-01T10:30)")


def _checked(name: str, op: Operator, value: str, where: str) -> Condition:
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ParameterError(f"malformed filter {where!r}: the name before the operator must "
                             "be letters, digits or _ . : - (e.g. source=docs, path=guide/*, "
                             "lang=en, date>=2024-01-01)")
    if name != name.lower() and name.lower() in STORE_FIELDS:
        raise ParameterError(f"filter {where!r}: the store's fields are lower case: "
                             f"{name.lower()}{op}…")
    if op in _RANGES:
        value = _bound(name, op, value, where)
    return Condition(name, op, (value,))


def _collect(conditions: Iterable[Condition]) -> Filters:
    """Equality and inequality conditions on one name merged (alternatives, exclusions);
    ranges each their own; in a canonical order."""
    merged: dict[tuple[str, str], list[str]] = {}
    ranges: list[Condition] = []
    for c in conditions:
        if c.op in _RANGES:
            if c not in ranges:
                ranges.append(c)
            continue
        values = merged.setdefault((c.name, c.op), [])
        values.extend(v for v in c.values if v not in values)
    every = [Condition(name, cast(Operator, op), tuple(v)) for (name, op), v in merged.items()]
    every += ranges
    return Filters(tuple(sorted(every, key=_order)))


def parse_where(items: Iterable[str]) -> Filters:
    """Filters from ``NAME<op>VALUE`` strings (``--where``, ``where=`` query parameters); a
    malformed one raises :class:`~kbsync.errors.ParameterError` naming it."""
    conditions = []
    for item in items:
        found = _WHERE.fullmatch(item)
        if found is None:
            raise ParameterError(f"malformed filter {item!r}: write NAME=VALUE, NAME!=VALUE or "
                                 "NAME<VALUE (<=, >, >=) (e.g. source=docs, path=guide/*, "
                                 "lang=en, date>=2024-01-01)")
        name, op, value = found.groups()
        # `path = guide/*` means the path, not one that starts with a space.
        conditions.append(_checked(name, cast(Operator, op), value.strip(), item))
    return _collect(conditions)


def _scalar(name: str, value: object) -> str:
    """A filter value given in a mapping, as the text it is compared as."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not (isinstance(value, float)
                                                and not math.isfinite(value)):
        return json.dumps(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise ParameterError(f"filter {name!r}: values are text, numbers, booleans or dates, "
                         f"not {value!r}")


def filters_from(spec: Filters | Mapping[str, Any] | None) -> Filters:
    """Filters from a mapping (the API's form): name -> a value, a list of alternative
    values, or a mapping of operators to values, ``{"date": {">=": "2024-01-01"}}``
    (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``nin``, or LangChain's ``$eq``,
    ``$ne``, ``$lt``, ``$lte``, ``$gt``, ``$gte``, ``$in``, ``$nin``); values are text,
    numbers, booleans or dates (a list for a range: each bound must hold). ``$and`` holds
    a list of such mappings."""
    if spec is None:
        return Filters()
    if isinstance(spec, Filters):
        return spec
    if not isinstance(spec, Mapping):  # the command line's "tags=intro" given as filters
        raise ParameterError(f"filters are a mapping such as {{'tags': 'intro'}}, not "
                             f"{type(spec).__name__} {spec!r} "
                             "(kbsync.store.filters.parse_where reads NAME=VALUE strings)")
    return _all_of(spec)


def _all_of(spec: Mapping[str, Any]) -> Filters:
    """The conditions of one mapping, those on one name merged as alternatives, and those
    of each mapping of its ``$and``, merged within that mapping only: every one must hold
    (``$and`` of ``tags=a`` and ``tags=b`` asks for both tags, not either)."""
    own: list[Condition] = []
    every: list[Condition] = []
    for name, given in spec.items():
        name = str(name)
        if name == "$and" and isinstance(given, (list, tuple)):
            for part in given:
                if not isinstance(part, Mapping):
                    raise ParameterError(f"filter $and: a list of mappings, not {part!r}")
                every += _all_of(part).conditions
            continue
        own += _conditions(name, given)
    every += _collect(own).conditions
    return Filters(tuple(sorted(dict.fromkeys(every), key=_order)))


def _order(c: Condition) -> tuple[str, int, tuple[str, ...]]:
    return c.name, OPERATORS.index(c.op), c.values


def _conditions(name: str, given: Any) -> list[Condition]:
    """The conditions on ``name`` of one entry of a filter mapping."""
    out: list[Condition] = []
    if name.startswith("$"):
        raise ParameterError(f"filter {name!r}: only $and combines filters (conditions "
                             "on different names must all hold)")
    tests = given.items() if isinstance(given, Mapping) else [("=", given)]
    for operator, value in tests:
        op = _NAMED.get(str(operator))
        if op is None:
            raise ParameterError(f"filter {name!r}: unknown operator {operator!r} (use "
                                 "=, !=, <, <=, >, >=, in, nin or $eq, $ne, $lt, $lte, "
                                 "$gt, $gte, $in, $nin)")
        many = isinstance(value, (list, tuple, set, frozenset))
        if op in ("in", "nin") and not many:
            raise ParameterError(f"filter {name!r}: {operator} takes a list of values")
        plain: Operator = "=" if op == "in" else "!=" if op == "nin" else op
        for item in (value if many else [value]):
            text = _scalar(name, item)
            out.append(_checked(name, plain, text, f"{name}{plain}{text}"))
    return out


def _is_glob(value: str) -> bool:
    return "*" in value or "?" in value


def _text(value: Any) -> str:
    """A JSON scalar as the text a filter value is compared with."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _equal(pattern: str, value: Any) -> bool:
    """Whether one scalar value equals a filter value (globs on text, numbers as numbers)."""
    if _is_glob(pattern):
        # fnmatch's [...] classes are no part of kbsync's globs: a '[' is literal.
        return fnmatch.fnmatchcase(_text(value), pattern.replace("[", "[[]"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = _number(pattern)
        if number is not None:
            return float(value) == number
    return _text(value) == pattern


def _in_range(op: Operator, bound: str, value: Any) -> bool:
    """Whether one scalar value meets a range condition (numbers with numbers, dates with
    dates, over the bound's length)."""
    number = _number(bound)
    left: Any
    right: Any
    if number is not None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        left, right = float(value), number
    else:
        if not isinstance(value, str) or not re.match(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            return False
        left, right = value[: len(bound)].replace(" ", "T"), bound
    return bool({"<": left < right, "<=": left <= right, ">": left > right,
                 ">=": left >= right}[op])


def matches(filters: Filters, source: str, key: str, metadata: Mapping[str, Any],
            title: str | None = None) -> bool:
    """Whether a document meets ``filters`` (what the stores' SQL computes, in Python)."""
    fields = {"source": source, "path": key, "title": title}
    for c in filters.conditions:
        if c.name in STORE_FIELDS:
            found: list[Any] = [fields[c.name]] if fields[c.name] is not None else []
        else:
            raw = metadata.get(c.name)
            found = list(raw) if isinstance(raw, list) else [raw]
        scalars = [v for v in found if v is not None and not isinstance(v, (dict, list))]
        if c.op == "=":
            held = any(_equal(p, v) for p in c.values for v in scalars)
        elif c.op == "!=":
            held = not any(_equal(p, v) for p in c.values for v in scalars)
        else:
            held = any(_in_range(c.op, c.values[0], v) for v in scalars)
        if not held:
            return False
    return True


def _sqlite_glob(value: str) -> str:
    # GLOB's [...] classes are no part of kbsync's globs: '[' is matched literally.
    return value.replace("[", "[[]")


_SQLITE_METADATA = "(CASE WHEN json_valid(d.metadata) THEN d.metadata ELSE '{}' END)"
_SQLITE_TEXT = ("CASE j.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' "
                "ELSE CAST(j.value AS TEXT) END")


def _sqlite_equal(value: str, column: str | None) -> tuple[str, list[object]]:
    """SQL that holds when one value (a store column, else the json_each row ``j``) equals
    a filter value, and its arguments."""
    if _is_glob(value):
        return f"{column or _SQLITE_TEXT} GLOB ?", [_sqlite_glob(value)]
    if column is not None:
        return f"{column} = ?", [value]
    number = _number(value)
    if number is not None:
        return (f"(CASE WHEN j.type IN ('integer', 'real') THEN j.value = ? "
                f"ELSE {_SQLITE_TEXT} = ? END)", [number, value])
    return f"{_SQLITE_TEXT} = ?", [value]


def _sqlite_range(op: Operator, bound: str) -> tuple[str, list[object]]:
    number = _number(bound)
    if number is not None:
        return f"(j.type IN ('integer', 'real') AND j.value {op} ?)", [number]
    return (f"(j.type = 'text' AND j.value GLOB '{_DATE_GLOB}' AND "
            f"replace(substr(j.value, 1, ?), ' ', 'T') {op} ?)", [len(bound), bound])


def sqlite_condition(filters: Filters) -> tuple[str, list[object]]:
    """SQLite SQL over a document ``d`` that holds when it meets ``filters``, and its arguments."""
    parts: list[str] = []
    args: list[object] = []
    for c in filters.conditions:
        alternatives: list[str] = []
        values: list[object] = []
        column = STORE_FIELDS.get(c.name)
        for value in c.values:
            sql, more = (_sqlite_range(c.op, value) if c.op in _RANGES
                         else _sqlite_equal(value, column))
            alternatives.append(sql)
            values += more
        test = " OR ".join(alternatives)
        if column is not None:
            parts.append(f"NOT ({column} IS NOT NULL AND ({test}))" if c.op == "!="
                         else f"({test})")
            args += values
            continue
        # json_each walks a list's items, or yields a scalar as its one row. An object's
        # members are no values of its key: json_type keeps them out. A damaged metadata
        # column has no keys.
        exists = (f"EXISTS (SELECT 1 FROM json_each({_SQLITE_METADATA}, ?) j WHERE "
                  f"json_type({_SQLITE_METADATA}, ?) <> 'object' AND j.type "
                  f"NOT IN ('null', 'object', 'array') AND ({test}))")
        parts.append(f"NOT {exists}" if c.op == "!=" else exists)
        args += ['$."' + c.name + '"'] * 2
        args += values
    return " AND ".join(parts) or "1", args


def _like(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _postgres_equal(value: str, column: str | None) -> tuple[str, list[object]]:
    target = column or "v.x"
    if _is_glob(value):
        return f"{target} LIKE %s", [_like(value)]
    number = _number(value)
    if column is None and number is not None:
        return ("(CASE WHEN jsonb_typeof(e) = 'number' THEN (e #>> '{}')::float8 = %s "
                "ELSE v.x = %s END)", [number, value])
    return f"{target} = %s", [value]


def _postgres_range(op: Operator, bound: str) -> tuple[str, list[object]]:
    number = _number(bound)
    if number is not None:
        return (f"(jsonb_typeof(e) = 'number' AND (e #>> '{{}}')::float8 {op} %s)", [number])
    return (f"(jsonb_typeof(e) = 'string' AND v.x ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}' AND "
            f"replace(substr(v.x, 1, %s), ' ', 'T') {op} %s)", [len(bound), bound])


def postgres_condition(filters: Filters) -> tuple[str, list[object]]:
    """PostgreSQL SQL over a document ``d`` that holds when it meets ``filters``, and its
    arguments (``%s`` placeholders; the metadata column is JSON text, read as jsonb)."""
    parts: list[str] = []
    args: list[object] = []
    for c in filters.conditions:
        alternatives: list[str] = []
        values: list[object] = []
        column = STORE_FIELDS.get(c.name)
        for value in c.values:
            sql, more = (_postgres_range(c.op, value) if c.op in _RANGES
                         else _postgres_equal(value, column))
            alternatives.append(sql)
            values += more
        test = " OR ".join(alternatives)
        if column is not None:
            parts.append(f"NOT ({column} IS NOT NULL AND ({test}))" if c.op == "!="
                         else f"({test})")
            args += values
            continue
        # A list's items, or a scalar as a list of one; objects and nulls match nothing.
        exists = (
            "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(d.metadata::jsonb -> %s) "
            "WHEN 'array' THEN d.metadata::jsonb -> %s "
            "ELSE jsonb_build_array(d.metadata::jsonb -> %s) END) e, "
            "LATERAL (SELECT e #>> '{}' AS x) v WHERE jsonb_typeof(e) IN "
            f"('string', 'number', 'boolean') AND ({test}))")
        parts.append(f"NOT {exists}" if c.op == "!=" else exists)
        args += [c.name, c.name, c.name]
        args += values
    return " AND ".join(parts) or "TRUE", args
