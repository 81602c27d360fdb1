"""Filtered search on each kind of store: only matching documents, and none of their hits lost.

A filtered search must rank the matching documents' chunks only; ranking all
chunks and then filtering the best ``k`` would lose the matching documents'
hits whenever others rank above them. The property test checks the filtered
result against the exhaustive unfiltered ranking restricted to the matching
documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbsync import KnowledgeBase
from kbsync.engine import init_config
from kbsync.store import Hit
from kbsync.store.filters import matches, parse_where, postgres_condition
from tests.conftest import Backend
from tests.unit.test_search_filters import VALUES, conditions, metadata_values

WORDS = ["retry", "backoff", "token", "cache", "index", "queue", "schema", "deploy"]
LANGS = ["en", "de", "fr"]
TAGS = ["intro", "install", "api"]
METADATA_NAMES = ["lang", "tags", "n", "flag", "missing"]


def _page(n: int) -> tuple[str, str]:
    """The n-th page: a folder, a language, and words chosen by n (pages share words)."""
    folder = ["guide", "api", "blog"][n % 3]
    words = [WORDS[(n * 3 + i) % len(WORDS)] for i in range(3)]
    body = "\n\n".join(f"## Part {j}\n\n" + " ".join([words[j]] * (1 + (n + j) % 4)
                                                       + ["and", "more", "text", str(n)])
                       for j in range(3))
    return (f"{folder}/page-{n:02d}.md",
            f"---\nlang: {LANGS[n % len(LANGS)]}\naudience: {'ops' if n % 4 else 'dev'}\n"
            f"version: {n % 5}\ndate: 2024-{1 + n % 9:02d}-15\ntags: [{TAGS[n % 3]}, all]\n"
            f"---\n# Page {n}\n\n{body}\n")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def kb(tmp_path_factory: pytest.TempPathFactory,
       request: pytest.FixtureRequest) -> Iterator[KnowledgeBase]:
    """A knowledge base of two sources (docs: 24 pages, notes: 6), on each kind of store."""
    backend = Backend(request.param, "" if request.param == "sqlite"
                      else request.getfixturevalue("postgres_url"))
    root = tmp_path_factory.mktemp("filters")
    for source, count in (("docs", 24), ("notes", 6)):
        for n in range(count):
            path, text = _page(n + (100 if source == "notes" else 0))
            (root / source / path).parent.mkdir(parents=True, exist_ok=True)
            (root / source / path).write_text(text)
    init_config(root, ["docs", "notes"])
    backend.configure(root)
    try:
        with KnowledgeBase.open(root) as opened:
            assert not opened.sync().failed
            yield opened
    finally:
        backend.drop()


def _metadata(kb: KnowledgeBase, hit: Hit) -> dict[str, Any]:
    found = kb.store.manifest(hit.source)[hit.key].metadata
    return dict(json.loads(found))


def _keys(hits: list[Hit]) -> list[tuple[str, str, int]]:
    return [(h.source, h.key, h.index) for h in hits]


def test_filters_on_source_path_and_metadata_return_only_matching_documents(
        kb: KnowledgeBase) -> None:
    for mode in ("vector", "text", "hybrid"):
        hits = kb.search("retry backoff", k=50, mode=mode, context_tokens=0,
                         filters={"source": "docs", "path": "guide/*", "lang": "en"})
        assert hits, mode
        for hit in hits:
            assert hit.source == "docs", (mode, hit.key)
            assert hit.key.startswith("guide/"), (mode, hit.key)
            assert _metadata(kb, hit)["lang"] == "en"


def test_one_name_twice_is_either_value_and_two_names_must_both_hold(kb: KnowledgeBase) -> None:
    hits = kb.search("retry token cache", k=100, mode="text", context_tokens=0,
                     filters=parse_where(["lang=de", "lang=fr", "audience=dev"]))
    assert hits
    assert {_metadata(kb, h)["lang"] for h in hits} == {"de", "fr"}
    assert {_metadata(kb, h)["audience"] for h in hits} == {"dev"}


def test_an_unknown_metadata_key_matches_nothing_and_is_no_error(kb: KnowledgeBase) -> None:
    for mode in ("vector", "text", "hybrid"):
        assert kb.search("retry", k=5, mode=mode, filters={"colour": "red"}) == []


def test_a_narrow_filter_finds_a_document_that_the_unfiltered_best_k_leaves_out(
        kb: KnowledgeBase) -> None:
    everything = kb.search("retry", k=1000, mode="vector", context_tokens=0)
    last = everything[-1]
    assert last.key not in {h.key for h in everything[:5]}
    hits = kb.search("retry", k=5, mode="vector", context_tokens=0,
                     filters={"source": last.source, "path": last.key})
    assert (last.source, last.key) in {(h.source, h.key) for h in hits}


def test_hits_carry_their_rank_and_a_relevance_between_zero_and_one(kb: KnowledgeBase) -> None:
    for mode in ("vector", "text", "hybrid"):
        hits = kb.search("retry backoff", k=8, mode=mode)
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1)), mode
        assert all(0.0 <= h.relevance <= 1.0 for h in hits), mode
        assert [h.relevance for h in hits] == sorted((h.relevance for h in hits), reverse=True)
    text = kb.search("retry backoff", k=8, mode="text", context_tokens=0)
    assert text[0].relevance == 1.0  # the best text hit is the measure of the others
    vector = kb.search("retry backoff", k=3, mode="vector", context_tokens=0)
    assert [h.relevance for h in vector] == [max(0.0, min(1.0, h.score)) for h in vector]


def _equal(name: str, values: list[str]) -> st.SearchStrategy[tuple[str, str, str]]:
    return st.tuples(st.just(name), st.just("="), st.sampled_from(values))


wheres = st.lists(st.one_of(
    _equal("source", ["docs", "notes", "n*", "nope"]),
    _equal("path", ["guide/*", "api/page-0?.md", "*-1*", "blog/page-02.md"]),
    _equal("lang", [*LANGS, "e*", "xx"]),
    _equal("audience", ["ops", "dev", "*"]),
    _equal("unknown", ["x"]),
    _equal("tags", [*TAGS, "all", "in*", "none"]),
    _equal("version", ["0", "3", "3.0"]),
    st.tuples(st.sampled_from(["lang", "tags", "source", "path", "unknown", "version"]),
              st.just("!="), st.sampled_from(["en", "intro", "docs", "guide/*", "x", "2"])),
    st.tuples(st.just("version"), st.sampled_from(["<", "<=", ">", ">="]),
              st.sampled_from(["0", "2", "3.5", "4"])),
    st.tuples(st.just("date"), st.sampled_from(["<", "<=", ">", ">="]),
              st.sampled_from(["2024-01-15", "2024-05-15", "2024-05-15T12:00", "2024-09-30"])),
), max_size=4)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=wheres, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
       mode=st.sampled_from(["vector", "text"]), k=st.integers(1, 12))
def test_a_filtered_search_is_the_exhaustive_ranking_restricted_to_the_matching_documents(
        kb: KnowledgeBase, where: list[tuple[str, str, str]], query: list[str], mode: str,
        k: int) -> None:
    filters = parse_where(f"{name}{op}{value}" for name, op, value in where)
    text = " ".join(query)
    every = kb.search(text, k=10_000, mode=mode, context_tokens=0)  # type: ignore[arg-type]
    expected = [h for h in every if matches(filters, h.source, h.key, _metadata(kb, h))][:k]
    found = kb.search(text, k=k, mode=mode, context_tokens=0,  # type: ignore[arg-type]
                      filters=filters)
    assert [round(h.score, 5) for h in found] == [round(h.score, 5) for h in expected]
    # Equal scores may come in either order; everything above the last score is the same.
    if found:
        above = found[-1].score + 1e-6
        assert {x for x, h in zip(_keys(found), found, strict=True) if h.score > above} == \
            {x for x, h in zip(_keys(expected), expected, strict=True) if h.score > above}


def test_each_store_filters_the_same_way(tmp_path: Path, backend: Backend) -> None:
    docs = tmp_path / "docs"
    for n in range(6):
        path, text = _page(n)
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(text)
    init_config(tmp_path, ["docs"])
    backend.configure(tmp_path)
    with KnowledgeBase.open(tmp_path) as engine:
        assert not engine.sync().failed
        for mode in ("vector", "text", "hybrid"):
            for where in (["lang=en"], ["path=guide/*", "path=api/*"], ["lang=d?", "audience=o*"],
                          ["missing=x"], ["source=docs", "path=blog/page-02.md"]):
                filters = parse_where(where)
                hits = engine.search("retry token cache schema", k=20, mode=mode,
                                     context_tokens=0, filters=filters)
                wanted = {path for n in range(6) for path, text in [_page(n)]
                          if matches(filters, "docs", path,
                                     {"lang": LANGS[n % 3], "audience": "ops" if n % 4 else "dev"})}
                assert {h.key for h in hits} <= wanted, (backend.name, mode, where)
                assert bool(hits) == bool(wanted), (backend.name, mode, where)


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[Any]:
    """A connection to the test server with a scratch documents table."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TEMPORARY TABLE documents (id BIGINT PRIMARY KEY, source TEXT, "
                     "key TEXT, metadata TEXT)")
        yield conn


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.sampled_from(VALUES), key=st.sampled_from(VALUES),
       metadata=st.dictionaries(st.sampled_from(METADATA_NAMES), metadata_values, max_size=4),
       where=st.lists(conditions, max_size=4))
def test_the_postgres_condition_decides_as_the_rules_do(pg: Any, source: str, key: str,
                                                        metadata: dict[str, Any],
                                                        where: list[tuple[str, str, str]]) -> None:
    filters = parse_where(f"{name}{op}{value}" for name, op, value in where)
    pg.execute("DELETE FROM documents")
    pg.execute("INSERT INTO documents VALUES (1, %s, %s, %s)",
               (source, key, json.dumps(metadata)))
    sql, args = postgres_condition(filters)
    found = pg.execute(f"SELECT count(*) FROM documents d WHERE {sql}", args).fetchone()[0]
    assert bool(found) is matches(filters, source, key, metadata)


def test_a_broad_filter_on_postgres_walks_the_index_and_finds_what_the_exact_scan_finds(
        tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbsync.store.postgres import search as postgres_search

    docs = tmp_path / "docs"
    for n in range(12):
        path, text = _page(n)
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(text)
    init_config(tmp_path, ["docs"])
    backend = Backend("postgres", postgres_url)
    backend.configure(tmp_path)
    try:
        with KnowledgeBase.open(tmp_path) as engine:
            assert not engine.sync().failed
            for where in (["lang=en"], ["path=blog/*", "audience=dev"], ["path=*"]):
                exact = engine.search("retry cache", k=6, mode="vector", context_tokens=0,
                                      filters=parse_where(where))
                monkeypatch.setattr(postgres_search, "_EXACT_FILTERED_CHUNKS", 0)
                walked = engine.search("retry cache", k=6, mode="vector", context_tokens=0,
                                       filters=parse_where(where))
                monkeypatch.undo()
                assert _keys(walked) == _keys(exact), where
    finally:
        backend.drop()


def test_the_title_is_a_field_a_filter_can_name(kb: KnowledgeBase) -> None:
    titled = {h.title for h in kb.search("retry backoff", k=20, mode="text", context_tokens=0)}
    title = sorted(t for t in titled if t)[0]
    hits = kb.search("retry backoff", k=20, mode="text", context_tokens=0,
                     filters={"title": title})
    assert hits
    assert {h.title for h in hits} == {title}
    assert kb.search("retry backoff", k=5, mode="text", filters={"title": "no such*"}) == []
