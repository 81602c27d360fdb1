"""How long the sync of a plan takes: reading as the plan itself took, embedding and writing
at the rates the last syncs measured, as a range from the fastest to the slowest."""

from __future__ import annotations

from typing import Any

import pytest

from kbsync.core.costs import (
    DEFAULT_CHUNKS_WRITTEN_PER_SECOND,
    DEFAULT_MODEL_LOAD_SECONDS,
    DEFAULT_TOKENS_PER_SECOND,
    estimate,
    sync_time,
)

PLAN = {"list": 1.0, "read": 8.0, "plan": 1.0, "embed": 0.0}  # 10 s the sync does again


def _run(embed_seconds: float, apply_seconds: float, *, embedder: str = "m",
         **extra: Any) -> dict[str, Any]:
    """A run's report as the store keeps it: 1,000 tokens embedded, 100 chunks written."""
    return {"embedder": embedder, "seconds": {"embed": embed_seconds, "apply": apply_seconds},
            "sources": [{"embedding_tokens": 1000, "chunks": {"added": 80, "deleted": 20}}],
            **extra}


def test_the_range_spans_the_rates_of_the_last_syncs() -> None:
    # 1,000 tokens/s and 100 chunks/s, then twice as slow, then in between.
    reports = [_run(1.0, 1.0), _run(2.0, 2.0), _run(1.5, 1.0)]
    found = sync_time(PLAN, 20_000, 1_000, embedder="m", kind="openai", reports=reports)
    assert (found.low, found.high) == (10 + 20 + 10, 10 + 40 + 20)
    assert found.summary() == ("a sync of this plan: about 40-70 s (reading as this plan did, "
                               "embedding and writing at the rates of the last 3 syncs)")


def test_one_measured_sync_gives_a_range_not_a_point() -> None:
    """A rate measured once may be that of a busier or idler machine: the estimate after a
    first sync was 2.6 times short of the second."""
    found = sync_time(PLAN, 20_000, 1_000, embedder="m", kind="openai", reports=[_run(1, 1)])
    assert found.low == pytest.approx(10 + 30 * 0.8)
    assert found.high == pytest.approx(10 + 30 * 1.5)
    assert "the last 1 sync)" in found.summary()


def test_plans_interrupted_runs_and_other_embedders_are_not_measured() -> None:
    reports = [_run(9, 9, dry_run=True), _run(9, 9, interrupted=True),
               _run(9, 9, embedder="other"), _run(1.0, 1.0), _run(1.0, 1.0), _run(1.0, 1.0)]
    found = sync_time(PLAN, 20_000, 1_000, embedder="m", kind="openai", reports=reports)
    assert (found.low, found.high) == (40.0, 40.0)


def test_without_a_measured_sync_the_defaults_of_the_kind_give_a_wide_range() -> None:
    found = sync_time(PLAN, 20_000, 1_000, embedder="m", kind="openai", reports=[])
    middle = (20_000 / DEFAULT_TOKENS_PER_SECOND["openai"]
              + 1_000 / DEFAULT_CHUNKS_WRITTEN_PER_SECOND)
    assert (found.low, found.high) == (10 + middle / 2, 10 + middle * 2)
    assert "no sync measured them yet" in found.basis


def test_the_estimate_of_a_plan_carries_its_sync_time() -> None:
    cost = estimate(10, 20_000, embedder="m", kind="openai", reports=[_run(1, 1)] * 3,
                    plan_seconds=PLAN, written=1_000)
    assert cost.sync is not None
    assert cost.to_dict()["sync"] == {"low": 40.0, "high": 40.0, "basis": cost.sync.basis}
    assert estimate(10, 20_000, embedder="m", kind="local", reports=[]).sync is None


def test_a_local_model_s_first_sync_counts_the_model_s_load() -> None:
    """A first sync with a local model took 35.6 s where its plan said 2-3 s: importing torch
    and loading the weights come before the first batch, whatever the batch's size."""
    found = sync_time(PLAN, 2_000, 100, embedder="m", kind="local", reports=[])
    load = DEFAULT_MODEL_LOAD_SECONDS["local"]
    assert found.low >= 10 + load
    assert "loading the model in about 20 s (a default until measured)" in found.basis


def test_the_load_a_sync_measured_is_counted_once_and_not_in_its_rate() -> None:
    # 31 s in the embed stage, 30 of them loading: 1,000 tokens at 1,000 tokens/s.
    reports = [_run(31.0, 1.0, model_load_seconds=30.0)] * 3
    found = sync_time(PLAN, 20_000, 1_000, embedder="m", kind="local", reports=reports)
    assert (found.low, found.high) == (10 + 30 + 20 + 10, 10 + 30 + 20 + 10)
    assert "loading the model as the last sync did (30 s)" in found.basis
    cost = estimate(10, 20_000, embedder="m", kind="local", reports=reports)
    assert cost.tokens_per_second == 1_000


def test_a_plan_that_embeds_nothing_loads_no_model() -> None:
    found = sync_time(PLAN, 0, 100, embedder="m", kind="local", reports=[])
    assert found.high < 10 + DEFAULT_MODEL_LOAD_SECONDS["local"]
    assert "loading" not in found.basis
