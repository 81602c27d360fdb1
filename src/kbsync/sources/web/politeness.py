"""Per-host politeness: at most N requests at once to a host, and a pause between their sends.

Every HTTP request kbsync makes (pages, redirects, retries, robots.txt,
sitemaps, soft-404 probes) passes the gate of its host, so a crawl never
hammers a site whatever the mix of work. The pause is ``delay`` seconds,
or the host's Crawl-delay when that is larger, and a ``Retry-After`` pushes
the next start of that host back.

The pause runs from the moment the previous request was *sent* (its
headers written to the connection), not from the moment it left the gate:
between the two lie the address lookup, the connection and whatever the
event loop was busy with, and under CPU load that time can eat the whole
pause. So the gate stays closed to the next request until the one before
it says it was sent (:meth:`Pass.sent`), or gave up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

__all__ = ["SENDS_KEPT", "Clock", "HostGate", "HostGates", "LoopClock", "Pass"]

SENDS_KEPT = 256
"""Send moments each gate remembers (for diagnostics and tests)."""


class Clock(Protocol):
    """Monotonic time and sleep, injectable so tests can check the gate's decisions exactly."""

    def now(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class LoopClock:
    """The running event loop's clock."""

    def now(self) -> float:
        """The loop's monotonic time."""
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)


class Pass:
    """The right to send one request to a host; :meth:`sent` marks the moment it was sent."""

    def __init__(self, gate: HostGate) -> None:
        self._gate = gate
        self.sent_at: float | None = None

    def sent(self) -> None:
        """The request is on the wire: the pause before the next one starts now."""
        if self.sent_at is None:
            self.sent_at = self._gate.mark_sent()
            self._gate.next_may_wait()


class HostGate:
    """The gate of one host: a semaphore for connections and the time of the last send."""

    def __init__(self, connections: int, interval: float, clock: Clock | None = None) -> None:
        self.interval = interval
        self._clock: Clock = clock or LoopClock()
        self._slots = asyncio.Semaphore(connections)
        self._schedule = asyncio.Lock()
        self._last_sent: float | None = None
        self._not_before = 0.0
        self.sends: deque[float] = deque(maxlen=SENDS_KEPT)
        """The latest send moments on the gate's clock: what the gate let happen."""

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Pass]:
        """Hold a connection slot; the request is sent no sooner than ``interval`` after the last.

        The caller calls ``sent()`` on the pass when its request is sent; a pass
        left unmarked counts as sent when the slot is left (a request that
        failed before it reached the host delays the next one a little, never
        too little).
        """
        async with self._slots:
            await self._schedule.acquire()
            granted = Pass(self)
            try:
                await self._wait_turn()
                yield granted
            finally:
                granted.sent()  # a no-op when the request already said so

    async def _wait_turn(self) -> None:
        # Re-read the clock after each sleep: a timer may fire a hair early, and a
        # Crawl-delay or Retry-After may arrive while this request waits.
        while (wait := self._wait(self._clock.now())) > 0:
            await self._clock.sleep(wait)

    def _wait(self, now: float) -> float:
        # Written as "now - last < interval" (not "now < last + interval"), so that once
        # it is false the difference of the two send moments is at least the interval
        # in floating point too.
        after_last = 0.0 if self._last_sent is None else self.interval - (now - self._last_sent)
        return max(after_last, self._not_before - now)

    def mark_sent(self) -> float:
        """Record a send now; the time recorded."""
        now = self._clock.now()
        self._last_sent = now if self._last_sent is None else max(self._last_sent, now)
        self.sends.append(now)
        return now

    def next_may_wait(self) -> None:
        """Open the schedule to the next request (called once per pass, by the pass)."""
        self._schedule.release()

    def take_schedule(self, earlier: HostGate) -> None:
        """The last send, Retry-After and send moments of ``earlier`` (no waiter is moved)."""
        if earlier._last_sent is not None:
            self._last_sent = max(self._last_sent or earlier._last_sent, earlier._last_sent)
        self._not_before = max(self._not_before, earlier._not_before)
        self.sends.extendleft(reversed(earlier.sends))

    def defer(self, seconds: float) -> None:
        """No request to this host starts in the next ``seconds`` (a Retry-After)."""
        self._not_before = max(self._not_before, self._clock.now() + seconds)


class HostGates:
    """The gates of a crawl, made on first use."""

    def __init__(self, connections: int, interval: float, clock: Clock | None = None) -> None:
        self.connections = connections
        self.interval = interval
        self._clock = clock
        self._gates: dict[str, HostGate] = {}

    def get(self, host: str) -> HostGate:
        """The gate of ``host``."""
        gate = self._gates.get(host)
        if gate is None:
            gate = self._gates[host] = HostGate(self.connections, self.interval, self._clock)
        return gate

    def continue_from(self, earlier: HostGates) -> None:
        """Take over the schedule of an earlier crawl's gates (same clock), so its pauses hold.

        A source's ``read`` after its ``list`` is a crawl of its own, on a fresh event
        loop: without this its first request would ignore the Crawl-delay.
        """
        for host, gate in earlier._gates.items():
            mine = self.get(host)
            mine.interval = max(mine.interval, gate.interval)
            mine.take_schedule(gate)

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on the gates' clock (a retry's backoff: only its request waits)."""
        await (self._clock or LoopClock()).sleep(seconds)

    def slow_down(self, host: str, interval: float) -> None:
        """Space requests to ``host`` at least ``interval`` apart (a Crawl-delay)."""
        gate = self.get(host)
        gate.interval = max(gate.interval, interval)
