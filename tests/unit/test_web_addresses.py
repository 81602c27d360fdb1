from __future__ import annotations

import asyncio
import ipaddress
import re
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpserver import HTTPServer

from kbsync.errors import ParameterError
from kbsync.sources.web import WebSettings, WebSource
from kbsync.sources.web.addresses import AddressPolicy, AddressRefused, resolve
from kbsync.sources.web.config import build_address_policy
from kbsync.sources.web.urls import canonicalize, host_of
from tests.fixtures.web.servers import Recorder, serving, web_source

REFUSED_SPELLINGS = [
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://%31%32%37.0.0.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://app.localhost/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://169.254.1.1/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://metadata.google.internal/",
    "http://100.100.100.200/",
]


@pytest.mark.parametrize("url", REFUSED_SPELLINGS)
def test_every_spelling_of_a_local_private_or_metadata_address_is_refused(url: str) -> None:
    policy = AddressPolicy()
    assert policy.host_refusal(host_of(canonicalize(url))) is not None


@pytest.mark.parametrize(
    "url", ["http://93.184.216.34/", "http://[2606:2800:220:1::1]/", "http://example.com/"]
)
def test_public_addresses_and_names_pass_the_static_check(url: str) -> None:
    assert AddressPolicy().host_refusal(host_of(canonicalize(url))) is None


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "100.100.100.200"]
)
def test_metadata_addresses_stay_refused_even_when_private_addresses_are_allowed(
    address: str,
) -> None:
    policy = AddressPolicy.build(True)
    assert "metadata" in (policy.refusal(ipaddress.ip_address(address)) or "")
    assert policy.refusal(ipaddress.ip_address("10.0.0.1")) is None


def test_an_allow_list_lets_through_only_its_networks() -> None:
    policy = AddressPolicy.build(("127.0.0.1", "10.9.0.0/16"))
    assert policy.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.refusal(ipaddress.ip_address("10.9.3.4")) is None
    assert policy.refusal(ipaddress.ip_address("10.0.0.1")) is not None
    assert policy.refusal(ipaddress.ip_address("127.0.0.2")) is not None


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, port),
                )
                for a in answers[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_name_that_resolves_to_a_private_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_dns(monkeypatch, {"intranet.test": ["10.1.2.3"], "mixed.test": ["93.184.216.34", "::1"]})
    with pytest.raises(AddressRefused, match=r"intranet\.test resolves to 10\.1\.2\.3"):
        asyncio.run(resolve("intranet.test", 80, AddressPolicy()))
    # One bad answer among good ones is refused too (DNS rebinding).
    with pytest.raises(AddressRefused, match="::1"):
        asyncio.run(resolve("mixed.test", 80, AddressPolicy()))


def test_a_name_is_connected_to_at_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch, server: HTTPServer
) -> None:
    _fake_dns(monkeypatch, {"docs.test": ["127.0.0.1"]})
    server.expect_request("/").respond_with_data("hello", content_type="text/plain")
    recorder = Recorder()
    source = web_source(f"http://docs.test:{server.port}/", transport=recorder)
    listing = source.list()
    assert [i.key for i in listing.items] == [f"http://docs.test:{server.port}/"]
    # The connection went to the checked address, the server saw the name.
    assert recorder.hosts == {"127.0.0.1"}
    assert {r.headers["host"] for r in recorder.requests} == {f"docs.test:{server.port}"}


class _MustNotConnect(httpx.AsyncBaseTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"connected to {request.url}")


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://localhost/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
    ],
)
def test_a_refused_seed_is_an_error_and_no_connection_is_made(url: str) -> None:
    source = WebSource(WebSettings(url, delay=0.0), transport=_MustNotConnect())
    listing = source.list()
    assert listing.items == ()
    [error] = listing.errors
    assert error.key == canonicalize(url)
    assert "refused" in error.message
    assert not listing.complete  # nothing answered: nothing may be deleted


@pytest.mark.parametrize(
    "target",
    ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/admin", "http://0x0a.1/"],
)
def test_a_redirect_to_a_refused_address_is_an_error_without_connecting(
    server: HTTPServer, target: str
) -> None:
    server.expect_request("/start").respond_with_data("", status=302, headers={"Location": target})
    recorder = Recorder()
    source = web_source(
        server.url_for("/start"),
        transport=recorder,
        allowed_hosts=("127.0.0.1", "169.254.169.254", "10.0.0.1"),
    )
    started = time.monotonic()
    listing = source.list()
    assert time.monotonic() - started < 2  # no connection attempt that would have to time out
    [error] = listing.errors
    assert error.key == server.url_for("/start")
    assert "refused address" in error.message
    assert canonicalize(target) in error.message
    assert not error.missing
    assert recorder.hosts == {"127.0.0.1"}


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_is_verified_against_the_host_name_not_the_pinned_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path, "docs.test")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    _fake_dns(monkeypatch, {"docs.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    client_context = ssl.create_default_context(cafile=str(cert))
    with serving(ssl_context=server_context) as server:
        server.expect_request("/").respond_with_data("secure", content_type="text/plain")
        transport = httpx.AsyncHTTPTransport(verify=client_context)
        good = web_source(f"https://docs.test:{server.port}/", transport=transport).list()
        assert [i.key for i in good.items] == [f"https://docs.test:{server.port}/"]
        # Same address, another name: the certificate does not match, so nothing is read.
        bad = web_source(f"https://other.test:{server.port}/", transport=transport).list()
        assert bad.items == ()
        assert any("certificate" in e.message.lower() for e in bad.errors), bad.errors


def test_an_allow_list_is_exact_and_spares_metadata_addresses_unless_it_names_them() -> None:
    loopback = AddressPolicy.build(["127.0.0.1"])
    assert loopback.refusal(ipaddress.ip_address("::1")) is not None
    assert loopback.refusal(ipaddress.ip_address("::ffff:127.0.0.2")) is not None
    assert loopback.host_refusal(host_of(canonicalize("http://2130706433/"))) is None
    assert loopback.host_refusal(host_of(canonicalize("http://0x7f.2/"))) is not None
    link_local = AddressPolicy.build(["169.254.0.0/16"])
    assert link_local.refusal(ipaddress.ip_address("169.254.1.2")) is None
    assert "metadata" in (link_local.refusal(ipaddress.ip_address("169.254.169.254")) or "")
    named = AddressPolicy.build(["169.254.169.254"])
    assert named.refusal(ipaddress.ip_address("169.254.169.254")) is None
    assert named.refusal(ipaddress.ip_address("169.254.170.2")) is not None


def test_an_allow_list_entry_admits_its_own_port_or_else_the_web_and_source_ports() -> None:
    policy = AddressPolicy.build(["127.0.0.1:8000", "[::1]:8001", "10.9.0.0/16:8080",
                                  "192.168.0.0/16"], ports=[9000])
    loopback, v6, ranged = (ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.9.1.2"))
    assert policy.refusal(loopback, 8000) is None
    assert policy.refusal(loopback) is None  # the port not known yet: the address is listed
    assert policy.refusal(loopback, 22) == (
        "127.0.0.1 port 22 is refused: allow_private_addresses admits 127.0.0.1 on port 8000 "
        "only (another port is another service)")
    assert policy.refusal(v6, 8001) is None
    assert policy.refusal(v6, 8000) is not None
    assert policy.refusal(ranged, 8080) is None
    assert policy.refusal(ranged, 80) is not None
    bare = ipaddress.ip_address("192.168.4.5")
    assert [policy.refusal(bare, port) is None for port in (80, 443, 9000, 6379)] == [
        True, True, True, False]
    public = ipaddress.ip_address("93.184.216.34")
    assert policy.refusal(public, 6379) is None  # the guard is about local addresses only
    assert AddressPolicy.build(True).refusal(loopback, 22) is None
    assert policy.host_refusal("localhost", 8000) is None
    assert policy.host_refusal("localhost", 22) == (
        "localhost port 22 is refused: allow_private_addresses admits the local machine on "
        "ports 8000, 8001 only")


@pytest.mark.parametrize("entry", ["127.0.0.1:0", "127.0.0.1:http", "127.0.0.1:70000",
                                   "[::1", "[::1]8000", "[::1]:"])
def test_a_malformed_port_in_an_allow_list_entry_is_named(entry: str) -> None:
    with pytest.raises(ParameterError, match=re.escape(repr(entry))):
        build_address_policy([entry])


def test_a_redirect_to_another_port_of_an_allowed_address_is_refused_unless_listed() -> None:
    with serving() as site, serving() as other:
        other.expect_request("/").respond_with_data("ssh banner", content_type="text/plain")
        site.expect_request("/old").respond_with_data(
            "", status=301, headers={"Location": other.url_for("/")})
        seed = f"http://127.0.0.1:{site.port}/old"
        listing = web_source(seed).list()
        [error] = listing.errors
        assert f"127.0.0.1 port {other.port} is refused" in error.message
        assert other.log == []
        allowed = web_source(seed, allow_private_addresses=(
            "127.0.0.1", f"127.0.0.1:{other.port}")).list()
        assert [i.key for i in allowed.items] == [f"http://127.0.0.1:{other.port}/"]


def test_a_malformed_allow_list_entry_is_named() -> None:
    with pytest.raises(ParameterError, match=r"'127\.0\.0\.300' is not an IP address"):
        build_address_policy(["127.0.0.300"])


def test_localhost_reaches_only_the_listed_loopback_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_dns(monkeypatch, {"localhost": ["::1", "127.0.0.1"]})
    assert AddressPolicy().host_refusal("localhost") is not None
    policy = AddressPolicy.build(["127.0.0.1"])
    assert policy.host_refusal("localhost") is None
    assert asyncio.run(resolve("localhost", 80, policy)) == ("127.0.0.1",)
    with pytest.raises(AddressRefused, match="none of the allowed"):
        asyncio.run(resolve("localhost", 80, AddressPolicy.build(["127.0.0.2"])))
