"""Context windows of nearby hits: each text is returned once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.engine import init_config
from tests.conftest import Backend

FILLER = "The harbour office keeps its ledgers in order and its lamps trimmed every night."


def _paragraph(n: int) -> str:
    topic = {4: "The lighthouse keeper climbs the lighthouse stair at dusk.",
             7: "A lighthouse keeper writes the weather in the log."}.get(n, f"Paragraph {n}.")
    return f"{topic} {FILLER} {FILLER}"


@pytest.fixture
def kb(tmp_path: Path, backend: Backend) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "harbour.md").write_text("\n\n".join(_paragraph(n) for n in range(12)) + "\n")
    init_config(tmp_path, ["docs"])
    config = tmp_path / "kbsync.toml"
    text = config.read_text()
    config.write_text(text.replace("min_tokens = 48", "min_tokens = 8")
                      .replace("max_tokens = 192", "max_tokens = 40"))
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as opened:
        assert not opened.sync().failed
    return tmp_path


def test_the_window_of_a_nearby_hit_does_not_repeat_a_window_returned_before(kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        hits = opened.search("lighthouse keeper", k=2, mode="text", context_tokens=140)
    assert [h.key for h in hits] == ["harbour.md", "harbour.md"]
    (a, b) = sorted((h.first, h.last) for h in hits)
    assert a[1] < b[0]  # disjoint: no chunk, so no text, in both
    assert all(h.first <= h.index <= h.last for h in hits)
    assert sum("dusk" in h.context for h in hits) == 1
