"""The revisit schedule: bounds, monotonicity, due-ness and sitemap hints (a pure function)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbsync.core.schedule import Cadence, after_check, due_at, is_due
from kbsync.errors import ParameterError
from kbsync.model import PageSchedule
from kbsync.sources.web.sitemaps import lastmod_seconds

HOUR = 3_600.0
DAY = 86_400.0

# Any bounds (max a factor of min) and factors the schedule accepts.
cadences = st.tuples(
    st.floats(1.0, 10 * DAY), st.floats(1.0, 1000.0), st.floats(0.05, 1.0), st.floats(1.0, 4.0)
).map(lambda t: Cadence(t[0], t[0] * t[1], t[2], t[3]))

schedules = st.builds(
    PageSchedule,
    checked=st.floats(0.0, 1e9),
    changed=st.floats(0.0, 1e9),
    interval=st.floats(0.001, 1e8),
    digest=st.text(max_size=4),
    media_type=st.sampled_from(["", "text/html"]),
)


@given(cadences, st.one_of(st.none(), schedules), st.booleans(), st.floats(0.0, 2e9))
def test_the_interval_after_any_check_stays_within_the_bounds(
    cadence: Cadence, schedule: PageSchedule | None, changed: bool, now: float
) -> None:
    after = after_check(schedule, now, changed, cadence)
    assert cadence.min_interval <= after.interval <= cadence.max_interval
    assert after.checked == now


@given(cadences, schedules, st.floats(0.0, 2e9))
def test_a_change_never_lengthens_the_interval_and_no_change_never_shortens_it(
    cadence: Cadence, schedule: PageSchedule, now: float
) -> None:
    current = cadence.bounded(schedule.interval)
    assert after_check(schedule, now, True, cadence).interval <= current
    assert after_check(schedule, now, False, cadence).interval >= current
    assert (after_check(schedule, now, True, cadence).interval
            <= after_check(schedule, now, False, cadence).interval)


@given(cadences, schedules, st.floats(0.0, 1e8), st.floats(0.0, 1e8))
def test_a_page_due_at_one_time_is_due_at_every_later_time(
    cadence: Cadence, schedule: PageSchedule, t: float, later: float
) -> None:
    now = schedule.checked + t
    if is_due(schedule, now, cadence):
        assert is_due(schedule, now + later, cadence)


@given(cadences, st.lists(st.booleans(), max_size=40))
def test_a_page_is_never_left_unchecked_longer_than_max_interval(
    cadence: Cadence, history: list[bool]
) -> None:
    schedule = None
    now = 0.0
    for changed in history:
        schedule = after_check(schedule, now, changed, cadence)
        assert due_at(schedule, cadence) - now <= cadence.max_interval * (1 + 1e-9)
        now = due_at(schedule, cadence)
        assert is_due(schedule, now, cadence)


def test_unchanged_checks_grow_the_interval_to_the_maximum_and_a_change_halves_it() -> None:
    cadence = Cadence(HOUR, 7 * DAY)
    schedule = after_check(None, 0.0, True, cadence)
    assert schedule.interval == HOUR  # a new page is checked again soon
    for _ in range(30):
        schedule = after_check(schedule, schedule.checked + schedule.interval, False, cadence)
    assert schedule.interval == 7 * DAY
    assert schedule.changed == 0.0
    changed = after_check(schedule, 1e7, True, cadence)
    assert changed.interval == 3.5 * DAY
    assert changed.changed == 1e7


def test_a_page_is_not_due_before_its_interval_has_passed() -> None:
    cadence = Cadence(HOUR, 7 * DAY)
    schedule = PageSchedule(checked=1000.0, changed=0.0, interval=2 * HOUR)
    assert not is_due(schedule, 1000.0 + 2 * HOUR - 1, cadence)
    assert is_due(schedule, 1000.0 + 2 * HOUR, cadence)
    assert is_due(None, 0.0, cadence)  # never checked: due


def test_a_sitemap_lastmod_after_the_last_check_makes_a_page_due_at_once() -> None:
    cadence = Cadence(HOUR, 7 * DAY)
    schedule = PageSchedule(checked=1000.0, changed=0.0, interval=DAY)
    assert is_due(schedule, 1001.0, cadence, lastmod=1000.5)
    assert not is_due(schedule, 1001.0, cadence, lastmod=999.0)  # older: the check saw it


def test_a_last_check_in_the_future_makes_a_page_due() -> None:
    # The clock went back: waiting for a time that may never come would hide the page.
    schedule = PageSchedule(checked=5000.0, changed=0.0, interval=DAY)
    assert is_due(schedule, 10.0, Cadence(HOUR, 7 * DAY))


def test_bounds_out_of_order_are_refused() -> None:
    with pytest.raises(ParameterError, match="max_interval"):
        Cadence(DAY, HOUR)
    with pytest.raises(ParameterError, match="min_interval"):
        Cadence(0.0, HOUR)


def test_sitemap_lastmod_values_are_read_as_w3c_datetimes() -> None:
    assert lastmod_seconds("1970-01-02") == DAY
    assert lastmod_seconds("1970-01-01T01:00:00Z") == HOUR
    assert lastmod_seconds("1970-01-01T02:00:00+01:00") == HOUR
    assert lastmod_seconds("1970") == 0.0
    assert lastmod_seconds("1970-02") == 31 * DAY
    assert lastmod_seconds("yesterday") is None
