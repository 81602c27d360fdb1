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
metadata address does not let that address through.

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
    "AddressPolicy",
    "AddressRefused",
    "IPAddress",
    "is_local_name",
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
class AddressPolicy:
    """Which addresses kbsync may connect to.

    ``allow_private`` lifts the guard for every address except cloud metadata
    services (for an intranet crawl); ``allowed`` lifts it for the given
    networks only (for tests against a server on 127.0.0.1), and for a
    metadata address only when it is listed alone (``169.254.169.254``, not a
    range around it).
    """

    allow_private: bool = False
    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def build(cls, allow: bool | str | Iterable[str]) -> AddressPolicy:
        """From the ``allow_private_addresses`` setting: a bool, or addresses / networks."""
        if isinstance(allow, bool):
            return cls(allow_private=allow)
        entries = [allow] if isinstance(allow, str) else list(allow)
        return cls(allowed=tuple(parse_network(e) for e in entries))

    def listed(self, address: IPAddress) -> bool:
        """Whether the allow-list admits ``address`` as written."""
        return any(address in net for net in self.allowed)

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` is refused, or None when it may be connected to."""
        alone = ipaddress.ip_network(address)
        for candidate in _embedded(address):
            if candidate in METADATA_ADDRESSES and alone not in self.allowed:
                return f"{address} is a cloud metadata service address"
        if self.allow_private or self.listed(address):
            return None
        for candidate in _embedded(address):
            reason = _non_public(candidate)
            if reason is not None:
                return f"{address} is {reason}"
        return None

    def host_refusal(self, host: str) -> str | None:
        """Why a canonical host is refused before any lookup (an address, a local name), or None."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if host in METADATA_NAMES:
                return f"{host} is a cloud metadata service name"
            if is_local_name(host) and not (self.allow_private or self._admits_loopback()):
                return f"{host} names the local machine"
            return None
        return self.refusal(address)

    def _admits_loopback(self) -> bool:
        return any(net.network_address.is_loopback for net in self.allowed)


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
    reason = policy.host_refusal(host)
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
        if only_listed and not policy.listed(address):
            continue
        reason = policy.refusal(address)
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
