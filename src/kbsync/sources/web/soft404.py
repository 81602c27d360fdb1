"""Soft 404s: pages that answer 200 but say "not found".

Some sites answer every unknown address with 200 and an error page, so a
deleted page would live on in the knowledge base as that error page. Once
per origin and crawl, kbsync asks for an address that cannot exist; if the
answer is 200 (directly, not after a redirect: a redirect to the home page
would make the home page look like an error page), its text becomes the
fingerprint of "not found" there. A page whose text normalizes to the same
text, or whose set of words overlaps it with a Jaccard index of at least
:data:`SIMILARITY`, is treated like a 404 (the probe's own address often
appears in the error text, hence the overlap rather than equality).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbsync.core.normalize import normalize

__all__ = ["PROBE_PREFIX", "SIMILARITY", "Fingerprint", "fingerprint"]

PROBE_PREFIX = "/kbsync-soft-404-check-"
SIMILARITY = 0.9


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The normalized text of a page and its set of words."""

    text: str
    words: frozenset[str]

    def matches(self, other: Fingerprint) -> bool:
        """Whether the two pages say the same thing (equal text, or word sets nearly equal)."""
        if self.text == other.text:
            return True
        union = self.words | other.words
        if not union:
            return False
        return len(self.words & other.words) / len(union) >= SIMILARITY


def fingerprint(text: str) -> Fingerprint:
    """The fingerprint of a page's visible text."""
    normalized = normalize(text).text
    return Fingerprint(normalized, frozenset(normalized.casefold().split()))
