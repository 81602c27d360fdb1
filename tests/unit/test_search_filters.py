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
    assert filters_from({"n": [3], "draft": False}) == parse_where(["n=3", "draft=false"])
    with pytest.raises(ParameterError):
        filters_from({"n": [None]})


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


DATES = ["2024-05-01", "2024-05-01T10:30:00", "2024-04-30 23:59", "2025-01-01", "2024-5-1"]
scalars = st.one_of(st.sampled_from(VALUES), st.integers(-5, 5), st.booleans(), st.none(),
                    st.sampled_from(DATES), st.sampled_from([0.5, -2.5, 3.0, 1.25]))
metadata_values = st.one_of(scalars, st.lists(scalars, max_size=3),
                            st.dictionaries(st.sampled_from(VALUES), scalars, max_size=2))
GLOBS = ["*", "?", "e*", "*e*", "g*/*", "?n", "x[*", "-*", "a_*", "a?b%*", "a\\*"]
patterns = st.one_of(st.sampled_from(VALUES), st.sampled_from(GLOBS),
                     st.sampled_from(["3.0", "+3", "0.5", "-2.5", "1.250", "2024-05-01"]))
BOUNDS = ["0", "3", "-2.5", "1.25", "2024-05-01", "2024-04-30", "2024-05-01T10:30",
          "2024-05-01T10:30:00", "2025"]
conditions = st.one_of(
    st.tuples(st.sampled_from(NAMES), st.sampled_from(["=", "!="]), patterns),
    st.tuples(st.sampled_from(NAMES[2:]), st.sampled_from(["<", "<=", ">", ">="]),
              st.sampled_from(BOUNDS)))


@settings(max_examples=200, deadline=None)
@given(source=st.sampled_from(VALUES), key=st.sampled_from(VALUES),
       metadata=st.dictionaries(st.sampled_from(NAMES[2:]), metadata_values, max_size=4),
       where=st.lists(conditions, max_size=4))
def test_the_sqlite_condition_decides_as_the_rules_do(source: str, key: str,
                                                      metadata: dict[str, Any],
                                                      where: list[tuple[str, str, str]]) -> None:
    filters = parse_where(f"{name}{op}{value}" for name, op, value in where)
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


@pytest.mark.parametrize(("where", "expected"), [
    ("tags=intro", True), ("tags=install", True), ("tags=in*", True), ("tags=other", False),
    ("tags!=other", True), ("tags!=intro", False), ("lang!=en", False), ("lang!=de", True),
    ("missing!=x", True), ("source!=docs", False), ("path!=guide/*", False),
    ("version=3", True), ("version=3.0", True), ("version!=3", False), ("version>2", True),
    ("version>=3", True), ("version<3", False), ("version<=3.0", True), ("weight>1.4", True),
    ("weight<1.5", False), ("draft=false", True), ("draft!=true", True),
    ("date>=2024-05-01", True), ("date>2024-05-01", False), ("date<2024-05-02", True),
    ("date<=2024-04-30", False), ("updated<=2024-05-01", True), ("updated>2024-05-01", False),
    ("updated>=2024-05-01T10:30", True), ("updated>2024-05-01T10:29", True),
    ("updated<2024-05-01T10:30", False), ("date>2023", False), ("version>2024-01-01", False),
    ("date>1", False), ("lang>1", False), ("tags<9", False), ("scores>2", True),
    ("scores<1", False), ("scores=2", False), ("scores=2.50", True),
])
def test_operators_compare_typed_values_and_lists_match_by_any_item(where: str,
                                                                   expected: bool) -> None:
    metadata = {"lang": "en", "tags": ["intro", "install"], "version": 3, "weight": 1.5,
                "draft": False, "date": "2024-05-01", "updated": "2024-05-01T10:30:00+00:00",
                "scores": [1, 2.5]}
    assert matches(parse_where([where]), "docs", "guide/intro.md", metadata) is expected
    assert _sqlite_matches(parse_where([where]), "docs", "guide/intro.md", metadata) is expected


@pytest.mark.parametrize("item", ["date<yesterday", "n>=", "source<3", "title>2024-01-01",
                                  "date<2024-5-1"])
def test_a_range_needs_a_number_or_a_date_bound_on_metadata(item: str) -> None:
    with pytest.raises(ParameterError) as raised:
        parse_where([item])
    assert repr(item) in str(raised.value)


def test_the_api_form_takes_operators_by_symbol_or_by_langchain_name() -> None:
    import datetime

    assert filters_from({"date": {">=": "2024-01-01", "<": datetime.date(2025, 1, 1)},
                         "tags": {"$in": ["a", "b"]}, "lang": {"$ne": "fr"}}) == parse_where(
        ["date>=2024-01-01", "date<2025-01-01", "tags=a", "tags=b", "lang!=fr"])
    assert filters_from({"$and": [{"n": {"$gt": 2}}, {"n": {"$lte": 5}}]}) == parse_where(
        ["n>2", "n<=5"])
    assert filters_from({"tags": {"$nin": ["x", "y"]}}) == parse_where(["tags!=x", "tags!=y"])
    for bad in ({"n": {"$regex": "x"}}, {"$or": [{"n": 1}]}, {"n": {"$in": "x"}},
                {"n": {"$gt": "x"}}):
        with pytest.raises(ParameterError):
            filters_from(bad)
    spec = {"date": {">=": ["2024-01-01"], "<": ["2025-01-01"]}, "lang": ["en", "de"]}
    assert filters_from(spec).to_dict() == spec


def test_an_and_of_two_values_of_one_name_asks_for_both_not_either() -> None:
    both = filters_from({"$and": [{"tags": "middleware"}, {"tags": "security"}]})
    assert len(both.conditions) == 2
    assert matches(both, "docs", "cors.md", {"tags": ["middleware", "security"]})
    assert not matches(both, "docs", "gzip.md", {"tags": ["middleware"]})
    either = filters_from({"tags": ["middleware", "security"]})  # alternatives, as before
    assert matches(either, "docs", "gzip.md", {"tags": ["middleware"]})
    assert filters_from(both.to_dict()) == both
    mixed = filters_from({"n": {">": 1}, "$and": [{"n": {">": 2}}, {"n": {"!=": 5}},
                                                   {"n": {"!=": 7}}]})
    assert filters_from(mixed.to_dict()) == mixed


def test_filters_written_as_the_command_line_writes_them_are_refused_by_name() -> None:
    with pytest.raises(ParameterError, match=r"mapping such as .*'tags=intro'"):
        filters_from("tags=intro")  # type: ignore[arg-type]
