"""Search filters: parsing ``--where``, and the SQL that SQLite runs agreeing with the rules."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbsync.errors import ParameterError
from kbsync.store.filters import Filters, filters_from, matches, parse_where, sqlite_condition

# Values and globs with the characters SQL patterns give a meaning: [ % _ and backslash
VALUES = ["en", "de", "guide", "guide/intro.md", "a*b", "x[1]", "", "3", "true", "a_b%c", "a\\b"]
NAMES = ["source", "path", "lang", "tags", "n", "flag", "missing"]


def test_where_items_with_the_same_name_are_alternatives_and_names_are_all_required() -> None:
    found = parse_where(["lang=en", "source=docs", "lang=de", "path=guide/*"])
    assert found.to_dict() == {"lang": ["en", "de"], "path": ["guide/*"], "source": ["docs"]}


def test_a_value_may_hold_an_equals_sign() -> None:
    assert parse_where(["title=a=b"]).to_dict() == {"title": ["a=b"]}


@pytest.mark.parametrize("item", ["lang", "=en", "la ng=en", 'la"ng=en'])
def test_a_malformed_where_is_an_error_that_names_it(item: str) -> None:
    with pytest.raises(ParameterError, match="malformed filter") as raised:
        parse_where([item])
    assert repr(item) in str(raised.value)


def test_the_api_form_takes_a_value_or_a_list_of_values() -> None:
    assert filters_from({"lang": "en", "source": ["a", "b"]}) == parse_where(
        ["lang=en", "source=a", "source=b"])
    assert not filters_from(None)
    assert not filters_from({})
    with pytest.raises(ParameterError):
        filters_from({"n": [3]})  # type: ignore[list-item]


def test_no_filter_matches_every_document() -> None:
    assert matches(Filters(), "s", "k", {})


@pytest.mark.parametrize(("where", "expected"), [
    ("path=guide/*", True), ("path=guide/?ntro.md", True), ("path=guide", False),
    ("path=*.md", True), ("source=docs", True), ("source=doc?", True), ("source=Docs", False),
    ("lang=en", True), ("lang=e*", True), ("lang=fr", False), ("nope=en", False),
    ("tags=b", True), ("tags=*", True), ("n=3", True), ("flag=true", True),
    ("obj=x", False), ("none=*", False), ("odd=x[1]", True), ("odd=x[*", True),
])
def test_equality_and_globs_on_fields_and_metadata(where: str, expected: bool) -> None:
    metadata = {"lang": "en", "tags": ["a", "b"], "n": 3, "flag": True, "obj": {"x": "x"},
                "none": None, "odd": "x[1]"}
    assert matches(parse_where([where]), "docs", "guide/intro.md", metadata) is expected
    assert _sqlite_matches(parse_where([where]), "docs", "guide/intro.md", metadata) is expected


def _sqlite_matches(filters: Filters, source: str, key: str, metadata: Any) -> bool:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, source TEXT, key TEXT, "
               "metadata TEXT)")
    db.execute("INSERT INTO documents (source, key, metadata) VALUES (?, ?, ?)",
               (source, key, json.dumps(metadata)))
    where, args = sqlite_condition(filters)
    return bool(db.execute(f"SELECT count(*) FROM documents d WHERE {where}", args).fetchone()[0])


scalars = st.one_of(st.sampled_from(VALUES), st.integers(-5, 5), st.booleans(), st.none())
metadata_values = st.one_of(scalars, st.lists(scalars, max_size=3),
                            st.dictionaries(st.sampled_from(VALUES), scalars, max_size=2))
GLOBS = ["*", "?", "e*", "*e*", "g*/*", "?n", "x[*", "-*", "a_*", "a?b%*", "a\\*"]
patterns = st.one_of(st.sampled_from(VALUES), st.sampled_from(GLOBS))


@settings(max_examples=200, deadline=None)
@given(source=st.sampled_from(VALUES), key=st.sampled_from(VALUES),
       metadata=st.dictionaries(st.sampled_from(NAMES[2:]), metadata_values, max_size=4),
       where=st.lists(st.tuples(st.sampled_from(NAMES), patterns), max_size=4))
def test_the_sqlite_condition_decides_as_the_rules_do(source: str, key: str,
                                                      metadata: dict[str, Any],
                                                      where: list[tuple[str, str]]) -> None:
    filters = parse_where(f"{name}={value}" for name, value in where)
    assert _sqlite_matches(filters, source, key, metadata) is matches(filters, source, key,
                                                                      metadata)


def test_a_damaged_metadata_column_matches_no_metadata_filter_and_raises_nothing() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, source TEXT, key TEXT, "
               "metadata TEXT)")
    db.execute("INSERT INTO documents (source, key, metadata) VALUES ('s', 'k', '{not json')")
    for where in (["lang=en"], ["path=k", "lang=*"]):
        sql, args = sqlite_condition(parse_where(where))
        assert db.execute(f"SELECT count(*) FROM documents d WHERE {sql}", args).fetchone() == (0,)
    sql, args = sqlite_condition(parse_where(["path=k"]))
    assert db.execute(f"SELECT count(*) FROM documents d WHERE {sql}", args).fetchone() == (1,)
