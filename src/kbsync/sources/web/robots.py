"""robots.txt: what a host lets kbsync fetch, how slowly, and which sitemaps it names.

Rules (RFC 9309, with the choices it leaves open made cautious):

- robots.txt is fetched once per origin (scheme, host, port) per crawl and
  reused by later crawls of the same source for at most a day
  (``max_age``); a failed fetch is never reused by a later crawl.
- 2xx: the file is parsed with Protego; only the first 512 KiB count.
- 4xx (404, 403, 410 ...): there are no rules, everything is allowed.
- 5xx, 429, a network failure or a refused address: the host is
  *unreachable* and nothing on it is fetched. Pages of the knowledge base on
  such a host are reported as errors, not as deleted: an outage of
  robots.txt must never empty the knowledge base.
- More redirects than allowed: treated as 4xx (RFC 9309 §2.3.1.2).
- A page the rules disallow is not fetched; a known page that robots.txt now
  disallows is left out of the listing, so the sync engine deletes it.
- ``Crawl-delay`` for kbsync's product token (or ``*``) raises the delay
  between requests to the host, up to :data:`MAX_CRAWL_DELAY` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from protego import Protego

__all__ = [
    "MAX_CRAWL_DELAY",
    "ROBOTS_MAX_BYTES",
    "RobotsCache",
    "RobotsPolicy",
    "RobotsState",
    "product_token",
]

ROBOTS_MAX_BYTES = 512 * 1024
MAX_CRAWL_DELAY = 60.0
"""A larger Crawl-delay is cut to this: honouring an hour per page would never finish a crawl."""


class RobotsState(StrEnum):
    """What kbsync learned about a host's robots.txt."""

    RULES = "rules"
    ALLOW_ALL = "allow-all"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True, slots=True, eq=False)
class RobotsPolicy:
    """The rules of one origin, or the absence of rules, or the fact that it could not be read."""

    state: RobotsState
    reason: str = ""
    rules: Protego | None = field(default=None, repr=False)

    @classmethod
    def from_response(cls, status: int, body: bytes) -> RobotsPolicy:
        """The policy an HTTP answer to ``GET /robots.txt`` implies."""
        if 200 <= status < 300:
            text = body.decode("utf-8", "replace").lstrip("\ufeff")
            return cls(RobotsState.RULES, f"HTTP {status}", Protego.parse(text))
        if status == 429 or status >= 500:
            return cls.unreachable(f"HTTP {status}")
        if 400 <= status < 500:
            return cls(RobotsState.ALLOW_ALL, f"HTTP {status}")
        # 1xx or a 3xx without a usable Location: no rules could be read.
        return cls.unreachable(f"HTTP {status}")

    @classmethod
    def unreachable(cls, reason: str) -> RobotsPolicy:
        """A robots.txt that could not be read: nothing on the host is fetched."""
        return cls(RobotsState.UNREACHABLE, reason)

    @classmethod
    def allow_all(cls, reason: str) -> RobotsPolicy:
        """No rules: everything is allowed."""
        return cls(RobotsState.ALLOW_ALL, reason)

    def allows(self, url: str, agent: str) -> bool:
        """Whether ``agent`` (a product token) may fetch ``url``."""
        if self.state is RobotsState.UNREACHABLE:
            return False
        if self.rules is None:
            return True
        return bool(self.rules.can_fetch(url, agent))

    def crawl_delay(self, agent: str) -> float | None:
        """The Crawl-delay for ``agent`` in seconds (at most MAX_CRAWL_DELAY), or None."""
        if self.rules is None:
            return None
        delay = self.rules.crawl_delay(agent)
        return None if delay is None else min(max(float(delay), 0.0), MAX_CRAWL_DELAY)

    @property
    def sitemaps(self) -> tuple[str, ...]:
        """The ``Sitemap:`` URLs the file names, as written."""
        return () if self.rules is None else tuple(self.rules.sitemaps)


class RobotsCache:
    """Policies by origin, kept at most ``max_age`` seconds; the clock is passed in."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._entries: dict[str, tuple[float, RobotsPolicy]] = {}

    def get(self, origin: str, now: float) -> RobotsPolicy | None:
        """The cached policy of ``origin`` if younger than ``max_age``, else None."""
        entry = self._entries.get(origin)
        if entry is None:
            return None
        fetched_at, policy = entry
        if now - fetched_at > self.max_age:
            del self._entries[origin]
            return None
        return policy

    def put(self, origin: str, policy: RobotsPolicy, now: float) -> None:
        """Remember ``policy`` (failures too, until :meth:`forget_failures` before a crawl)."""
        self._entries[origin] = (now, policy)

    def forget_failures(self) -> None:
        """Drop unreachable entries, so each crawl tries a failed robots.txt again."""
        self._entries = {
            o: e for o, e in self._entries.items() if e[1].state is not RobotsState.UNREACHABLE
        }


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent string (``kbsync`` of ``kbsync/0.1 (+...)``)."""
    token = user_agent.strip().split("/", 1)[0].split(" ", 1)[0]
    return token or user_agent
