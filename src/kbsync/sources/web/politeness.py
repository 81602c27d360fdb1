"""Per-host politeness: at most N requests at once to a host, and a pause between their starts.

Every HTTP request kbsync makes (pages, redirects, retries, robots.txt,
sitemaps, soft-404 probes) passes the gate of its host, so a crawl never
hammers a site whatever the mix of work. The pause is ``delay`` seconds,
or the host's Crawl-delay when that is larger, and a ``Retry-After`` pushes
the next start of that host back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["HostGate", "HostGates"]


class HostGate:
    """The gate of one host: a semaphore for connections and a schedule of start times."""

    def __init__(self, connections: int, interval: float) -> None:
        self.interval = interval
        self._slots = asyncio.Semaphore(connections)
        self._schedule = asyncio.Lock()
        self._next_start = 0.0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a connection slot, entered no sooner than ``interval`` after the previous start."""
        async with self._slots:
            async with self._schedule:
                loop = asyncio.get_running_loop()
                wait = self._next_start - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                # Reserve the start time under the lock, so concurrent waiters queue up
                # one interval apart instead of all waking at once.
                self._next_start = max(self._next_start, loop.time()) + self.interval
            yield

    def defer(self, seconds: float) -> None:
        """No request to this host starts in the next ``seconds`` (a Retry-After)."""
        now = asyncio.get_running_loop().time()
        self._next_start = max(self._next_start, now + seconds)


class HostGates:
    """The gates of a crawl, made on first use."""

    def __init__(self, connections: int, interval: float) -> None:
        self.connections = connections
        self.interval = interval
        self._gates: dict[str, HostGate] = {}

    def get(self, host: str) -> HostGate:
        """The gate of ``host``."""
        gate = self._gates.get(host)
        if gate is None:
            gate = self._gates[host] = HostGate(self.connections, self.interval)
        return gate

    def slow_down(self, host: str, interval: float) -> None:
        """Space requests to ``host`` at least ``interval`` apart (a Crawl-delay)."""
        gate = self.get(host)
        gate.interval = max(gate.interval, interval)
