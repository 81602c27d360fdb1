"""The address guard: kbsync never connects to a local, private or cloud-metadata address.

A crawler fetches URLs that strangers write (links, redirects, sitemaps), so
without a guard a page could make kbsync read an internal service or the
cloud metadata endpoint that hands out credentials (server-side request
forgery). The guard refuses:

- loopback, private (RFC 1918, unique-local and site-local IPv6), link-local, carrier-grade
  NAT (100.64.0.0/10), unspecified, multicast, reserved and other addresses
  that are not globally routable;
- cloud metadata services (169.254.169.254, 169.254.170.2, fd00:ec2::254,
  100.100.100.200, 168.63.129.16) and their names, even when private
  addresses are allowed, unless an allow-list names the address itself;
- names of the local machine (``localhost``, ``*.localhost``, ...), before
  any lookup, unless private addresses are allowed or an allow-list admits
  a loopback address (then the name may reach the listed addresses only).

An allow-list (``allow_private_addresses = ["127.0.0.1", "10.9.0.0/16"]``,
``kbsync init URL --allow-private 127.0.0.1``) is exact: it lets through
the addresses it lists, as written, and nothing else; a range that covers a
metadata address does not let that address through. It is exact about ports
too, since a redirect to another port of an allowed address reaches another
service (``http://127.0.0.1:22/``): an entry with a port (``127.0.0.1:8000``,
``[::1]:8000``, ``10.9.0.0/16:8080``) admits that port only, and an entry
without one admits the web's ports (80 and 443) and the ports the source's own
URLs (seeds and sitemaps) name. ``True`` (every private address) admits every port.

IPv6 addresses that embed an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
IPv4-compatible, 6to4, Teredo, NAT64 ``64:ff9b::/96``) are judged by the
embedded address too. Hosts are checked in their canonical spelling (see
:mod:`.urls`: ``2130706433`` and ``0x7f.1`` are 127.0.0.1), and names are
checked on every address they resolve to; the caller connects to one of the
addresses checked, so a second, different DNS answer cannot slip in
(DNS rebinding). The check runs again on every redirect target.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "METADATA_ADDRESSES",
    "WEB_PORTS",
    "AddressPolicy",
    "AddressRefused",
    "Allowed",
    "IPAddress",
    "is_local_name",
    "parse_entry",
    "parse_network",
    "resolve",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server (a public-looking address)
    )
)
WEB_PORTS = frozenset({80, 443})
"""The ports an allow-list entry without a port admits, besides those of the source's URLs."""
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
LOCAL_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "localhost6"}
)

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class AddressRefused(Exception):  # noqa: N818  (a verdict, not a bug: "refused" reads better)
    """The host or one of its addresses may not be connected to; the message says why."""


@dataclass(frozen=True, slots=True)
class Allowed:
    """One entry of an allow-list: a network, and the ports it admits there."""

    network: IPNetwork
    ports: frozenset[int]

    def admits(self, address: IPAddress, port: int | None) -> bool:
        """Whether ``address`` (on ``port``; None: any, for a check before the port is known)."""
        return address in self.network and (port is None or port in self.ports)


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which addresses kbsync may connect to.

    ``allow_private`` lifts the guard for every address except cloud metadata
    services (for an intranet crawl); ``allowed`` lifts it for the given
    networks on the given ports only (for tests against a server on 127.0.0.1),
    and for a metadata address only when it is listed alone (``169.254.169.254``,
    not a range around it). Public addresses are allowed on every port.
    """

    allow_private: bool = False
    allowed: tuple[Allowed, ...] = ()

    @classmethod
    def build(cls, allow: bool | str | Iterable[str], ports: Iterable[int] = ()) -> AddressPolicy:
        """From the ``allow_private_addresses`` setting: a bool, or addresses / networks, each
        with a port or admitting :data:`WEB_PORTS` and ``ports`` (those of the source's URLs)."""
        if isinstance(allow, bool):
            return cls(allow_private=allow)
        entries = [allow] if isinstance(allow, str) else list(allow)
        default = WEB_PORTS | frozenset(ports)
        allowed = []
        for entry in entries:
            network, port = parse_entry(entry)
            allowed.append(Allowed(network, default if port is None else frozenset({port})))
        return cls(allowed=tuple(allowed))

    def listed(self, address: IPAddress, port: int | None = None) -> bool:
        """Whether the allow-list admits ``address`` as written (on ``port``, if given)."""
        return any(entry.admits(address, port) for entry in self.allowed)

    def refusal(self, address: IPAddress, port: int | None = None) -> str | None:
        """Why ``address`` (on ``port``, if known) is refused, or None when it may be
        connected to."""
        alone = ipaddress.ip_network(address)
        for candidate in _embedded(address):
            if candidate in METADATA_ADDRESSES and alone not in self._networks():
                return f"{address} is a cloud metadata service address"
        if self.allow_private or self.listed(address, port):
            return None
        for candidate in _embedded(address):
            reason = _non_public(candidate)
            if reason is not None:
                return self._port_refusal(address, port) or f"{address} is {reason}"
        return None

    def host_refusal(self, host: str, port: int | None = None) -> str | None:
        """Why a canonical host (on ``port``, if known) is refused before any lookup (an
        address, a local name), or None."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if host in METADATA_NAMES:
                return f"{host} is a cloud metadata service name"
            if not is_local_name(host) or self.allow_private:
                return None
            if not self._admits_loopback(None):
                return f"{host} names the local machine"
            if not self._admits_loopback(port):
                return (f"{host} port {port} is refused: allow_private_addresses admits "
                        f"the local machine on {_ports(self._loopback_ports())} only")
            return None
        return self.refusal(address, port)

    def _networks(self) -> tuple[IPNetwork, ...]:
        return tuple(entry.network for entry in self.allowed)

    def _port_refusal(self, address: IPAddress, port: int | None) -> str | None:
        """The refusal of a listed address on a port its entries do not admit, or None."""
        ports = frozenset().union(*(e.ports for e in self.allowed if address in e.network))
        if port is None or not ports:
            return None
        return (f"{address} port {port} is refused: allow_private_addresses admits "
                f"{address} on {_ports(ports)} only (another port is another service)")

    def _admits_loopback(self, port: int | None) -> bool:
        return any(entry.network.network_address.is_loopback
                   and (port is None or port in entry.ports) for entry in self.allowed)

    def _loopback_ports(self) -> frozenset[int]:
        return frozenset().union(*(e.ports for e in self.allowed
                                   if e.network.network_address.is_loopback))


def parse_entry(entry: str) -> tuple[IPNetwork, int | None]:
    """An allow-list entry: an address or CIDR range, with or without ``:PORT`` (an IPv6
    address or range in brackets then: ``[::1]:8000``); ValueError naming it when malformed."""
    text = entry.strip()
    port: int | None = None
    if text.startswith("["):
        inner, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r} is not an IP address or a network with a port "
                             "(such as [::1]:8000)")
        text, port = inner, _port(rest[1:], entry) if rest else None
    elif text.count(":") == 1:  # IPv4 with a port; an IPv6 address has two colons or more
        text, _, digits = text.partition(":")
        port = _port(digits, entry)
    return parse_network(text), port


def _port(digits: str, entry: str) -> int:
    if not digits.isdigit() or not 0 < int(digits) < 65_536:
        raise ValueError(f"{entry!r} names no port from 1 to 65535")
    return int(digits)


def _ports(ports: Iterable[int]) -> str:
    listed = sorted(ports)
    return ("port " if len(listed) == 1 else "ports ") + ", ".join(str(p) for p in listed)


def parse_network(entry: str) -> IPNetwork:
    """An address or CIDR range of an allow-list; ValueError naming the entry when malformed."""
    try:
        return ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        raise ValueError(
            f"{entry!r} is not an IP address or a network (such as 127.0.0.1 or 10.0.0.0/8)"
        ) from None


def is_local_name(host: str) -> bool:
    """Whether ``host`` is a name of the local machine (``localhost`` and its kin)."""
    return host in LOCAL_NAMES or host.endswith(".localhost")


async def resolve(host: str, port: int, policy: AddressPolicy) -> tuple[str, ...]:
    """The addresses of ``host`` kbsync may connect to, in resolver order.

    Raises :class:`AddressRefused` when the host or any of its addresses is
    refused (one bad answer among good ones is a rebinding attempt as much as
    an all-bad answer) and :class:`OSError` when the name does not resolve.
    """
    reason = policy.host_refusal(host, port)
    if reason is not None:
        raise AddressRefused(reason)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return (str(literal),)
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    # A local name reaches only the listed addresses among its own (``localhost`` is
    # 127.0.0.1 and ::1; an allow-list of 127.0.0.1 means the first): the local
    # resolver answers it, not a stranger's DNS.
    only_listed = is_local_name(host) and not policy.allow_private
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        text = str(sockaddr[0]).split("%", 1)[0]
        address = ipaddress.ip_address(text)
        if only_listed and not policy.listed(address, port):
            continue
        reason = policy.refusal(address, port)
        if reason is not None:
            raise AddressRefused(f"{host} resolves to {reason}")
        if text not in addresses:
            addresses.append(text)
    if not addresses and only_listed:
        raise AddressRefused(f"{host} resolves to none of the allowed addresses")
    if not addresses:
        raise OSError(f"{host} has no address")
    return tuple(addresses)


def _embedded(address: IPAddress) -> list[IPAddress]:
    """The address itself and every IPv4 address an IPv6 address carries inside it."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.extend(address.teredo)
        if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _non_public(address: IPAddress) -> str | None:
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a carrier-grade NAT (shared) address"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "a site-local address (fec0::/10, deprecated but still routed inside networks)"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a globally routable address"
    return None
