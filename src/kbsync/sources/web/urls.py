"""Canonical URLs, the natural keys of web documents, and the crawl scope.

One address, one key: two spellings of the same page must map to the same
key, or the knowledge base would hold the page twice and a renamed spelling
would look like a deletion plus an addition. The policy:

- Only ``http`` and ``https``; the scheme and host are lower-cased; a
  trailing dot of the host is dropped; a non-ASCII host becomes its IDNA
  (punycode) form; percent-escapes in the host are decoded first.
- Numeric hosts get one spelling: every form an IPv4 parser accepts
  (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) becomes dotted
  decimal (``127.0.0.1``), as browsers do; IPv6 hosts are compressed.
  So the address guard sees the address a connection would really reach.
- User information (``user:password@``) is dropped: credentials never
  become part of a stored key nor are they sent.
- The default port (80 for http, 443 for https) and the fragment are dropped.
- The path: an empty path is ``/``; dot segments are removed; percent-escapes
  of unreserved characters (letters, digits, ``-._~``) are decoded, other
  escapes get upper-case hex, and characters that may not appear raw
  (spaces, non-ASCII as UTF-8) are escaped. Case and trailing slashes are
  kept: servers may treat them as different pages.
- The query is kept, since it often selects the content (``?page=2``), but
  its parameters are sorted by name (stably, so repeated names keep their
  order) and tracking parameters that never change the content are dropped:
  ``utm_*``, ``gclid``, ``fbclid`` and ``msclkid``. Names and values get the
  same escape normalization as the path; ``+`` is left as is. An empty query
  is dropped.

kbsync requests the canonical form, so what is fetched is what is stored.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

from kbsync.errors import SourceError

__all__ = [
    "DEFAULT_PORTS",
    "Scope",
    "UrlError",
    "canonical_host",
    "canonicalize",
    "host_of",
    "origin_of",
    "parse_ipv4",
    "port_of",
]

DEFAULT_PORTS = {"http": 80, "https": 443}
TRACKING_PARAMETERS = frozenset({"gclid", "fbclid", "msclkid"})

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = _UNRESERVED | frozenset(_SUB_DELIMS + ":@/")
# Inside one query name or value: '&' separates parameters and '=' (in a name) the value.
_QUERY_SAFE = _UNRESERVED | frozenset("!$'()*+,;:@/?=")
_HEX = frozenset("0123456789abcdefABCDEF")
_HOST_CHARS = re.compile(r"[a-z0-9._-]+")
_CONTROL = re.compile(r"[\t\n\r]")


class UrlError(SourceError, ValueError):
    """The text is not an absolute http(s) URL that kbsync can fetch."""


def canonicalize(url: str, base: str | None = None) -> str:
    """The canonical form of ``url`` (resolved against ``base`` when given); see the module doc.

    Raises :class:`UrlError` for anything but a well-formed http(s) URL with a host.
    """
    # Browsers strip ASCII tab and newlines anywhere in a URL and surrounding spaces.
    text = _CONTROL.sub("", url).strip()
    try:
        if base is not None:
            # urljoin parses both, and raises ValueError for a malformed [host].
            text = urljoin(base, text)
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UrlError(f"malformed URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UrlError(f"not an http(s) URL: {url!r}")
    if not parts.hostname:
        raise UrlError(f"URL without a host: {url!r}")
    host = canonical_host(parts.hostname)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = _normalize_escapes(_remove_dot_segments(parts.path or "/"), _PATH_SAFE)
    return urlunsplit((scheme, netloc, path, _normalize_query(parts.query), ""))


def canonical_host(host: str) -> str:
    """The one spelling of a host (lower case, IDNA, dotted IPv4, compressed IPv6)."""
    name = _percent_decode(host).lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if ":" in name:
        if "%" in name:
            raise UrlError(f"IPv6 zone identifiers are not supported: {host!r}")
        try:
            return str(ipaddress.IPv6Address(name))
        except ValueError as exc:
            raise UrlError(f"malformed IPv6 address {host!r}") from exc
    # IDNA mapping first, as browsers do: it can turn a name into a number
    # ("0xf\u00b91", full-width or circled digits), which must then parse as an address.
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise UrlError(f"host is not a valid international domain name: {host!r}") from exc
    if name.endswith(".") and len(name) > 1:
        name = name[:-1]
    ipv4 = parse_ipv4(name)
    if ipv4 is not None:
        return str(ipv4)
    if not _HOST_CHARS.fullmatch(name) or ".." in name or name.startswith(".") or (
        name.endswith(".")  # one trailing dot is the root label, dropped above; two is empty
    ):
        raise UrlError(f"malformed host {host!r}")
    return name


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spells in any form ``inet_aton`` or a browser accepts, else None.

    This is the URL Standard's IPv4 parser: up to four dot-separated parts,
    each decimal, octal (leading ``0``) or hexadecimal (``0x``), the last
    part filling the remaining bytes. A host whose last label is a number
    but which does not parse is an error, not a name: resolvers would treat
    it as an address in ways that differ between platforms.
    """
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts = parts[:-1]
    last = parts[-1]
    if not (last.isdecimal() and last.isascii()) and not re.fullmatch(r"0[xX][0-9a-fA-F]*", last):
        return None
    if len(parts) > 4:
        raise UrlError(f"malformed IPv4 address {host!r}")
    numbers = [_ipv4_part(p, host) for p in parts]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise UrlError(f"IPv4 address out of range: {host!r}")
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - i)
    return ipaddress.IPv4Address(value)


def host_of(url: str) -> str:
    """The canonical host of a canonical URL (without brackets or port)."""
    host = urlsplit(url).hostname
    if not host:
        raise UrlError(f"URL without a host: {url!r}")
    return host


def port_of(url: str) -> int:
    """The port a canonical URL connects to (its scheme's default when it names none)."""
    parts = urlsplit(url)
    return parts.port or DEFAULT_PORTS[parts.scheme]


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a canonical URL: the unit of robots.txt."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True, slots=True)
class Scope:
    """Which URLs belong to the source: an allowed host, and one of the path prefixes if any.

    Hosts compare by canonical name, ignoring the port; an entry ``*.example.com``
    also allows every subdomain of ``example.com`` (but not ``example.com``
    itself). Path prefixes compare against the canonical path, case sensitively.
    """

    hosts: frozenset[str]
    path_prefixes: tuple[str, ...] = ()

    @classmethod
    def build(cls, hosts: Iterable[str], path_prefixes: Iterable[str] = ()) -> Scope:
        """A scope from user-supplied hosts and prefixes, normalized; UrlError when malformed."""
        canonical: set[str] = set()
        for h in hosts:
            h = h.strip()
            if h.startswith("*."):
                canonical.add("*." + canonical_host(h[2:]))
            else:
                canonical.add(canonical_host(h))
        prefixes: list[str] = []
        for p in path_prefixes:
            if not p.startswith("/"):
                raise UrlError(f"a path prefix must start with '/': {p!r}")
            prefixes.append(_normalize_escapes(p, _PATH_SAFE))
        return cls(frozenset(canonical), tuple(prefixes))

    def allows_host(self, host: str) -> bool:
        """Whether the canonical ``host`` is one of the allowed hosts."""
        if host in self.hosts:
            return True
        return any(h.startswith("*.") and host.endswith(h[1:]) for h in self.hosts)

    def contains(self, url: str) -> bool:
        """Whether the canonical ``url`` is inside the scope."""
        parts = urlsplit(url)
        if not parts.hostname or not self.allows_host(parts.hostname):
            return False
        return not self.path_prefixes or any(parts.path.startswith(p) for p in self.path_prefixes)


def _ipv4_part(part: str, host: str) -> int:
    try:
        if part[:2] in ("0x", "0X"):
            return int(part[2:] or "0", 16)
        if len(part) > 1 and part.startswith("0"):
            return int(part[1:], 8)
        if part.isdecimal() and part.isascii():
            return int(part)
    except ValueError:
        pass
    raise UrlError(f"malformed IPv4 address {host!r}")


def _percent_decode(text: str) -> str:
    if "%" not in text:
        return text
    out = bytearray()
    i = 0
    raw = text.encode("utf-8")
    while i < len(raw):
        if raw[i : i + 1] == b"%" and len(raw[i + 1 : i + 3]) == 2 and _is_hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UrlError(f"malformed escapes in {text!r}") from exc


def _is_hex(pair: bytes) -> bool:
    return all(chr(b) in _HEX for b in pair)


def _normalize_escapes(text: str, safe: frozenset[str]) -> str:
    """Decode escapes of unreserved characters, upper-case the others, escape what is unsafe."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        pair = text[i + 1 : i + 3]
        if c == "%" and len(pair) == 2 and all(ch in _HEX for ch in pair):
            decoded = chr(int(pair, 16))
            out.append(decoded if decoded in _UNRESERVED else "%" + pair.upper())
            i += 3
            continue
        if c in safe:
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def _normalize_query(query: str) -> str:
    params: list[tuple[str, str]] = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, eq, value = piece.partition("=")
        name = _normalize_escapes(name, _QUERY_SAFE - {"="})
        lowered = _percent_decode_lenient(name).lower()
        if lowered.startswith("utm_") or lowered in TRACKING_PARAMETERS:
            continue
        params.append((name, eq + _normalize_escapes(value, _QUERY_SAFE)))
    params.sort(key=lambda p: p[0])
    return "&".join(name + rest for name, rest in params)


def _percent_decode_lenient(text: str) -> str:
    try:
        return _percent_decode(text)
    except UrlError:
        return text


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, on whole segments (``.`` and ``..`` also in escaped form)."""
    if "." not in path and "%2e" not in path.lower():
        return path
    segments = path.split("/")
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        low = seg.lower()
        if low in (".", "%2e"):
            if last:
                out.append("")
            continue
        if low in ("..", ".%2e", "%2e.", "%2e%2e"):
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result
