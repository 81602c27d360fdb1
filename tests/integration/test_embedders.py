"""The local model, chunk-fit checks, dimension changes and context windows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.embed import Vectors
from kbsync.engine import init_config
from kbsync.errors import ConfigError
from kbsync.extract.registry import extractor_for
from kbsync.sync import Chunker, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore
from tests.conftest import CORPUS

SMALL = '\nmin_tokens = 48\nmax_tokens = 192\nprimary_bits = 6\nbackup_bits = 4\n'


def _kb(tmp_path: Path, embedder: str, chunker: str = SMALL, files: str = "a-*") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob(files)):
        shutil.copy(path, docs / path.name)
    init_config(tmp_path, ["docs"])
    config = (tmp_path / "kbsync.toml").read_text()
    config = re.sub(r"\n(min_tokens|max_tokens|primary_bits|backup_bits) = \d+", "", config)
    config = config.replace('\ntoken_counter = "embedder"', "")
    config = re.sub(r'strategy = "\w+"', lambda _: 'strategy = "tttd"' + chunker, config)
    head, _, tail = config.partition("[embedder]")
    rest = tail.split("\n[", 1)
    config = head + "[embedder]\n" + embedder + ("\n[" + rest[1] if len(rest) > 1 else "")
    (tmp_path / "kbsync.toml").write_text(config)
    return tmp_path


def test_the_local_model_embeds_offline_and_retrieves_the_right_passage(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    kb = _kb(tmp_path, 'kind = "local"\n')
    with KnowledgeBase.open(kb) as engine:
        report = engine.sync()
        assert report.sources[0].embeddings_computed > 100
        assert report.sources[0].embeddings_truncated == 0
        assert engine.embedder.identity.startswith("local:all-MiniLM-L6-v2@")
        assert engine.embedder.dimension == 384
        first = engine.embedder.embed(["rotate the database password"])
        again = engine.embedder.embed(["rotate the database password"])
        assert np.array_equal(first, again)
        hits = engine.search("how is the delay between retries computed", k=3, mode="vector")
        assert any("retries-backoff" in h.key for h in hits)
        assert engine.verify().problems == ()


def test_commands_that_embed_nothing_never_load_the_local_model(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    kb = _kb(tmp_path, 'kind = "local"\n')
    # A fresh interpreter, so that torch is imported only if these commands import it.
    script = textwrap.dedent("""
        import sys
        from typer.testing import CliRunner
        from kbsync.cli import app
        for args in (["status"], ["plan"], ["search", "retry", "--mode", "text"],
                     ["verify"]):
            result = CliRunner().invoke(app, [*args, "-c", sys.argv[1]])
            assert result.exit_code in (0, 4), (args, result.output)
        print("torch" in sys.modules, "sentence_transformers" in sys.modules)
    """)
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        described = (engine.embedder.identity, engine.embedder.dimension,
                     engine.embedder.max_input_tokens)
    done = subprocess.run([sys.executable, "-c", script, str(kb)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["False", "False"], done.stderr
    with KnowledgeBase.open(kb) as engine:  # what the folder says is what the model is
        assert engine.embedder.embed(["a harbour light"]).shape == (1, 384)
        loaded = (engine.embedder.identity, engine.embedder.dimension,
                  engine.embedder.max_input_tokens)
    assert loaded == described


def test_the_local_embedder_gives_encode_s_vectors_in_the_order_given() -> None:
    pytest.importorskip("sentence_transformers")
    from kbsync.embed.providers.local import LocalEmbedder

    embedder = LocalEmbedder(batch_size=2)
    texts = ["a much longer text about harbour cranes, tides and the lanterns on the quay",
             "short", "retry with backoff", "", "the ledger of ropes and gulls " * 40]
    mine = embedder.embed(texts)
    theirs = embedder._loaded().encode(texts, normalize_embeddings=True)
    assert mine.shape == (5, 384)
    assert np.allclose(mine, theirs, atol=1e-5)


def test_chunks_longer_than_the_model_window_are_refused_unless_allowed(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    kb = _kb(tmp_path, 'kind = "local"\n', chunker="\nmax_tokens = 512\n")
    with pytest.raises(ConfigError, match="does not fit the embedder's input window"):
        KnowledgeBase.open(kb)
    config = (kb / "kbsync.toml").read_text().replace('kind = "local"',
                                                     'kind = "local"\nallow_truncation = true')
    (kb / "kbsync.toml").write_text(config)
    with KnowledgeBase.open(kb) as engine:
        assert engine.embedder.max_input_tokens == 256


def test_a_sync_that_truncates_chunks_says_so_in_its_warnings() -> None:
    text = " ".join(f"word{i}" for i in range(400))
    report = sync_sources([MemorySource({"long.txt": text.encode()})], MemoryStore(),
                          CountingEmbedder(window=40), extractor_for,
                          Chunker("tttd", {"min_tokens": 48, "max_tokens": 192}))
    source = report.sources[0]
    assert source.embeddings_truncated > 0
    assert any(w.startswith(f"{source.embeddings_truncated:,} chunk") and "truncated" in w
               for w in source.warnings)


class _Resized(CountingEmbedder):
    """The same model id, another dimension."""

    def __init__(self, dimension: int) -> None:
        super().__init__(dimension=dimension)

    @property
    def identity(self) -> str:
        return f"fake:model:{self.dimension}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        return super().embed(texts)


def test_a_dimension_change_under_the_same_model_id_is_refused() -> None:
    source = MemorySource({"a.txt": b"alpha words " * 100})
    store = MemoryStore()
    chunker = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
    sync_sources([source], store, _Resized(16), extractor_for, chunker)
    with pytest.raises(ConfigError, match="same model id"):
        sync_sources([source], store, _Resized(32), extractor_for, chunker)


def test_context_windows_grow_a_hit_within_its_section_and_merge_neighbours(
    tmp_path: Path,
) -> None:
    kb = _kb(tmp_path, 'kind = "hashing"\n')
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        plain = engine.search("retry backoff jitter", k=5, mode="text", context_tokens=0)
        windows = engine.search("retry backoff jitter", k=5, mode="text", context_tokens=512)
        assert windows
        for hit in windows:
            assert hit.text.split()[0] in hit.context
            assert hit.context_tokens <= 512
            assert hit.first <= hit.index <= hit.last
        assert sum(h.context_tokens for h in windows) > sum(h.context_tokens for h in plain)
        spans = [(h.key, h.first, h.last) for h in windows]
        for key, first, last in spans:
            others = [s for s in spans if s[0] == key and s != (key, first, last)]
            assert all(last < lo or hi < first for _, lo, hi in others)  # windows never overlap


def test_the_tokenizer_counter_counts_exactly_what_the_model_reads() -> None:
    pytest.importorskip("sentence_transformers")
    from tokenizers import Tokenizer

    from kbsync.core.chunking import TextChunker
    from kbsync.embed.providers.local import LocalEmbedder
    from kbsync.embed.tokenizer import TokenizerCounter

    spec = LocalEmbedder().token_counter
    assert spec is not None
    assert spec.startswith("tokenizer:")
    counter = TokenizerCounter(spec.removeprefix("tokenizer:"))
    model = Tokenizer.from_file(spec.removeprefix("tokenizer:"))
    model.no_truncation()
    model.no_padding()
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*")))
    chunks = TextChunker("sentences", counter=counter).chunk(text).chunks
    assert len(chunks) > 200
    for c in chunks:
        assert c.token_count + counter.special_tokens == len(model.encode(c.text).ids), c.text


def test_chunks_counted_in_the_embedder_s_tokens_fit_its_window_exactly(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    chunker = '\ntoken_counter = "embedder"\n'
    kb = _kb(tmp_path, 'kind = "local"\n', chunker=chunker + "max_tokens = 255\n")
    with pytest.raises(ConfigError, match=r"\(256 model tokens, the model's\).* to 254 or less"):
        KnowledgeBase.open(kb)
    config = (kb / "kbsync.toml").read_text().replace("max_tokens = 255", "max_tokens = 254")
    (kb / "kbsync.toml").write_text(config)
    with KnowledgeBase.open(kb) as engine:
        text_chunker = engine.config.chunker.text_chunker()
        assert text_chunker.counter.identity.startswith("tokenizer-")
        assert 'token_counter = "embedder"' in (kb / "kbsync.toml").read_text()
        assert "sentence_transformers" not in sys.modules or engine.embedder._model is None


def test_the_embedder_counter_of_an_embedder_without_a_tokenizer_is_the_estimate(
    tmp_path: Path,
) -> None:
    kb = _kb(tmp_path, 'kind = "hashing"\ndimension = 64\n',
             chunker='\ntoken_counter = "embedder"\n')
    with KnowledgeBase.open(kb) as engine:
        assert engine.config.chunker.text_chunker().counter.identity == "estimate-v1"
    with pytest.raises(ConfigError, match='token_counter = "embedder" needs the embedder'):
        Chunker("tttd", {"token_counter": "embedder"}).text_chunker()
