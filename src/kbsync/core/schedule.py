"""Adaptive revisit scheduling of web pages: when each page is next due, from its history.

Pure: the time is always passed in, nothing here reads a clock. After a check
that found a change the interval shrinks (``shrink``), after one that found
none it grows (``grow``), always within ``[min_interval, max_interval]``, so a
page that changes hourly is soon checked about hourly and one that never
changes settles at ``max_interval``: that bound is also the longest a change
can stay unseen. A sitemap ``<lastmod>`` newer than the last check makes a page
due at once. A sync without ``--due`` checks every page whatever its schedule
(the periodic full revalidation stays the safety net).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbsync.errors import ParameterError
from kbsync.model import PageSchedule

__all__ = [
    "DEFAULT_MAX_INTERVAL",
    "DEFAULT_MIN_INTERVAL",
    "Cadence",
    "after_check",
    "due_at",
    "is_due",
]

DEFAULT_MIN_INTERVAL = 3_600.0
"""One hour: a page is not checked more often than this unless a sitemap says it changed."""
DEFAULT_MAX_INTERVAL = 7 * 86_400.0
"""Seven days: no page goes longer than this unchecked."""


@dataclass(frozen=True, slots=True)
class Cadence:
    """The bounds and factors of the schedule (a web source's ``min_interval``/``max_interval``).

    A new page starts at ``initial`` (None: ``min_interval``): it is checked again
    soon, and backs off from there as long as it does not change. A page that
    changes often is then never left stale while the schedule learns it; one
    that never changes reaches ``max_interval`` in a dozen checks.
    """

    min_interval: float = DEFAULT_MIN_INTERVAL
    max_interval: float = DEFAULT_MAX_INTERVAL
    shrink: float = 0.5
    grow: float = 1.5
    initial: float | None = None

    def __post_init__(self) -> None:
        if not self.min_interval > 0:
            raise ParameterError(f"min_interval must be positive, got {self.min_interval!r}")
        if not self.max_interval >= self.min_interval:
            raise ParameterError(
                f"max_interval ({self.max_interval!r}) must not be below min_interval "
                f"({self.min_interval!r})")
        if not 0 < self.shrink <= 1:
            raise ParameterError(f"shrink must be in (0, 1], got {self.shrink!r}")
        if not self.grow >= 1:
            raise ParameterError(f"grow must be at least 1, got {self.grow!r}")

    @property
    def start(self) -> float:
        """The interval of a page seen for the first time."""
        return self.min_interval if self.initial is None else self.bounded(self.initial)

    def bounded(self, interval: float) -> float:
        """``interval`` within the bounds."""
        return min(self.max_interval, max(self.min_interval, interval))


def due_at(schedule: PageSchedule, cadence: Cadence) -> float:
    """When the page is next due: its last check plus its interval (kept within the bounds,
    so narrowing ``max_interval`` takes effect at once)."""
    return schedule.checked + cadence.bounded(schedule.interval)


def is_due(schedule: PageSchedule | None, now: float, cadence: Cadence,
           lastmod: float | None = None) -> bool:
    """Whether a page is to be checked at ``now``.

    A page without a schedule is always due; so is one whose sitemap ``lastmod``
    is after its last check, and one whose last check lies in the future (a
    clock that went back must not hide a page for long).
    """
    if schedule is None or schedule.checked > now:
        return True
    if lastmod is not None and lastmod > schedule.checked:
        return True
    return now >= due_at(schedule, cadence)


def after_check(schedule: PageSchedule | None, now: float, changed: bool, cadence: Cadence,
                *, digest: str | None = None, media_type: str | None = None) -> PageSchedule:
    """The schedule after a check at ``now`` that found the page ``changed`` or not.

    A first check starts at :attr:`Cadence.start`; it counts as a change (the
    page was not known before).
    """
    if schedule is None:
        return PageSchedule(now, now, cadence.start, digest or "", media_type or "")
    factor = cadence.shrink if changed else cadence.grow
    return PageSchedule(
        checked=now,
        changed=now if changed else schedule.changed,
        interval=cadence.bounded(schedule.interval * factor),
        digest=schedule.digest if digest is None else digest,
        media_type=schedule.media_type if media_type is None else media_type,
    )
