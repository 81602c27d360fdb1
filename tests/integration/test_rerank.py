"""Reranking: a cross-encoder reads the best candidates with the query and orders them.

The real loader runs a tiny sequence classifier the test builds (random weights, the
default model's tokenizer) exported to ONNX, and must give the scores torch gives; the
search's second ranking is checked with the word-counting fake of ``kbsync.testing``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kbsync import KnowledgeBase
from kbsync.engine import load_config
from kbsync.errors import ConfigError, EmbeddingError
from kbsync.testing import WordReranker

PAGES = {
    "a.md": "# Harbour\n\nThe harbour master keeps the lantern lit all night long.\n",
    "b.md": "# Retries\n\nA request is tried again after a pause that doubles each time.\n",
    "c.md": "# Lantern\n\nThe lantern burns oil; the master trims the wick at night.\n",
    "d.md": "# Bread\n\nDough rises overnight in a cool kitchen before baking.\n",
}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    for name, text in PAGES.items():
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    with KnowledgeBase.create(tmp_path, ["docs"], embedder={"kind": "hashing"}) as opened:
        opened.sync()
    return tmp_path


def test_a_reranker_orders_the_candidates_by_its_scores_and_its_sigmoid_is_the_relevance(
        kb: Path) -> None:
    with KnowledgeBase.open(kb) as opened:
        plain = opened.search("lantern master night", k=4, mode="text", context_tokens=0)
        words = WordReranker()
        opened._reranker = words
        again = opened.search("lantern master night", k=2, mode="text", context_tokens=0,
                              rerank=True)
    assert words.calls == [("lantern master night", len(plain))]  # every candidate read
    scores = {h.key: sum(w in h.text.lower().split() for w in ("lantern", "master", "night"))
              for h in plain}
    assert [h.key for h in again] == sorted(scores, key=lambda key: -scores[key])[:2]
    assert [h.rank for h in again] == [1, 2]
    assert [h.score for h in again] == [float(scores[h.key]) for h in again]
    assert all(abs(h.relevance - 1 / (1 + np.exp(-h.score))) < 1e-9 for h in again)
    assert again[0].metadata == {}  # the document's facts still come with each hit


def test_reranking_without_a_model_is_a_configuration_error_naming_the_setting(
        kb: Path) -> None:
    config = (kb / "kbsync.toml").read_text()
    (kb / "kbsync.toml").write_text(config.replace("[search]\n", "[search]\nrerank = true\n"))
    with pytest.raises(ConfigError, match="rerank = true needs rerank_model"):
        load_config(kb)
    (kb / "kbsync.toml").write_text(config)
    with KnowledgeBase.open(kb) as opened, pytest.raises(ConfigError, match="rerank_model"):
        opened.search("lantern", rerank=True)


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer BERT sequence classifier with random weights and MiniLM's tokenizer."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("onnxruntime")
    from kbsync.embed.providers.local import LocalEmbedder

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = Path(LocalEmbedder().token_counter.removeprefix("tokenizer:")).parent
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(tokenizer / name, folder / name)
    torch.manual_seed(7)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=512, num_labels=1)
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def test_the_cross_encoder_on_onnx_scores_as_torch_does(tiny_cross_encoder: Path,
                                                        tmp_path: Path) -> None:
    import torch
    import transformers

    from kbsync.embed.providers.cross_encoder import CrossEncoderReranker

    query = "who keeps the lantern lit"
    passages = [text.split("\n\n", 1)[1] for text in PAGES.values()] + ["x " * 600]
    reranker = CrossEncoderReranker(str(tiny_cross_encoder), cache_dir=str(tmp_path))
    scores = reranker.score(query, passages)
    assert len(scores) == len(passages)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_cross_encoder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_cross_encoder)
    with torch.no_grad():
        batch = tokenizer([query] * len(passages), passages, padding=True,
                          truncation="only_second", max_length=512, return_tensors="pt")
        expected = model(**batch).logits[:, 0].numpy()
    assert np.abs(np.array(scores) - expected).max() <= 1e-5
    assert reranker.score(query, []) == []
    assert list(tmp_path.glob("*-cls-fp32-v1.*.onnx"))  # the export is cached
    assert reranker.identity.startswith(f"cross-encoder:{tiny_cross_encoder}@")


def test_a_knowledge_base_reranks_with_the_model_its_configuration_names(
        kb: Path, tiny_cross_encoder: Path) -> None:
    shutil.copytree(tiny_cross_encoder, kb / "reranker")
    config = (kb / "kbsync.toml").read_text()
    settings = 'rerank = true\nrerank_model = "reranker"\nrerank_candidates = 3\n'
    (kb / "kbsync.toml").write_text(config.replace("[search]\n", "[search]\n" + settings))
    with KnowledgeBase.open(kb) as opened:
        hits = opened.search("lantern master night", k=2, mode="text", context_tokens=0)
        plain = opened.search("lantern master night", k=2, mode="text", context_tokens=0,
                              rerank=False)
    assert len(hits) == 2
    assert all(0.0 < h.relevance < 1.0 for h in hits)
    assert [h.relevance for h in hits] == sorted((h.relevance for h in hits), reverse=True)
    assert [h.score for h in plain] != [h.score for h in hits]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer BERT encoder with no classifier head (as a sentence-embedding model's
    folder holds), with MiniLM's tokenizer."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from kbsync.embed.providers.local import LocalEmbedder

    folder = tmp_path_factory.mktemp("tiny-encoder")
    tokenizer = Path(LocalEmbedder().token_counter.removeprefix("tokenizer:")).parent
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(tokenizer / name, folder / name)
    torch.manual_seed(7)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=512)
    transformers.BertModel(config).eval().save_pretrained(folder)
    return folder


def test_a_rerank_model_without_a_classifier_head_is_refused_naming_the_setting_and_model(
        kb: Path, tiny_encoder: Path) -> None:
    shutil.copytree(tiny_encoder, kb / "encoder")
    config = (kb / "kbsync.toml").read_text()
    settings = 'rerank = true\nrerank_model = "encoder"\n'
    (kb / "kbsync.toml").write_text(config.replace("[search]\n", "[search]\n" + settings))
    with KnowledgeBase.open(kb) as opened, pytest.raises(EmbeddingError) as raised:
        opened.search("lantern master night", k=2, mode="text", context_tokens=0)
    message = str(raised.value)
    assert "[search] rerank_model" in message
    assert "encoder" in message
    assert "BertModel" in message
    assert "not a cross-encoder" in message
    assert "\n" not in message
    with KnowledgeBase.open(kb) as opened:  # searching without reranking still works
        assert opened.search("lantern", k=2, mode="text", rerank=False)


def test_a_classifier_whose_weights_lack_the_head_is_refused_before_it_scores(
        tiny_encoder: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from kbsync.embed.providers.cross_encoder import CrossEncoderReranker

    folder = tmp_path / "headless"
    shutil.copytree(tiny_encoder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["BertForSequenceClassification"]  # the head is claimed only
    (folder / "config.json").write_text(json.dumps(config))
    reranker = CrossEncoderReranker(str(folder), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(EmbeddingError, match=r"\[search\] rerank_model: .*lack the sequence "
                                             r"classifier's classifier\.bias, classifier\.weight"):
        reranker.score("lantern", ["The lantern burns oil."])
    assert not list((tmp_path / "cache").glob("*.onnx"))  # nothing cached to score with
