"""What a new user meets first: `kbsync init` and `KnowledgeBase.create`."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.engine import MODEL_TAIL_ABOVE, load_config
from kbsync.errors import ConfigError

runner = CliRunner()


def _embedder(folder: Path) -> dict[str, object]:
    table: dict[str, object] = tomllib.loads((folder / "kbsync.toml").read_text())["embedder"]
    return table


def _init(*args: str) -> tuple[int, str, str]:
    from kbsync.cli import app

    result = runner.invoke(app, ["init", *args])
    return result.exit_code, result.stdout, result.stderr


def test_init_on_a_folder_that_does_not_exist_fails_in_one_line_naming_it(
        tmp_path: Path) -> None:
    code, _, err = _init("no-such-docs", "--folder", str(tmp_path))
    assert code == 1
    assert err.count("\n") == 1, err
    assert "no-such-docs" in err
    assert not (tmp_path / "kbsync.toml").exists()


def test_init_picks_the_local_model_when_its_extra_is_installed(tmp_path: Path) -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("the extra local is not installed")
    (tmp_path / "docs").mkdir()
    code, out, err = _init("docs", "--folder", str(tmp_path))
    assert code == 0, err
    assert _embedder(tmp_path) == {"kind": "local", "model": "all-MiniLM-L6-v2"}
    assert "warning" not in err
    assert "embedder local" in out
    chunker = load_config(tmp_path).chunker.params  # counted as the model counts, with tails
    assert (chunker["token_counter"], chunker["tail_above"]) == ("embedder", MODEL_TAIL_ABOVE)


def test_init_without_the_local_model_uses_hashing_and_warns_that_search_is_lexical(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    (tmp_path / "docs").mkdir()
    code, _, err = _init("docs", "--folder", str(tmp_path))
    assert code == 0, err
    assert _embedder(tmp_path)["kind"] == "hashing"
    assert "tail_above" not in load_config(tmp_path).chunker.params  # its search is full text
    assert err.count("\n") == 1, err
    assert err.startswith("warning:")
    assert "lexical" in err


def test_create_with_exist_ok_opens_the_knowledge_base_a_first_run_made(
        tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome words.\n")
    with KnowledgeBase.create(tmp_path, sources=["docs/"], embedder={"kind": "hashing"},
                              exist_ok=True) as kb:
        assert kb.sync().total("new") == 1
    written = (tmp_path / "kbsync.toml").read_bytes()
    with KnowledgeBase.create(tmp_path, sources=["docs/"], embedder={"kind": "hashing"},
                              exist_ok=True) as kb:
        assert kb.sync().total("unchanged") == 1
    assert (tmp_path / "kbsync.toml").read_bytes() == written
    with pytest.raises(ConfigError, match="already configured"):
        KnowledgeBase.create(tmp_path, sources=["docs/"])
    with pytest.raises(ConfigError, match="without the source notes"):
        KnowledgeBase.create(tmp_path, sources=["notes"], exist_ok=True)


def _tree(folder: Path) -> Path:
    """A folder of the sample corpus's Markdown files."""
    from tests.conftest import CORPUS

    folder.mkdir()
    for path in sorted(CORPUS.glob("*.md")):
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def _chunks_after_a_sync(root: Path) -> int:
    with KnowledgeBase.open(root) as kb:
        kb.sync()
        return kb.status().chunks


def test_the_hashing_embedder_chunks_one_tree_alike_however_it_was_chosen(
        tmp_path: Path) -> None:
    """`kbsync init --embedder hashing`, `KnowledgeBase.create` and a kbsync.toml written by
    hand that names the embedder, or no embedder at all, make the same chunks (they were
    4,207 against 3,286 on one tree: two chunkers)."""
    tree = _tree(tmp_path / "tree")
    ways = {name: tmp_path / name for name in ("init", "create", "by_hand", "no_embedder")}
    for folder in ways.values():
        folder.mkdir()
    code, out, err = _init(str(tree), "--folder", str(ways["init"]), "--embedder", "hashing")
    assert code == 0, err
    assert "embedder hashing (as --embedder asks)" in out
    assert "chunker sentences, 48-192 tokens: the default with the hashing embedder" in out
    KnowledgeBase.create(ways["create"], [str(tree)], embedder={"kind": "hashing"}).close()
    source = f'[[sources]]\nname = "tree"\nkind = "folder"\npath = "{tree}"\n'
    (ways["by_hand"] / "kbsync.toml").write_text('[embedder]\nkind = "hashing"\n\n' + source)
    (ways["no_embedder"] / "kbsync.toml").write_text(source)
    counts = {name: _chunks_after_a_sync(folder) for name, folder in ways.items()}
    assert len(set(counts.values())) == 1, counts
    chunkers = [load_config(folder).chunker for folder in ways.values()]
    assert all(chunker == chunkers[0] for chunker in chunkers), chunkers


def test_a_chunker_table_without_a_strategy_changes_the_default_it_names(
        tmp_path: Path) -> None:
    (tmp_path / "kbsync.toml").write_text("[chunker]\nmax_tokens = 256\n")
    chunker = load_config(tmp_path).chunker
    assert (chunker.strategy, chunker.params["min_tokens"], chunker.params["max_tokens"]) == (
        "sentences", 48, 256)
