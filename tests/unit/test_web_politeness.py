"""The per-host gate's decisions, on a virtual clock: what it lets through, and when."""

from __future__ import annotations

import asyncio
import itertools

from kbsync.sources.web.politeness import HostGate, HostGates


class VirtualClock:
    """Time that moves only when someone sleeps on it, so every decision is exact.

    The tests use binary fractions (0.25, 0.375), which floats add without rounding.
    """

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)


async def _request(gate: HostGate, clock: VirtualClock, busy: float, sends: list[float]) -> None:
    """One request that spends ``busy`` seconds between leaving the gate and being sent."""
    async with gate.slot() as granted:
        clock.t += busy  # resolution, connection, a loaded event loop ...
        granted.sent()
        sends.append(clock.now())


def test_the_pause_runs_from_the_send_not_from_leaving_the_gate() -> None:
    clock = VirtualClock()
    gate = HostGate(connections=2, interval=0.25, clock=clock)
    sends: list[float] = []

    async def crawl() -> None:
        # The first request is slow to go out (0.375 s after it left the gate), the others quick.
        await asyncio.gather(
            _request(gate, clock, 0.375, sends),
            _request(gate, clock, 0.0, sends),
            _request(gate, clock, 0.0, sends),
        )

    asyncio.run(crawl())
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert len(sends) == 3
    assert min(gaps) >= 0.25
    assert list(gate.sends) == sends


def test_a_crawl_delay_learned_while_requests_wait_applies_to_them() -> None:
    clock = VirtualClock()
    gates = HostGates(connections=2, interval=0.0078125, clock=clock)
    gate = gates.get("example.org")
    sends: list[float] = []

    async def crawl() -> None:
        await _request(gate, clock, 0.0, sends)  # robots.txt
        gates.slow_down("example.org", 0.375)  # its Crawl-delay
        await asyncio.gather(_request(gate, clock, 0.0, sends), _request(gate, clock, 0.0, sends))

    asyncio.run(crawl())
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert min(gaps) >= 0.375


def test_a_request_that_never_reached_the_host_still_spaces_the_next() -> None:
    clock = VirtualClock()
    gate = HostGate(connections=1, interval=0.5, clock=clock)

    async def crawl() -> list[float]:
        try:
            async with gate.slot():
                clock.t += 0.125
                raise ConnectionError("refused")  # left without saying it was sent
        except ConnectionError:
            pass
        async with gate.slot() as granted:
            granted.sent()
        return list(gate.sends)

    sends = asyncio.run(crawl())
    assert sends[1] - sends[0] >= 0.5


def test_retry_after_holds_back_every_request_to_the_host() -> None:
    clock = VirtualClock()
    gate = HostGate(connections=2, interval=0.0, clock=clock)
    sends: list[float] = []

    async def crawl() -> None:
        await _request(gate, clock, 0.0, sends)
        gate.defer(3.0)
        await asyncio.gather(_request(gate, clock, 0.0, sends), _request(gate, clock, 0.0, sends))

    asyncio.run(crawl())
    assert sends[0] == 0.0
    assert min(sends[1:]) >= 3.0


def test_requests_overlap_up_to_the_connection_limit() -> None:
    clock = VirtualClock()
    gate = HostGate(connections=2, interval=0.0, clock=clock)
    active = most = 0

    async def request() -> None:
        nonlocal active, most
        async with gate.slot() as granted:
            granted.sent()
            active += 1
            most = max(most, active)
            await asyncio.sleep(0.01)  # the answer takes a while
            active -= 1

    async def crawl() -> None:
        await asyncio.gather(*(request() for _ in range(6)))

    asyncio.run(crawl())
    assert most == 2
