"""A chunk's full-text heading made in Python is the one SQLite's own expression makes."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from kbsync.store.sqlite.schema import FTS_HEADING, fts_heading

parts = st.one_of(st.none(), st.text(alphabet=st.sampled_from(" \t\nab é"), max_size=6),
                  st.text(max_size=12))


@settings(max_examples=300, deadline=None)
@given(parts, parts)
def test_the_full_text_heading_is_the_sql_expression_s(title: str | None,
                                                       heading: str | None) -> None:
    db = sqlite3.connect(":memory:")
    try:
        (expected,) = db.execute(
            f"SELECT {FTS_HEADING} FROM (SELECT ? AS title) d, (SELECT ? AS heading) c",
            (title, heading)).fetchone()
    finally:
        db.close()
    assert fts_heading(title, heading) == expected
