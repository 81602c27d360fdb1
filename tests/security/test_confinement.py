"""No path outside a source root is ever opened: an audit hook records every open of a sync.

The folder holds links out of the root (to a file, to a directory, to its parent,
to ``/etc/passwd``, by absolute and by ``..`` paths) and names full of dots. The
sync runs in a child process (``measured_sync``) whose audit hook records the
path of every ``open`` and ``sqlite3.connect`` after a warm-up sync, so code
loading is over. Every absolute path opened must lie inside the source root or
the state directory; a relative path (opened against a directory descriptor,
one component at a time) must be one plain name.
"""

from __future__ import annotations

import os
from pathlib import Path

from kbsync.engine import init_config
from tests.integration.measured_sync import measure_in_child
from tests.integration.test_bad_inputs import GOOD

SECRET = "Outside the root: the launch codes are swordfish."


def _kb(base: Path, name: str) -> Path:
    kb = base / name
    docs = kb / "docs"
    docs.mkdir(parents=True)
    for good, text in GOOD.items():
        (docs / good).write_text(text, encoding="utf-8")
    init_config(kb, ["docs"])
    return kb


def test_a_sync_opens_nothing_outside_the_source_root_and_the_state_directory(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret.md").write_text(SECRET)
    (outside / "deeper" / "plans.md").write_text(SECRET)
    warmup = _kb(tmp_path, "warmup")
    kb = _kb(tmp_path, "kb")
    docs = kb / "docs"
    (docs / "sub").mkdir()
    (docs / "sub" / "inner.md").write_text("An inner note about tide tables.")
    os.symlink(outside / "secret.md", docs / "absolute.md")
    os.symlink("../../outside/secret.md", docs / "relative.md")
    os.symlink("../../../outside/deeper/plans.md", docs / "sub" / "up.md")
    os.symlink(outside, docs / "outside-dir")
    os.symlink("..", docs / "parent")
    os.symlink("/etc/passwd", docs / "passwd.md")
    os.symlink("sub/inner.md", docs / "inside-link.md")  # inside: followed
    (docs / "..md").write_text("A hidden name made of dots.")
    (docs / "a..b.md").write_text("Dots in the middle of a name about anchors.")
    (docs / "...").mkdir()
    (docs / "x...md").write_text("Three dots before the extension, about buoys.")

    [result] = measure_in_child(warmup, [kb])

    assert not result["hung"]
    assert result["verify"] == []
    assert set(result["keys"]) == {*GOOD, "sub/inner.md", "inside-link.md", "a..b.md", "x...md"}
    assert not any(SECRET in (text or "") for text in result["texts"].values())
    root = os.path.realpath(docs)
    state = os.path.realpath(kb / ".kbsync")
    opened = result["opened"]
    assert any(p.endswith("alpha.txt") for p in opened), "the audit hook recorded no read"
    for path in opened:
        if os.path.isabs(path):
            real = os.path.realpath(path)
            assert real in (root, state) or real.startswith((root + os.sep, state + os.sep)), path
        else:
            assert os.sep not in path, path
            assert path not in ("", ".", ".."), path
    assert not any("secret" in p or "plans" in p or "passwd" in p for p in opened), opened
