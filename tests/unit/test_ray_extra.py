"""The Ray driver needs the ``ray`` extra, and says so; nothing else of kbsync imports Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kbsync.errors import DependencyMissingError
from kbsync.sync.ray_pool import import_ray


def test_a_sync_on_ray_without_the_extra_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # an import of it fails
    with pytest.raises(DependencyMissingError, match=r"pip install 'kbsync\[ray\]'"):
        import_ray()


def test_importing_the_sync_and_the_command_line_does_not_import_ray() -> None:
    code = ("import sys, kbsync.sync, kbsync.app.knowledge_base, kbsync.cli; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
