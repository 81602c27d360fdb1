"""The search mode a knowledge base uses when none is asked for follows its embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.engine import add_source, init_config, load_config
from kbsync.errors import ConfigError, ParameterError

PAGES = {
    "retry.md": "# Retry\n\nA failed task runs again after a delay that grows each time.\n",
    "queues.md": "# Queues\n\nTasks wait in a queue until a worker is free to run them.\n",
    "workers.md": "# Workers\n\nA worker takes the oldest task and reports when it is done.\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    init_config(tmp_path, ["docs"])
    with KnowledgeBase.open(tmp_path) as kb:
        assert not kb.sync().failed
    return tmp_path


def _set_search(folder: Path, line: str) -> None:
    file = folder / "kbsync.toml"
    text = file.read_text()
    assert "\n[search]\n" in text  # init writes context_tokens there
    file.write_text(text.replace("\n[search]\n", f"\n[search]\n{line}\n"))


def _ranked(hits: list) -> list[tuple[str, int, float]]:  # type: ignore[type-arg]
    return [(h.key, h.index, h.score) for h in hits]


def test_the_hashing_embedder_searches_full_text_by_default(folder: Path) -> None:
    with KnowledgeBase.open(folder) as kb:
        assert kb.config.default_search_mode == "text"
        default = kb.search("what runs a failed task again", k=3)
        assert _ranked(default) == _ranked(kb.search("what runs a failed task again", k=3,
                                                     mode="text"))
        assert _ranked(default) != _ranked(kb.search("what runs a failed task again", k=3,
                                                     mode="hybrid"))


@pytest.mark.parametrize("embedder", [{"kind": "local"},
                                      {"kind": "openai", "model": "text-embedding-3-small"}])
def test_a_model_embedder_searches_hybrid_by_default(tmp_path: Path,
                                                     embedder: dict[str, str]) -> None:
    config = init_config(tmp_path, embedder=embedder)
    assert config.default_search_mode == "hybrid"


def test_the_search_table_s_mode_is_the_default_and_survives_a_rewrite(folder: Path) -> None:
    _set_search(folder, 'mode = "hybrid"')
    with KnowledgeBase.open(folder) as kb:
        assert kb.config.default_search_mode == "hybrid"
        assert _ranked(kb.search("failed task", k=3)) == _ranked(
            kb.search("failed task", k=3, mode="hybrid"))
    (folder / "more").mkdir()
    add_source(load_config(folder), str(folder / "more"))  # rewrites kbsync.toml
    assert load_config(folder).search.mode == "hybrid"


def test_an_unknown_search_mode_is_refused_naming_the_file(folder: Path) -> None:
    _set_search(folder, 'mode = "semantic"')
    with pytest.raises(ConfigError, match=r"kbsync\.toml: \[search\] mode: expected one of "
                                          r'"vector", "text", "hybrid", got "semantic"'):
        load_config(folder)


def test_the_search_command_uses_the_default_mode_and_takes_another(folder: Path) -> None:
    def keys(*args: str) -> list[str]:
        result = CliRunner().invoke(app, ["search", "failed task", "-k", "3", "-c", str(folder),
                                          "--json", "--context", "0", *args])
        assert result.exit_code == 0, result.output
        return [h["key"] for h in json.loads(result.stdout)["hits"]]

    with KnowledgeBase.open(folder) as kb:
        text = [h.key for h in kb.search("failed task", k=3, mode="text", context_tokens=0)]
        hybrid = [h.key for h in kb.search("failed task", k=3, mode="hybrid",
                                           context_tokens=0)]
    assert keys() == text
    assert keys("--mode", "hybrid") == hybrid


def test_the_search_table_s_fusion_picks_how_hybrid_search_ranks(folder: Path) -> None:
    query = "what runs a failed task again"
    with KnowledgeBase.open(folder) as kb:
        by_scores = kb.search(query, k=3, mode="hybrid")
    # The best hit leads at least one list: its share of that list's weight is whole.
    assert by_scores[0].score >= 0.5
    _set_search(folder, 'fusion = "ranks"')
    with KnowledgeBase.open(folder) as kb:
        by_ranks = kb.search(query, k=3, mode="hybrid")
    assert by_ranks[0].score <= 2 / 61  # first in both lists of reciprocal rank fusion
    _set_search(folder, 'vector_weight = 0.0')
    with KnowledgeBase.open(folder) as kb:
        assert [h.key for h in kb.search(query, k=1, mode="hybrid")] == [
            h.key for h in kb.search(query, k=1, mode="text")]


@pytest.mark.parametrize(("line", "message"), [
    ('fusion = "rrf"', r'\[search\] fusion: expected one of "scores", "ranks", got "rrf"'),
    ("vector_weight = 1.5", r"\[search\] vector_weight: .*<= 1"),
])
def test_a_wrong_fusion_setting_is_refused_naming_the_file(folder: Path, line: str,
                                                           message: str) -> None:
    _set_search(folder, line)
    with pytest.raises(ConfigError, match=r"kbsync\.toml: " + message):
        load_config(folder)


def test_a_negative_context_is_refused_in_python_and_on_the_command_line(folder: Path) -> None:
    with KnowledgeBase.open(folder) as kb, pytest.raises(ParameterError, match="context_tokens"):
        kb.search("failed task", k=3, context_tokens=-1)
    result = CliRunner().invoke(app, ["search", "failed task", "-c", str(folder),
                                      "--context", "-5"])
    assert result.exit_code != 0
    assert "context_tokens" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
