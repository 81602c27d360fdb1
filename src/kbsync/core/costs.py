"""What a sync will cost before it runs: chunks and tokens to embed, time, money.

Pure: it reads the counts of a plan and the reports of earlier runs (as the run
log stores them) and the embedder's settings, and does no I/O. Time comes from
the rate measured over the last syncs with the same embedder (tokens embedded
over seconds spent embedding), else from a rough default for the embedder's kind;
money only from a configured price (``[embedder] price_per_million_tokens``).

What a sync asks before it embeds follows what embedding costs (:func:`bill_bound`):
money for a priced remote service (``[index] confirm_above_tokens``), time for a
local model (``[index] confirm_above_seconds`` at the measured rate), nothing for
the offline hashing embedder, which embeds a million tokens a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULT_CONFIRM_ABOVE_SECONDS", "DEFAULT_CONFIRM_ABOVE_TOKENS",
           "DEFAULT_TOKENS_PER_SECOND", "BillBasis", "BillBound", "EmbeddingCost",
           "bill_bound", "estimate", "measured_rate", "rate_of"]

BillBasis = Literal["free", "time", "money"]
"""What embedding costs with a kind of embedder: nothing, time (a local model), money
(a priced remote service)."""

DEFAULT_CONFIRM_ABOVE_TOKENS = 2_000_000
"""``[index] confirm_above_tokens`` when unset: a sync embedding more asks for ``--yes``."""

DEFAULT_TOKENS_PER_SECOND = {"hashing": 1_000_000.0, "local": 1_000.0, "openai": 20_000.0}
"""Rough rates per embedder kind, until a sync has measured one: the offline hashing
embedder, a small sentence-transformers model on a small CPU (all-MiniLM-L6-v2 embedded
about 1,160 tokens/s on two cores), one remote endpoint taking a batch at a time."""

DEFAULT_CONFIRM_ABOVE_SECONDS = 3600
"""``[index] confirm_above_seconds`` when unset: a local model's sync estimated to embed
longer asks for ``--yes``."""

_MEASURED_RUNS = 5


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
                "needs_confirmation": self.needs_confirmation}

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
        spent = float(report.get("seconds", {}).get("embed", 0.0))
        embedded = sum(int(s.get("embedding_tokens", 0)) for s in report.get("sources", ()))
        if spent > 0 and embedded > 0:
            tokens += embedded
            seconds += spent
            used += 1
    return (tokens / seconds, used) if used else None


def estimate(chunks: int, tokens: int, *, embedder: str, kind: str,
             reports: Iterable[Mapping[str, Any]], price_per_million_tokens: float | None = None,
             bound: BillBound | None = None) -> EmbeddingCost:
    """The bill of embedding ``chunks`` chunks of ``tokens`` tokens with ``embedder``;
    ``bound`` is when a sync asks first (:func:`bill_bound`)."""
    rate, basis = rate_of(embedder, kind, reports)
    return EmbeddingCost(
        chunks=chunks, tokens=tokens, tokens_per_second=rate, basis=basis,
        seconds=tokens / rate if rate else None,
        price_per_million_tokens=price_per_million_tokens,
        price=None if price_per_million_tokens is None
        else tokens / 1e6 * price_per_million_tokens,
        bound=bound)


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


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 120:
        return f"about {seconds:.0f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
