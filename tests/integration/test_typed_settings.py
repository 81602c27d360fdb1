"""Every key of every table of kbsync.toml is typed: a wrong type is one error naming the
table and the key, before anything is read, written or deleted."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.core.chunking import STRATEGY_PARAMS
from kbsync.embed.kinds import EMBEDDER_KINDS
from kbsync.engine import IndexSettings, SearchSettings
from kbsync.errors import ConfigError
from kbsync.sources.kinds import SOURCE_KINDS
from kbsync.store.kinds import STORE_KINDS
from kbsync.vectors.kinds import SINK_KINDS

runner = CliRunner()

# A valid table of each kind, to which one wrong key is added.
_SOURCE_BASES = {"folder": {"path": "docs"}, "web": {"urls": ["https://example.com/"]},
                 "git": {"repository": "repo"}, "s3": {"url": "s3://bucket/docs"},
                 "fsspec": {"url": "memory://bucket/docs"},
                 "warc": {"paths": ["crawl/*.warc.gz"]}}
_EMBEDDER_BASES = {"openai": {"model": "text-embedding-3-small"}}
_STORE_BASES = {"postgres": {"url": "postgresql://127.0.0.1/kb"}}
_SINK_BASES = {"qdrant": {"path": "qdrant"}, "lancedb": {"path": "lancedb"}}


@dataclasses.dataclass(frozen=True)
class Case:
    """One key of one table: the file around it, and the type it declares."""

    table: str
    key: str
    annotation: Any
    base: Mapping[str, Any]
    head: str  # the table's header line, with the keys that choose its kind

    def __str__(self) -> str:
        return f"{self.head} {self.key}"


def _cases() -> Iterator[Case]:
    """Every key of every table, as the registries of kinds declare them."""
    def keys(settings_type: type) -> Iterator[tuple[str, Any]]:
        yield from get_type_hints(settings_type, include_extras=True).items()

    for name, kind in SOURCE_KINDS.items():
        base = {"name": "docs", "kind": name, **_SOURCE_BASES[name]}
        for key, annotation in keys(kind.settings_type):
            yield Case("sources", key, annotation, base, f"[[sources]] kind={name}")
    for name, embedder in EMBEDDER_KINDS.items():
        base = {"kind": name, **_EMBEDDER_BASES.get(name, {})}
        for key, annotation in keys(embedder.settings_type):
            yield Case("embedder", key, annotation, base, f"[embedder] kind={name}")
    for key in ("allow_truncation", "price_per_million_tokens"):
        yield Case("embedder", key, {"allow_truncation": bool,
                                     "price_per_million_tokens": float}[key],
                   {"kind": "hashing"}, "[embedder]")
    for name, store in STORE_KINDS.items():
        for key, annotation in keys(store.settings_type):
            yield Case("store", key, annotation, _STORE_BASES.get(name, {}), f"[store] {name}")
    for name, sink in SINK_KINDS.items():
        for key, annotation in keys(sink.settings_type):
            yield Case("vectors", key, annotation, {"kind": name, **_SINK_BASES[name]},
                       f"[vectors] kind={name}")
    for name, params in STRATEGY_PARAMS.items():
        for key, annotation in keys(params):
            yield Case("chunker", key, annotation, {"strategy": name}, f"[chunker] {name}")
    for table, settings_type in (("index", IndexSettings), ("search", SearchSettings)):
        for key, annotation in keys(settings_type):
            yield Case(table, key, annotation, {}, f"[{table}]")


CASES = list(_cases())

# TOML values by kind; a wrong value is one of a kind the key does not take.
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")),
                      max_size=6),
    "integer": st.integers(-3, 3),
    "float": st.floats(-2.5, 2.5).filter(lambda x: not x.is_integer()),
    "boolean": st.booleans(),
    "strings": st.lists(st.text("abc*/.", max_size=4), min_size=1, max_size=3),
    "integers": st.lists(st.integers(-3, 3), min_size=1, max_size=3),
    "table": st.dictionaries(st.sampled_from("abc"), st.integers(0, 3), min_size=1,
                             max_size=2),
}


def _taken(annotation: Any) -> set[str]:
    """The kinds of TOML value a declared type takes (Any: every kind)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _taken(args[0])
    if origin in (Union, types.UnionType):
        return set().union(*(_taken(a) for a in args if a is not type(None)))
    if origin is Literal:
        return {"string"}
    if origin in (tuple, list, frozenset):
        return {"strings"} if args and args[0] is str else {"strings", "integers"}
    if annotation in (dict, Mapping) or origin in (dict, Mapping) or (
            isinstance(origin, type) and issubclass(origin, Mapping)):
        return {"table"}
    return {bool: {"boolean"}, int: {"integer"}, float: {"integer", "float"},
            str: {"string"}}.get(annotation, set(_VALUES))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _write(folder: Path, case: Case, value: Any) -> None:
    """kbsync.toml with the folder source and ``case.key = value`` in its table."""
    body = {**case.base, case.key: value}
    header = "[[sources]]" if case.table == "sources" else f"[{case.table}]"
    lines = [header, *(f"{k} = {_toml(v)}" for k, v in body.items())]
    if case.table != "sources":
        lines += ["", "[[sources]]", 'name = "docs"', 'kind = "folder"', 'path = "docs"']
    (folder / "kbsync.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _digest(folder: Path) -> str:
    """A fingerprint of everything in the store's folder."""
    state = folder / ".kbsync"
    return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes()
                                   for p in sorted(state.iterdir()) if p.is_file())).hexdigest()


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A knowledge base over one folder, synced once."""
    folder = tmp_path_factory.mktemp("typed")
    (folder / "docs").mkdir()
    for n in range(4):
        (folder / "docs" / f"note{n}.md").write_text(f"# Note {n}\n\nAbout tides, {n}.\n")
    (folder / "kbsync.toml").write_text('[embedder]\nkind = "hashing"\n\n[[sources]]\n'
                                        'name = "docs"\nkind = "folder"\npath = "docs"\n')
    with KnowledgeBase.open(folder) as kb:
        assert kb.sync().total("new") == 4
    return folder


def test_every_table_and_kind_has_its_keys_checked() -> None:
    tables = {c.table for c in CASES}
    assert tables == {"sources", "embedder", "store", "vectors", "chunker", "index", "search"}
    assert {c.head for c in CASES} >= {f"[[sources]] kind={k}" for k in SOURCE_KINDS}
    assert len(CASES) > 100


@pytest.mark.parametrize("case", [c for c in CASES if set(_VALUES) - _taken(c.annotation)],
                         ids=str)
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_wrong_typed_value_names_the_table_and_key_and_changes_nothing(
        case: Case, data: st.DataObject, synced: Path) -> None:
    wrong = data.draw(st.sampled_from(sorted(set(_VALUES) - _taken(case.annotation)))
                      .flatmap(lambda kind: _VALUES[kind]))
    before = _digest(synced)
    _write(synced, case, wrong)
    with pytest.raises(ConfigError) as caught, KnowledgeBase.open(synced) as kb:
        kb.sync(allow_mass_delete=True)
    message = str(caught.value)
    assert "kbsync.toml" in message
    assert f"{case.key}: expected " in message, message
    table = "[[sources]] 'docs'" if case.table == "sources" else f"[{case.table}]"
    assert table in message, message
    assert "\n" not in message
    assert _digest(synced) == before


def test_a_lone_string_where_a_list_belongs_deletes_nothing(tmp_path: Path) -> None:
    """``include = "*.md"`` was read as the globs "*", ".", "m", "d" and deleted documents."""
    for n in range(14):
        folder = tmp_path / "docs" / ("sec00" if n < 4 else "sec01")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"page{n}.md").write_text(f"# Page {n}\n\nAbout lighthouses, {n}.\n")
    config = tmp_path / "kbsync.toml"
    config.write_text('[embedder]\nkind = "hashing"\n\n[[sources]]\nname = "docs"\n'
                      'kind = "folder"\npath = "docs"\ninclude = ["**/*.md"]\n')
    assert runner.invoke(app, ["sync", "-c", str(tmp_path)]).exit_code == 0
    for wrong in ('"*.md"', '"sec00/*"'):
        config.write_text(config.read_text().replace('include = ["**/*.md"]',
                                                     f"include = {wrong}"))
        result = runner.invoke(app, ["sync", "-c", str(tmp_path), "--allow-mass-delete"])
        assert result.exit_code == 1
        assert (f"[[sources]] 'docs': include: expected a list of strings, got {wrong} "
                "(a string)") in result.output
        config.write_text(config.read_text().replace(f"include = {wrong}",
                                                     'include = ["**/*.md"]'))
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.status().documents == 14


def test_a_wrong_typed_dimension_is_named_not_a_comparison_error(tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text('[embedder]\nkind = "hashing"\ndimension = "x"\n')
    with pytest.raises(ConfigError, match=r'\[embedder\] hashing dimension: expected an '
                                          r'integer >= 8, got "x" \(a string\)'):
        KnowledgeBase.open(tmp_path)
