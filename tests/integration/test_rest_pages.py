"""A reStructuredText page in a folder: its titles are the headings of its hits."""

from __future__ import annotations

from pathlib import Path

from kbsync import KnowledgeBase
from kbsync.engine import init_config

PAGE = """\
==============
Handling HTTP
==============

Django serves requests through views and middleware, one request at a time. {filler}

Passing arguments
=================

Keyword arguments come from the captured groups of the URL pattern. {filler}

Decorators
==========

Decorators wrap views to require a login or to cache the response. {filler}
""".format(filler=" ".join(f"Sentence {n} of the section says a little more." for n in range(12)))


def test_a_hit_in_a_rest_page_names_its_title_and_its_window_stays_in_its_section(
        tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "http.txt").write_text(PAGE)
    init_config(tmp_path, ["docs"])
    with KnowledgeBase.open(tmp_path) as kb:
        assert not kb.sync().failed
        hit = kb.search("captured groups of the URL pattern", k=1, context_tokens=512)[0]
        assert kb.document("http.txt").title == "Handling HTTP"
    assert hit.heading == "Passing arguments"
    assert "captured groups" in hit.context
    assert "Decorators wrap" not in hit.context
    assert "=====" not in hit.context
