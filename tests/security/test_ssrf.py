"""The address guard against every spelling, every DNS answer and DNS rebinding.

``tests/unit/test_web_addresses.py`` covers the common spellings, a refused seed
and a redirect to three targets. Here: the rarer spellings (octal with leading
zeros, mixed radix, dotted and undotted decimal, IPv4-mapped, -compatible and
-translated IPv6, 6to4, NAT64, Teredo, site-local), each category as a DNS
answer, redirects into each spelling, and rebinding: a name whose first answer
passes and whose later answers are private is connected to only at the first.

Every test runs under ``connect_guard``: a connection to anything outside
127.0.0.0/8 is refused by the test itself (nothing leaves the machine) and
recorded; a test fails on any such attempt it did not expect.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from kbsync.sources.web import WebSettings, WebSource
from kbsync.sources.web.addresses import AddressPolicy, AddressRefused, resolve
from kbsync.sources.web.urls import canonicalize, host_of
from tests.fixtures.web.servers import Recorder, web_source

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
PUBLIC = "93.184.216.34"


@dataclass
class ConnectGuard:
    """Every TCP connect attempt of the test, and those refused for leaving 127.0.0.0/8."""

    attempts: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    expected: set[str] = field(default_factory=set)


@pytest.fixture
def connect_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectGuard]:
    guard = ConnectGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        host = str(address[0]).split("%", 1)[0]
        guard.attempts.append(host)
        ip = ipaddress.ip_address(host)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip not in LOOPBACK:
            guard.blocked.append(host)
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"test guard: not to {host}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield guard
    unexpected = set(guard.blocked) - guard.expected
    assert not unexpected, f"connections attempted outside 127.0.0.0/8: {sorted(unexpected)}"


@dataclass
class FakeDns:
    """Answers for test names, in turn: the n-th lookup of a name gets its n-th answer
    (the last one repeats); other names fail to resolve, so nothing real is asked."""

    answers: dict[str, list[list[str]]]
    lookups: dict[str, int] = field(default_factory=dict)

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        try:
            ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            pass
        else:  # a literal address: what the system would answer, without a lookup
            family = socket.AF_INET6 if ":" in name else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (name, int(port or 0)))]
        if name not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} is not a test name")
        n = self.lookups.get(name, 0)
        self.lookups[name] = n + 1
        turn = self.answers[name][min(n, len(self.answers[name]) - 1)]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
             (a, int(port or 0)))
            for a in turn
        ]


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> FakeDns:
    dns = FakeDns(answers)
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    return dns


MORE_SPELLINGS = [
    "http://0177.0.0.01/",  # octal with leading zeros in every part
    "http://0x7f.0x0.0x0.0x1/",  # hex in every part
    "http://017700000001/",  # one octal number
    "http://0x7F000001/",
    "http://127.000.000.001/",
    "http://127.0.1/",  # three parts
    "http://127.0.0.1./",  # a trailing dot
    "http://evil.example@127.0.0.1/",  # credentials before the host
    "http://１２７.０.０.１/",  # full-width digits (IDNA maps them)
    "http://0x7f.\u00b9/",  # a superscript one: IDNA maps it, then it is an address
    "http://\u2460\u2461\u2466.0.0.1/",  # circled digits
    "http://0/",
    "http://10.1/",
    "http://192.168.257/",  # the last part spills into the third
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[::ffff:0:7f00:1]/",  # IPv4-translated
    "http://[64:ff9b::10.0.0.1]/",  # NAT64 of a private address
    "http://[64:ff9b:1::a9fe:a9fe]/",  # local-use NAT64
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo
    "http://[fec0::1]/",  # site-local
    "http://[fd12:3456::1]/",
    "http://[100::1]/",  # discard-only
    "http://100.127.255.255/",  # the top of CGNAT
    "http://0x64.0x40.0.1/",  # CGNAT in hex
    "http://1681915905/",  # CGNAT in decimal
    "http://[::ffff:100.64.0.1]/",  # CGNAT, IPv4-mapped
    "http://198.18.0.1/",  # benchmarking
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://LocalHost%2e/",
    "http://localhost.:80/",
]

METADATA_SPELLINGS = [
    "http://2852039166/",  # 169.254.169.254 in decimal
    "http://0251.0376.0251.0376/",  # in octal
    "http://0xa9fea9fe/",  # in hex
    "http://169.254.43518/",  # the last two parts as one number
    "http://[::ffff:a9fe:a9fe]/",  # IPv4-mapped
    "http://[::ffff:169.254.169.254]/",
    "http://[2002:a9fe:a9fe::]/",  # 6to4
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
    "http://[64:ff9b::169.254.169.254]/",
    "http://[fd00:ec2::254]/",
    "http://[FD00:EC2:0:0:0:0:0:254]/",
    "http://metadata.google.internal./",
]


@pytest.mark.parametrize("url", MORE_SPELLINGS + METADATA_SPELLINGS)
def test_every_rarer_spelling_of_a_non_public_address_is_refused(url: str) -> None:
    assert AddressPolicy().host_refusal(host_of(canonicalize(url))) is not None


@pytest.mark.parametrize("url", METADATA_SPELLINGS)
def test_every_spelling_of_a_metadata_address_is_refused_even_with_private_allowed(
    url: str,
) -> None:
    reason = AddressPolicy.build(True).host_refusal(host_of(canonicalize(url)))
    assert reason is not None
    assert "metadata" in reason


NON_PUBLIC_ANSWERS = [
    "127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1", "10.0.0.1", "172.31.255.255",
    "192.168.0.1", "169.254.0.1", "fe80::1", "fc00::1", "fd00::1", "fec0::1", "100.64.0.1",
    "100.127.255.254", "169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe", "2002:a00:1::", "0.0.0.0", "::", "224.0.0.1",
]  # fmt: skip


@pytest.mark.parametrize("answer", NON_PUBLIC_ANSWERS)
def test_a_name_answering_any_non_public_address_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch, connect_guard: ConnectGuard, answer: str
) -> None:
    _fake_dns(monkeypatch, {"evil.test": [[PUBLIC, answer]]})
    with pytest.raises(AddressRefused, match=r"evil\.test resolves to"):
        asyncio.run(resolve("evil.test", 80, AddressPolicy()))
    listing = WebSource(WebSettings("http://evil.test/", delay=0.0, timeout=5.0)).list()
    assert listing.items == ()
    [error] = listing.errors
    assert "refused" in error.message
    assert connect_guard.attempts == []


# The test server's 127.0.0.1 is allowed, so the loopback targets spell 127.0.0.2.
REDIRECT_TARGETS = [
    "http://2130706434/secret",
    "http://0177.0.0.02/secret",
    "http://0x7f.2/secret",
    "http://127.2/secret",
    "http://[::ffff:127.0.0.2]/secret",
    "http://[::1]/secret",
    "http://2852039166/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    "http://1681915905/",
    "http://intranet.test/",  # a name that resolves to a private address
]


@pytest.mark.parametrize("target", REDIRECT_TARGETS)
def test_a_redirect_into_any_spelling_is_refused_without_connecting_there(
    monkeypatch: pytest.MonkeyPatch,
    connect_guard: ConnectGuard,
    server: HTTPServer,
    target: str,
) -> None:
    _fake_dns(monkeypatch, {"intranet.test": [["10.20.30.40"]]})
    server.expect_request("/start").respond_with_data("", status=302, headers={"Location": target})
    recorder = Recorder()
    # The target is in scope: what stops it must be the address guard.
    in_scope = ("127.0.0.1", host_of(canonicalize(target)))
    listing = web_source(server.url_for("/start"), transport=recorder,
                         allowed_hosts=in_scope).list()
    assert listing.items == ()
    [error] = listing.errors
    # httpx itself rejects some spellings (octal with leading zeros) in a Location
    # header; either way the redirect is not followed.
    assert "refused" in error.message or "Invalid URL in location" in error.message, (
        error.message)
    assert recorder.hosts == {"127.0.0.1"}
    assert set(connect_guard.attempts) == {"127.0.0.1"}
    assert {r.url.port for r in recorder.requests} == {server.port}


def test_a_name_rebound_to_loopback_after_a_public_answer_is_never_connected_there(
    monkeypatch: pytest.MonkeyPatch, connect_guard: ConnectGuard, server: HTTPServer,
) -> None:
    """First answer public (passes the check), every later answer 127.0.0.1, where a
    server waits: the connection goes to the public address only (blocked by the guard,
    so nothing leaves the machine), and the server on 127.0.0.1 sees nothing."""
    dns = _fake_dns(monkeypatch, {"rebind.test": [[PUBLIC], ["127.0.0.1"]]})
    server.expect_request("/").respond_with_data("internal only", content_type="text/plain")
    connect_guard.expected = {PUBLIC}
    listing = WebSource(WebSettings(f"http://rebind.test:{server.port}/", delay=0.0,
                                    timeout=5.0)).list()
    assert listing.items == ()
    assert dns.lookups["rebind.test"] >= 1
    assert connect_guard.attempts, "no connection was attempted at all"
    assert set(connect_guard.attempts) == {PUBLIC}
    assert server.log == []
    if dns.lookups["rebind.test"] > 1:  # a later fetch looked again: refused, not connected
        assert any("refused" in e.message for e in listing.errors), listing.errors


def test_within_one_fetch_the_connection_goes_to_the_checked_answer_not_a_later_one(
    monkeypatch: pytest.MonkeyPatch, connect_guard: ConnectGuard, server: HTTPServer,
) -> None:
    """The first answer (127.0.0.1, allowed for the test) is checked; any later lookup
    would say 10.0.0.1. Every connection goes to 127.0.0.1 with the name in the Host
    header: nothing resolves the name a second time between check and connect."""
    dns = _fake_dns(monkeypatch, {"docs.test": [["127.0.0.1"], ["10.0.0.1"]]})
    server.expect_request("/").respond_with_data("public docs", content_type="text/plain")
    source = web_source(f"http://docs.test:{server.port}/", use_robots_sitemaps=False)
    listing = source.list()
    assert connect_guard.attempts
    assert set(connect_guard.attempts) == {"127.0.0.1"}
    hosts = {request.headers["Host"] for request, _ in server.log}
    assert hosts == {f"docs.test:{server.port}"}
    first = server.log[0][0].path
    assert first in ("/robots.txt", "/")
    if dns.lookups["docs.test"] == 1:  # one fetch in all: it was the page, and it was read
        assert [i.key for i in listing.items] == [f"http://docs.test:{server.port}/"]
    else:  # later fetches looked again, got 10.0.0.1 and were refused without connecting
        assert any("refused" in e.message for e in listing.errors), listing.errors
