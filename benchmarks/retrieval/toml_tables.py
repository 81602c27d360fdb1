"""Rewriting one table of a ``kbsync.toml`` that ``kbsync init`` wrote, for the benchmarks."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["set_table", "toml_value"]


def toml_value(value: object) -> str:
    """``value`` as a TOML value (booleans, numbers, strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def set_table(toml: str, table: str, values: Mapping[str, object]) -> str:
    """``toml`` with the body of ``[table]`` replaced by ``values`` (one key per line)."""
    lines = toml.splitlines()
    start = lines.index(f"[{table}]") + 1
    end = start
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("["):
        end += 1
    body = [f"{key} = {toml_value(value)}" for key, value in values.items()]
    return "\n".join([*lines[:start], *body, *lines[end:]]) + "\n"
