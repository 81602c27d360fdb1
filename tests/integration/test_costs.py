"""`kbsync plan` says what a sync will cost, and a sync over the bound asks first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app
from kbsync.core.costs import (
    DEFAULT_TOKENS_PER_SECOND,
    BillBasis,
    BillBound,
    bill_bound,
    estimate,
    measured_rate,
)
from kbsync.embed import Embedder
from kbsync.embed.hashing import HashingEmbedder
from kbsync.embed.kinds import EMBEDDER_KINDS, HashingSettings
from kbsync.engine import DEFAULT_CHUNKER
from kbsync.errors import ConfirmationRequiredError
from kbsync.extract.registry import extractor_for
from kbsync.sources.files import FilesystemSource
from kbsync.sync import SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder, MemoryStore
from tests.conftest import CORPUS

runner = CliRunner()


class _Billed:
    """An embedder kind that costs what ``bill`` says (the hashing embedder underneath),
    standing for a priced service or a local model, which need a network or a model."""

    settings_type = HashingSettings

    def __init__(self, name: str, bill: BillBasis) -> None:
        self.name = name
        self.bill = bill

    def build(self, settings: HashingSettings) -> Embedder:
        return HashingEmbedder(settings.dimension)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A knowledge base of five documents whose embedder is priced like a remote service."""
    monkeypatch.setitem(EMBEDDER_KINDS, "priced", _Billed("priced", "money"))
    return _home(tmp_path, "priced")


@pytest.fixture
def hashing_home(tmp_path: Path) -> Path:
    return _home(tmp_path, "hashing")


def _home(tmp_path: Path, kind: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:5]:
        shutil.copy(path, docs / path.name)
    KnowledgeBase.create(tmp_path, sources=["docs"], embedder={"kind": kind}).close()
    return tmp_path


def _bound(home: Path, tokens: int) -> None:
    with (home / "kbsync.toml").open("a", encoding="utf-8") as f:
        f.write(f"\n[index]\nconfirm_above_tokens = {tokens}\n")


def test_a_plan_counts_the_chunks_it_would_embed(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        planned = kb.plan()
        source = planned.sources[0]
        assert source.embeddings_computed == 0  # a plan computes nothing
        assert source.embeddings_to_compute == source.chunks["added"] > 0
        cost = kb.estimate(planned)
        assert (cost.chunks, cost.tokens) == (source.embeddings_to_compute,
                                              source.embedding_tokens)
        done = kb.sync()
        assert done.sources[0].embeddings_computed == source.embeddings_to_compute
        assert kb.plan().sources[0].embeddings_to_compute == 0


def test_a_plan_counts_the_cached_chunks_it_would_reuse_as_the_sync_does(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
        first = sorted((home / "docs").iterdir())[0]
        shutil.copy(first, home / "docs" / "copy.md")  # every chunk of it is cached
        planned = kb.plan().sources[0]
        done = kb.sync().sources[0]
        assert planned.embeddings_reused == done.embeddings_reused > 0
        assert planned.embeddings_to_compute == done.embeddings_computed == 0


def test_plan_prints_the_chunks_and_tokens_to_embed_and_an_estimate(home: Path) -> None:
    result = runner.invoke(app, ["plan", "-c", str(home)])
    assert result.exit_code == 0, result.output
    with KnowledgeBase.open(home) as kb:
        source = kb.plan().sources[0]
    assert "to embed" in result.output
    assert (f"to embed: {source.embeddings_to_compute:,} chunks, "
            f"{source.embedding_tokens:,} tokens") in result.output
    assert "a sync of this plan: " in result.output  # a range of the whole sync's time


def test_the_hashing_embedder_never_asks_however_much_it_embeds(hashing_home: Path) -> None:
    _bound(hashing_home, 1)
    planned = runner.invoke(app, ["plan", "-c", str(hashing_home)])
    assert "rough default for the hashing embedder" in planned.output
    assert "--yes" not in planned.output
    with KnowledgeBase.open(hashing_home) as kb:
        assert kb.bill_bound() is None
        cost = kb.estimate(kb.plan())
        assert cost.tokens > 1
        assert not cost.needs_confirmation
        assert kb.sync().total("new") == 5


def test_a_local_model_asks_above_the_time_its_embedding_is_estimated_to_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EMBEDDER_KINDS, "local", _Billed("local", "time"))
    home = _home(tmp_path, "local")
    with (home / "kbsync.toml").open("a", encoding="utf-8") as f:
        f.write("\n[index]\nconfirm_above_seconds = 1\nconfirm_above_tokens = 0\n")
    with KnowledgeBase.open(home) as kb:
        bound = kb.bill_bound()
        # At the local default of 1,000 tokens a second, one second is 1,000 tokens.
        assert bound == BillBound(1000, "[index] confirm_above_seconds = 1 "
                                        "(1,000 tokens at 1,000 tokens/s)")
        with pytest.raises(ConfirmationRequiredError, match="confirm_above_seconds = 1 "):
            kb.sync()
        assert kb.sync(yes=True).total("new") == 5


def test_what_a_sync_asks_before_it_embeds_follows_what_embedding_costs() -> None:
    def bound(basis: BillBasis, rate: float | None = 500.0) -> BillBound | None:
        return bill_bound(basis, confirm_above_tokens=2000, confirm_above_seconds=60,
                          tokens_per_second=rate)

    assert bound("free") is None
    assert bound("money") == BillBound(2000, "[index] confirm_above_tokens = 2,000")
    timed = bound("time")
    assert timed is not None
    assert timed.tokens == 30_000
    assert bound("time", rate=None) == bound("money")  # no rate known: the tokens' bound
    assert bill_bound("money", confirm_above_tokens=0, confirm_above_seconds=60,
                      tokens_per_second=1.0) is None


def test_a_sync_over_the_bound_refuses_before_embedding_anything(home: Path) -> None:
    _bound(home, 100)
    with KnowledgeBase.open(home) as kb:
        with pytest.raises(ConfirmationRequiredError, match="confirm_above_tokens = 100"):
            kb.sync()
        status = kb.status()
        assert (status.documents, status.embeddings) == (0, 0)
        assert status.last_run is not None
        assert status.last_run.interrupted
        assert kb.sync(yes=True).total("new") == 5


def test_the_command_line_refusal_is_one_line_and_exit_code_1(home: Path) -> None:
    _bound(home, 100)
    refused = runner.invoke(app, ["sync", "-c", str(home)])
    assert refused.exit_code == 1
    assert "\n" not in refused.output.strip()
    assert "--yes" in refused.output
    interrupted = runner.invoke(app, ["status", "-c", str(home)])
    assert "last sync:  interrupted at " in interrupted.output
    assert "0 documents applied" in interrupted.output
    assert runner.invoke(app, ["sync", "-c", str(home), "--yes"]).exit_code == 0
    status = runner.invoke(app, ["status", "-c", str(home)])
    assert "5 new" in status.output


def test_chunks_already_cached_are_not_billed(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
    shutil.copy(home / "docs" / sorted(p.name for p in (home / "docs").iterdir())[0],
                home / "docs" / "copy.md")
    _bound(home, 1)  # the copy's chunks are all cached: nothing to embed, nothing to ask
    with KnowledgeBase.open(home) as kb:
        assert kb.sync().total("new") == 1


def test_the_rate_is_measured_from_the_last_syncs_with_the_same_embedder() -> None:
    reports = [
        {"embedder": "e", "seconds": {"embed": 2.0}, "sources": [{"embedding_tokens": 1000}]},
        {"embedder": "other", "seconds": {"embed": 1.0}, "sources": [{"embedding_tokens": 9}]},
        {"embedder": "e", "interrupted": True, "seconds": {"embed": 5.0},
         "sources": [{"embedding_tokens": 1}]},
        {"embedder": "e", "seconds": {"embed": 2.0}, "sources": [{"embedding_tokens": 3000}]},
    ]
    assert measured_rate(reports, "e") == (1000.0, 2)
    cost = estimate(10, 5000, embedder="e", kind="openai", reports=reports,
                    price_per_million_tokens=0.02,
                    bound=BillBound(4000, "[index] confirm_above_tokens = 4,000"))
    assert (cost.seconds, cost.basis) == (5.0, "measured over the last 2 syncs")
    assert cost.price == pytest.approx(0.0001)
    assert cost.needs_confirmation
    fresh = estimate(10, 40_000, embedder="e", kind="openai", reports=[])
    assert fresh.seconds == 40_000 / DEFAULT_TOKENS_PER_SECOND["openai"]
    assert fresh.price is None
    assert not fresh.needs_confirmation


def test_a_configured_price_is_in_the_plan_and_the_embedder_ignores_it(home: Path) -> None:
    config = home / "kbsync.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('kind = "priced"',
                                   'kind = "priced"\nprice_per_million_tokens = 0.5'),
                      encoding="utf-8")
    result = runner.invoke(app, ["plan", "-c", str(home), "--json"])
    assert result.exit_code == 0, result.output
    cost = json.loads(result.output)["cost"]
    assert cost["price"] == pytest.approx(cost["tokens"] / 1e6 * 0.5)
    assert cost["confirm_above_tokens"] == 2_000_000
    assert "at 0.5 per million" in runner.invoke(app, ["plan", "-c", str(home)]).output


def test_a_negative_bound_is_a_configuration_error(home: Path) -> None:
    _bound(home, -1)
    result = runner.invoke(app, ["plan", "-c", str(home)])
    assert result.exit_code == 1
    assert "[index] confirm_above_tokens: expected an integer >= 0, got -1" in result.output


class _Renamed(CountingEmbedder):
    @property
    def identity(self) -> str:
        return "another-model:64"


def test_a_new_embedder_that_would_re_embed_everything_asks_first(tmp_path: Path) -> None:
    store = MemoryStore()
    docs = [FilesystemSource(CORPUS, name="docs")]
    sync_sources(docs, store, CountingEmbedder(), extractor_for, DEFAULT_CHUNKER,
                 options=SyncOptions(scratch_dir=tmp_path))
    renamed = _Renamed()
    with pytest.raises(ConfirmationRequiredError, match="this sync would embed"):
        sync_sources(docs, store, renamed, extractor_for, DEFAULT_CHUNKER,
                     options=SyncOptions(scratch_dir=tmp_path, confirm_above_tokens=1000))
    assert renamed.texts == 0
    done = sync_sources(docs, store, renamed, extractor_for, DEFAULT_CHUNKER,
                        options=SyncOptions(scratch_dir=tmp_path))
    assert done.sources[0].embeddings_backfill == renamed.texts > 0


def test_a_chunker_change_bills_only_the_texts_it_has_no_vector_for(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        kb.sync()
    config = home / "kbsync.toml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "max_tokens = 192", "max_tokens = 200"), encoding="utf-8")
    with KnowledgeBase.open(home) as kb:
        planned = kb.plan().sources[0]
    # New identities for every chunk, most of them with a text that has a vector.
    assert planned.chunks["added"] > 2 * planned.embeddings_to_compute
    _bound(home, planned.embedding_tokens)
    with KnowledgeBase.open(home) as kb:
        done = kb.sync().sources[0]
    assert done.embeddings_computed == planned.embeddings_to_compute


def test_workers_refuse_a_sync_over_the_bound_before_embedding_anything(
        home: Path, postgres_url: str) -> None:
    from tests.conftest import Backend

    backend = Backend("postgres", postgres_url)
    backend.configure(home)
    _bound(home, 100)
    try:
        with KnowledgeBase.open(home) as kb:
            with pytest.raises(ConfirmationRequiredError, match="confirm_above_tokens = 100"):
                kb.sync(workers=1)
            status = kb.status()
            assert (status.documents, status.embeddings) == (0, 0)
            assert status.last_run is not None
            assert status.last_run.interrupted
            assert kb.sync(workers=1, yes=True).total("new") == 5
    finally:
        backend.drop()
