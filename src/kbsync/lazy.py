"""A package's names imported on first use (PEP 562).

A package's ``__init__`` that imports each of its modules makes importing any one of them
(``kbsync.sync.chunker``, ``kbsync.engine.loading``) import them all: a command that
needs a part of kbsync would start as slowly as one that needs every part. A package
names where each of its names lives instead, and each is imported when first asked for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["names_on_first_use"]


def names_on_first_use(package: str,
                       homes: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: a name of ``homes`` (module -> the names it
    holds) imported from its module when first asked for, and kept; AttributeError for
    any other name."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def attribute(name: str) -> Any:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
