"""Which implementation of the chunking hot path runs: the compiled kernel or NumPy.

The one place that reads ``KBSYNC_PURE_PYTHON``: set to anything but ``""`` or ``"0"``,
it forces the NumPy reference even when the compiled kernel (``kbsync._kernel``) is
built. The pure core asks this module for ``kernel`` and never reads the environment.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON_VARIABLE", "describe", "kernel", "load_error"]

PURE_PYTHON_VARIABLE = "KBSYNC_PURE_PYTHON"


def _load() -> tuple[ModuleType | None, str | None]:
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0"):
        return None, f"{PURE_PYTHON_VARIABLE} is set"
    try:
        # By name: the extension module is no source file for the import-layer check.
        return importlib.import_module("kbsync._kernel"), None
    except ImportError as exc:
        return None, f"the compiled kernel is not built ({exc})"


kernel, load_error = _load()
"""The compiled module, or None (then ``load_error`` says why)."""


def describe() -> str:
    """One line for ``kbsync version --verbose``: which chunking implementation is active."""
    if kernel is not None:
        return "chunking core: compiled kernel (kbsync._kernel)"
    return f"chunking core: NumPy reference ({load_error})"
