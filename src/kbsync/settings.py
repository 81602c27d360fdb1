"""Typed settings: each table of ``kbsync.toml`` becomes a frozen dataclass before anything runs.

One mechanism for every table and every kind (source, embedder, store, vector sink):
the table is converted into its settings type strictly (a string is never read as a
list, nor a number as a string), a key the type does not declare is refused with the
name it resembles, and the type's own ``__post_init__`` checks ranges and combinations.
A wrong value is a :class:`~kbsync.errors.ConfigError` naming the table, the key, the
type expected and the value found, so nothing is read, written or deleted on its account
(a lone string ``include = "*.md"`` once read as a list of one-letter globs and deleted
documents).

The conversion is msgspec's: it validates plain frozen dataclasses (the project's value
type) strictly, says where in a table the wrong value is, and imports in milliseconds,
which a command line started often needs.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import msgspec

from kbsync.errors import ConfigError

__all__ = ["describe", "keys_of", "parse_settings", "refuse_unknown", "shown"]

T = TypeVar("T")


def parse_settings(table: object, settings_type: type[T], where: str) -> T:
    """``table`` checked into ``settings_type``; ConfigError naming ``where`` and the key.

    ``where`` is how the table is written in the file (``[index]``, ``[[sources]] 'docs':``).
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where.rstrip(':')} must be a table, got {shown(table)}")
    refuse_unknown(table, keys_of(settings_type), where)
    try:
        settings: T = msgspec.convert(dict(table), settings_type, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(_explained(str(exc), table, settings_type, where)) from None
    return settings


def keys_of(settings_type: type) -> tuple[str, ...]:
    """The keys a table of ``settings_type`` may hold."""
    return tuple(f.name for f in dataclasses.fields(settings_type))


def refuse_unknown(table: Mapping[str, Any], known: Collection[str], where: str) -> None:
    """A key outside ``known`` is a misspelling: ConfigError naming the one it resembles."""
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = (f"; did you mean {close[0]!r}?" if close
                    else f" (known: {', '.join(sorted(known))})")
            raise ConfigError(f"unknown setting {where} {key}{hint}")


_PATH = re.compile(r"^(?P<what>.*) - at `\$\.(?P<key>[^.\[`]+)(?P<rest>[^`]*)`$", re.DOTALL)


def _explained(message: str, table: Mapping[str, Any], settings_type: type, where: str) -> str:
    """msgspec's message in the words of ``kbsync.toml``: table, key, expected type, value."""
    found = _PATH.match(message)
    if found is None:  # the type's own check (__post_init__) or a key that is missing
        missing = re.match(r"Object missing required field `(\w+)`", message)
        if missing:
            return f"{where.rstrip(':')} needs `{missing.group(1)}`"
        return f"{where.rstrip(':')}: {message}"
    key = found.group("key")
    expected = describe(get_type_hints(settings_type, include_extras=True).get(key, Any))
    return f"{where} {key}: expected {expected}, got {shown(table.get(key))}"


def describe(annotation: Any, plural: bool = False) -> str:
    """A declared type in the words of a TOML file (``a list of strings``, ``an integer >= 0``)."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return describe(args[0], plural) + "".join(_bounds(m) for m in args[1:])
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a, plural) for a in args if a is not type(None))
    if origin in (tuple, list, frozenset, set) or annotation in (tuple, list):
        item = args[0] if args else Any
        return "lists of " + describe(item, True) if plural else "a list of " + describe(item, True)
    if origin in (dict, Mapping) or annotation in (dict, Mapping) or (
            isinstance(origin, type) and issubclass(origin, Mapping)):
        return "tables" if plural else "a table"
    words = {bool: ("true or false", "true or false"), int: ("an integer", "integers"),
             float: ("a number", "numbers"), str: ("a string", "strings")}
    if annotation in words:
        return words[annotation][plural]
    return "values" if plural else "a value"


def _bounds(meta: object) -> str:
    """The range a ``msgspec.Meta`` declares, as words after its type."""
    if not isinstance(meta, msgspec.Meta):
        return ""
    marks = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
    bounds = [f" {sign} {getattr(meta, name)}" for name, sign in marks
              if getattr(meta, name) is not None]
    return " and".join(bounds) + ("" if meta.min_length is None
                                  else f" of at least {meta.min_length}")


def shown(value: object) -> str:
    """A value as ``kbsync.toml`` writes it, with its kind: ``"*.md" (a string)``."""
    kind = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular value cannot come from TOML; say what it is
        text = repr(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({kind})"
