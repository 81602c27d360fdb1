"""What a sync will cost before it runs: chunks and tokens to embed, time, money.

Pure: it reads the counts of a plan and the reports of earlier runs (as the run
log stores them) and the embedder's settings, and does no I/O. Time comes from
the rate measured over the last syncs with the same embedder (tokens embedded
over seconds spent embedding), else from a rough default for the embedder's kind;
money only from a configured price (``[embedder] price_per_million_tokens``).

How long the whole sync of a plan takes is a range (:func:`sync_time`): listing, reading
and planning as long as the plan itself just took, embedding and writing at the rates
each of the last syncs measured, from the fastest to the slowest of them.

What a sync asks before it embeds follows what embedding costs (:func:`bill_bound`):
money for a priced remote service (``[index] confirm_above_tokens``), time for a
local model (``[index] confirm_above_seconds`` at the measured rate), nothing for
the offline hashing embedder, which embeds a million tokens a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULT_CHUNKS_WRITTEN_PER_SECOND", "DEFAULT_CONFIRM_ABOVE_SECONDS",
           "DEFAULT_CONFIRM_ABOVE_TOKENS", "DEFAULT_MODEL_LOAD_SECONDS",
           "DEFAULT_TOKENS_PER_SECOND", "BillBasis", "BillBound", "EmbeddingCost", "SyncTime",
           "bill_bound", "estimate", "measured_rate", "model_load", "rate_of", "sync_time"]

BillBasis = Literal["free", "time", "money"]
"""What embedding costs with a kind of embedder: nothing, time (a local model), money
(a priced remote service)."""

DEFAULT_CONFIRM_ABOVE_TOKENS = 2_000_000
"""``[index] confirm_above_tokens`` when unset: a sync embedding more asks for ``--yes``."""

DEFAULT_TOKENS_PER_SECOND = {"hashing": 1_000_000.0, "local": 1_000.0, "openai": 20_000.0}
"""Rough rates per embedder kind, until a sync has measured one: the offline hashing
embedder, a small sentence-transformers model on a small CPU (all-MiniLM-L6-v2 embedded
about 1,160 tokens/s on two cores), one remote endpoint taking a batch at a time."""

DEFAULT_MODEL_LOAD_SECONDS = {"local": 20.0}
"""Seconds a sync spends loading its embedder's model before the first batch, per kind,
until a sync has measured it (``model_load_seconds`` of its report): importing torch and
reading all-MiniLM-L6-v2's weights took 20-33 s on two loaded cores. The kinds not named
load nothing worth counting."""

DEFAULT_CONFIRM_ABOVE_SECONDS = 3600
"""``[index] confirm_above_seconds`` when unset: a local model's sync estimated to embed
longer asks for ``--yes``."""

DEFAULT_CHUNKS_WRITTEN_PER_SECOND = 2_000.0
"""A rough rate of the apply stage (chunks added or deleted per second), until a sync has
measured one: SQLite wrote about 25,000 a second on two loaded cores (the sample corpus)."""

_MEASURED_RUNS = 5

# The spread a range keeps at least, while fewer than _STEADY syncs were measured: a
# rate measured once can be that of a machine busier or idler than now (a plan was 2.6
# times short after one first sync on a loaded machine); with defaults only, wider still.
_STEADY = 3
_FEW_RUNS = (0.8, 1.5)
_DEFAULTS = (0.5, 2.0)

# The stages a plan runs as its sync will: their time is measured by the plan itself.
_PLANNED_STAGES = ("list", "read", "plan")


@dataclass(frozen=True, slots=True)
class BillBound:
    """Above how many tokens a sync asks before embedding, and the setting that says so."""

    tokens: int
    setting: str
    """The setting and its value, as a person reads it (``[index] confirm_above_seconds =
    3,600, about 3,600,000 tokens at 1,000 tokens/s``)."""


def bill_bound(basis: BillBasis, *, confirm_above_tokens: int, confirm_above_seconds: int,
               tokens_per_second: float | None) -> BillBound | None:
    """When a sync with an embedder whose cost is ``basis`` asks first; None: never.

    ``free`` never asks (the hashing embedder's two million tokens take two seconds);
    ``time`` asks above ``confirm_above_seconds`` at ``tokens_per_second`` (measured or
    the default; without any, as ``money`` does); ``money`` above
    ``confirm_above_tokens``, what a service bills. A setting of 0 never asks.
    """
    if basis == "time" and tokens_per_second:
        if not confirm_above_seconds:
            return None
        tokens = max(1, int(confirm_above_seconds * tokens_per_second))
        return BillBound(tokens, f"[index] confirm_above_seconds = {confirm_above_seconds:,} "
                                 f"({tokens:,} tokens at {tokens_per_second:,.0f} tokens/s)")
    if basis != "free" and confirm_above_tokens:
        return BillBound(confirm_above_tokens,
                         f"[index] confirm_above_tokens = {confirm_above_tokens:,}")
    return None


@dataclass(frozen=True, slots=True)
class EmbeddingCost:
    """The embedding bill of a plan: what will be embedded, how long it takes, its price.

    ``basis`` says where ``tokens_per_second`` comes from; ``price`` is None without
    a configured ``price_per_million_tokens``.
    """

    chunks: int
    tokens: int
    tokens_per_second: float | None
    basis: str
    seconds: float | None
    price_per_million_tokens: float | None
    price: float | None
    bound: BillBound | None = None
    """Above what a sync asks first (None: it never asks, as with the hashing embedder)."""
    sync: SyncTime | None = None
    """How long the whole sync of the plan takes (:func:`sync_time`)."""

    @property
    def confirm_above_tokens(self) -> int | None:
        """The bound in tokens (None: a sync never asks)."""
        return None if self.bound is None else self.bound.tokens

    @property
    def needs_confirmation(self) -> bool:
        """Whether a sync of this plan will refuse to start without ``--yes``."""
        return self.bound is not None and self.tokens > self.bound.tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"chunks": self.chunks, "tokens": self.tokens,
                "tokens_per_second": self.tokens_per_second, "basis": self.basis,
                "seconds": self.seconds, "price_per_million_tokens": self.price_per_million_tokens,
                "price": self.price, "confirm_above_tokens": self.confirm_above_tokens,
                "bound": None if self.bound is None else self.bound.setting,
                "needs_confirmation": self.needs_confirmation,
                "sync": None if self.sync is None else self.sync.to_dict()}

    def summary(self) -> str:
        """One line for people."""
        line = f"to embed: {self.chunks:,} chunks, {self.tokens:,} tokens"
        if self.seconds is not None and self.tokens_per_second is not None and self.tokens:
            line += (f"; {_duration(self.seconds)} at {self.tokens_per_second:,.0f} "
                     f"tokens/s ({self.basis})")
        if self.price is not None and self.price_per_million_tokens is not None:
            line += f"; about {self.price:,.2f} at {self.price_per_million_tokens:g} per million"
        if self.needs_confirmation and self.bound is not None:
            line += f"; over {self.bound.setting}, so `kbsync sync` asks for --yes"
        return line


@dataclass(frozen=True, slots=True)
class SyncTime:
    """How long the sync of a plan takes: from ``low`` to ``high`` seconds, and ``basis``,
    what the range comes from."""

    low: float
    high: float
    basis: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"low": round(self.low, 3), "high": round(self.high, 3), "basis": self.basis}

    def summary(self) -> str:
        """One line for people: ``a sync of this plan: about 40-70 s (...)``."""
        return f"a sync of this plan: {_span(self.low, self.high)} ({self.basis})"


def sync_time(plan_seconds: Mapping[str, float], tokens: int, chunks: int, *, embedder: str,
              kind: str, reports: Iterable[Mapping[str, Any]],
              runs: int = _MEASURED_RUNS) -> SyncTime:
    """How long a sync of a plan takes that embeds ``tokens`` tokens and writes ``chunks``
    chunks (added or deleted) with ``embedder`` of kind ``kind``.

    The stages a plan runs too (listing, reading, planning) take what they took in the
    plan (``plan_seconds``, per stage), on the machine as loaded as it is now; embedding
    and writing, at the rates of each of the latest ``runs`` completed syncs with
    ``embedder`` (``reports``, newest first): the range goes from the fastest to the
    slowest, widened to at least -20%/+50% while fewer than three were measured, and to
    -50%/+100% around the default rates of the embedder's kind when none was.
    """
    reports = list(reports)
    planned = sum(float(plan_seconds.get(stage, 0.0)) for stage in _PLANNED_STAGES)
    load, load_basis = model_load(embedder, kind, reports) if tokens else (0.0, "")
    planned += load
    measured = [rates for report in reports if (rates := _rates(report, embedder)) is not None]
    measured = measured[:runs]
    default = DEFAULT_TOKENS_PER_SECOND.get(kind)
    if measured:  # a sync that embedded nothing, or wrote nothing, stands in with the default
        times = [planned + _cost(tokens, embed or default)
                 + _cost(chunks, write or DEFAULT_CHUNKS_WRITTEN_PER_SECOND)
                 for embed, write in measured]
        low, high = min(times), max(times)
        if len(measured) < _STEADY:
            low, high = min(low, planned + (low - planned) * _FEW_RUNS[0]), \
                max(high, planned + (high - planned) * _FEW_RUNS[1])
        basis = (f"reading as this plan did, {load_basis}embedding and writing at the rates "
                 f"of the last {len(measured)} sync{'s' if len(measured) > 1 else ''}")
        return SyncTime(low, high, basis)
    middle = _cost(tokens, default) + _cost(chunks, DEFAULT_CHUNKS_WRITTEN_PER_SECOND)
    return SyncTime(planned + middle * _DEFAULTS[0], planned + middle * _DEFAULTS[1],
                    f"reading as this plan did, {load_basis}embedding and writing at rough "
                    f"default rates for the {kind} embedder: no sync measured them yet")


def model_load(embedder: str, kind: str, reports: Iterable[Mapping[str, Any]],
               ) -> tuple[float, str]:
    """Seconds a sync with ``embedder`` spends loading its model, and the words that say so
    (empty for none): as the latest sync that loaded it measured (``reports`` newest first),
    else the default of its ``kind`` (:data:`DEFAULT_MODEL_LOAD_SECONDS`)."""
    for report in reports:
        seconds = report.get("model_load_seconds")
        if report.get("embedder") == embedder and seconds:
            return float(seconds), f"loading the model as the last sync did ({seconds:.0f} s), "
    seconds = DEFAULT_MODEL_LOAD_SECONDS.get(kind, 0.0)
    if not seconds:
        return 0.0, ""
    return seconds, f"loading the model in about {seconds:.0f} s (a default until measured), "


def _embed_seconds(report: Mapping[str, Any]) -> float:
    """The seconds a run spent embedding, its model's load left out (counted once a sync)."""
    seconds = report.get("seconds", {})
    return float(seconds.get("embed", 0.0)) - float(report.get("model_load_seconds") or 0.0)


def _rates(report: Mapping[str, Any], embedder: str) -> tuple[float | None, float | None] | None:
    """The embedding rate (tokens a second) and writing rate (chunks added or deleted a
    second) of a completed sync with ``embedder``; None for any other report, or one that
    measured neither."""
    if report.get("dry_run") or report.get("interrupted") or report.get("embedder") != embedder:
        return None
    seconds = report.get("seconds", {})
    sources = report.get("sources", ())
    tokens = sum(int(s.get("embedding_tokens", 0)) for s in sources)
    chunks = sum(int(s.get("chunks", {}).get(fate, 0)) for s in sources
                 for fate in ("added", "deleted"))
    embed = _embed_seconds(report)
    apply = float(seconds.get("apply", 0.0))
    rates = (tokens / embed if tokens and embed > 0 else None,
             chunks / apply if chunks and apply > 0 else None)
    return None if rates == (None, None) else rates


def _cost(work: int, rate: float | None) -> float:
    """The seconds ``work`` takes at ``rate`` (none measured: the work is counted as free)."""
    return work / rate if work and rate else 0.0


def measured_rate(reports: Iterable[Mapping[str, Any]], embedder: str,
                  runs: int = _MEASURED_RUNS) -> tuple[float, int] | None:
    """Tokens per second over the latest ``runs`` completed syncs that embedded with
    ``embedder`` (reports newest first), and how many there were; None without any."""
    tokens = 0
    seconds = 0.0
    used = 0
    for report in reports:
        if used == runs:
            break
        if report.get("dry_run") or report.get("interrupted") \
                or report.get("embedder") != embedder:
            continue
        spent = _embed_seconds(report)
        embedded = sum(int(s.get("embedding_tokens", 0)) for s in report.get("sources", ()))
        if spent > 0 and embedded > 0:
            tokens += embedded
            seconds += spent
            used += 1
    return (tokens / seconds, used) if used else None


def estimate(chunks: int, tokens: int, *, embedder: str, kind: str,
             reports: Iterable[Mapping[str, Any]], price_per_million_tokens: float | None = None,
             bound: BillBound | None = None, plan_seconds: Mapping[str, float] | None = None,
             written: int = 0) -> EmbeddingCost:
    """The bill of embedding ``chunks`` chunks of ``tokens`` tokens with ``embedder``;
    ``bound`` is when a sync asks first (:func:`bill_bound`). Given the seconds per stage
    of the plan, also how long its sync takes, writing ``written`` chunks
    (:func:`sync_time`)."""
    reports = list(reports)
    rate, basis = rate_of(embedder, kind, reports)
    return EmbeddingCost(
        chunks=chunks, tokens=tokens, tokens_per_second=rate, basis=basis,
        seconds=tokens / rate if rate else None,
        price_per_million_tokens=price_per_million_tokens,
        price=None if price_per_million_tokens is None
        else tokens / 1e6 * price_per_million_tokens,
        bound=bound,
        sync=None if plan_seconds is None else sync_time(
            plan_seconds, tokens, written, embedder=embedder, kind=kind, reports=reports))


def rate_of(embedder: str, kind: str,
            reports: Iterable[Mapping[str, Any]]) -> tuple[float | None, str]:
    """The embedding rate of ``embedder`` in tokens per second and where it comes from:
    the last syncs (:func:`measured_rate`), else the default of its ``kind``."""
    measured = measured_rate(reports, embedder)
    if measured is not None:
        return measured[0], (f"measured over the last {measured[1]} "
                             f"sync{'s' if measured[1] > 1 else ''}")
    rate = DEFAULT_TOKENS_PER_SECOND.get(kind)
    return rate, f"a rough default for the {kind} embedder" if rate else ""


def _span(low: float, high: float) -> str:
    """``about 40-70 s``: a range of seconds, in the unit of its high end."""
    if high < 1:
        return "under a second"
    for unit, size, limit in (("s", 1, 120), ("min", 60, 7200), ("h", 3600, float("inf"))):
        if high < limit:
            low_shown, high_shown = round(low / size), round(high / size)
            if low_shown == high_shown:
                return f"about {high_shown} {unit}"
            return f"about {low_shown}-{high_shown} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 120:
        return f"about {seconds:.0f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
