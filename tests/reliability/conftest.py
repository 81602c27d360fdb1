"""Fixtures of the reliability suite."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_MEMORY = Path("/dev/shm")


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A private folder in memory where the system has one, else ``tmp_path``.

    The crash tests close and reopen stores hundreds of times, and each close
    checkpoints with fsync; a kill -9 is survived the same on either medium.
    """
    if not (_MEMORY.is_dir() and _MEMORY.stat().st_mode & 0o002):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="kbsync-reliability-", dir=_MEMORY))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
