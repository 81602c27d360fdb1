"""What a sync will cost before it runs: chunks and tokens to embed, time, money.

Pure: it reads the counts of a plan and the reports of earlier runs (as the run
log stores them) and the embedder's settings, and does no I/O. Time comes from
the rate measured over the last syncs with the same embedder (tokens embedded
over seconds spent embedding), else from a rough default for the embedder's kind;
money only from a configured price (``[embedder] price_per_million_tokens``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_CONFIRM_ABOVE_TOKENS", "DEFAULT_TOKENS_PER_SECOND", "EmbeddingCost",
           "estimate", "measured_rate"]

DEFAULT_CONFIRM_ABOVE_TOKENS = 2_000_000
"""``[index] confirm_above_tokens`` when unset: a sync embedding more asks for ``--yes``."""

DEFAULT_TOKENS_PER_SECOND = {"hashing": 1_000_000.0, "local": 1_000.0, "openai": 20_000.0}
"""Rough rates per embedder kind, until a sync has measured one: the offline hashing
embedder, a small sentence-transformers model on a small CPU (all-MiniLM-L6-v2 embedded
about 1,160 tokens/s on two cores), one remote endpoint taking a batch at a time."""

_MEASURED_RUNS = 5


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
    confirm_above_tokens: int | None

    @property
    def needs_confirmation(self) -> bool:
        """Whether a sync of this plan will refuse to start without ``--yes``."""
        return self.confirm_above_tokens is not None and self.tokens > self.confirm_above_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"chunks": self.chunks, "tokens": self.tokens,
                "tokens_per_second": self.tokens_per_second, "basis": self.basis,
                "seconds": self.seconds, "price_per_million_tokens": self.price_per_million_tokens,
                "price": self.price, "confirm_above_tokens": self.confirm_above_tokens,
                "needs_confirmation": self.needs_confirmation}

    def summary(self) -> str:
        """One line for people."""
        line = f"to embed: {self.chunks:,} chunks, {self.tokens:,} tokens"
        if self.seconds is not None and self.tokens_per_second is not None and self.tokens:
            line += (f"; {_duration(self.seconds)} at {self.tokens_per_second:,.0f} "
                     f"tokens/s ({self.basis})")
        if self.price is not None and self.price_per_million_tokens is not None:
            line += f"; about {self.price:,.2f} at {self.price_per_million_tokens:g} per million"
        if self.needs_confirmation:
            line += (f"; over [index] confirm_above_tokens = {self.confirm_above_tokens:,}, "
                     "so `kbsync sync` asks for --yes")
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
             confirm_above_tokens: int | None = DEFAULT_CONFIRM_ABOVE_TOKENS) -> EmbeddingCost:
    """The bill of embedding ``chunks`` chunks of ``tokens`` tokens with ``embedder``."""
    measured = measured_rate(reports, embedder)
    if measured is not None:
        rate: float | None = measured[0]
        basis = f"measured over the last {measured[1]} sync{'s' if measured[1] > 1 else ''}"
    else:
        rate = DEFAULT_TOKENS_PER_SECOND.get(kind)
        basis = f"a rough default for the {kind} embedder" if rate else ""
    return EmbeddingCost(
        chunks=chunks, tokens=tokens, tokens_per_second=rate, basis=basis,
        seconds=tokens / rate if rate else None,
        price_per_million_tokens=price_per_million_tokens,
        price=None if price_per_million_tokens is None
        else tokens / 1e6 * price_per_million_tokens,
        confirm_above_tokens=confirm_above_tokens)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 120:
        return f"about {seconds:.0f} s"
    if seconds < 7200:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
