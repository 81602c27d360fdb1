"""Transient failures tried again within one crawl: three attempts per URL, within a budget.

A timeout, a dropped or refused connection, a 5xx or a 429 (see
:data:`TRANSIENT_STATUSES`) often passes within
seconds (a restart, a deploy, a burst of load), so a page that fails so is asked
again up to two more times in the same crawl, as Scrapy does by default, rather
than waiting for the next crawl. Each retry waits: as ``Retry-After`` asks (for
a 429 or 503 that says so, up to ``retry_after_cap``; the whole host waits),
else :data:`BACKOFF` seconds, doubled for the next one (only that request
waits). A ``Retry-After`` beyond the cap is not waited for: the page fails at once.

A site that fails everywhere must not cost three times its requests: the crawl
has ``retry_budget`` retries in all (100 by default, a tenth of ``max_pages``'s
default); once they are spent, a failure is final at its first attempt. A page
that still fails keeps its stored version, as every transient failure does.
"""

from __future__ import annotations

__all__ = ["BACKOFF", "MAX_ATTEMPTS", "TRANSIENT_STATUSES", "Retries", "backoff",
           "is_transient_status"]

MAX_ATTEMPTS = 3
"""Requests of one URL in one crawl at most: the first and two retries."""

BACKOFF = 1.0
"""Seconds before the first retry of a failure that says nothing of when to come back."""


TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 522, 524})
"""Answers that may pass if asked again (Scrapy's list): a request timeout, too many
requests, a server error, a bad gateway, unavailable, a gateway timeout, and a CDN's
timeouts. Not 501 or 505: a server that does not implement a request never will."""


def is_transient_status(status: int) -> bool:
    """Whether an HTTP status may pass if asked again (:data:`TRANSIENT_STATUSES`)."""
    return status in TRANSIENT_STATUSES


def backoff(retry: int, cap: float) -> float:
    """Seconds before retry number ``retry`` (1, 2) without a Retry-After, at most ``cap``."""
    return min(BACKOFF * 2.0 ** (retry - 1), cap)


class Retries:
    """The retries of one crawl: how many each URL had, and how many the crawl has left."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._left = budget
        self._retried: dict[str, int] = {}

    def attempts(self, url: str) -> int:
        """The number of the attempt at ``url`` being made: 1, then 2 and 3 after retries."""
        return self._retried.get(url, 0) + 1

    def take(self, url: str) -> bool:
        """Count one retry of ``url`` if it may have one (fewer than :data:`MAX_ATTEMPTS`
        so far, and the budget not spent); whether it may."""
        retried = self._retried.get(url, 0)
        if retried + 1 >= MAX_ATTEMPTS or self._left <= 0:
            return False
        self._left -= 1
        self._retried[url] = retried + 1
        return True

    def why_not(self, url: str) -> str | None:
        """Why ``url``, which :meth:`take` refused, is not retried, when the count of its
        attempts does not say it (the budget is spent)."""
        if self.attempts(url) >= MAX_ATTEMPTS:
            return None
        return f"not retried: the crawl's retry_budget={self.budget} is spent"
