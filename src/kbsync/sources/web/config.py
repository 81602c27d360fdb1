"""The validated settings of a web source, as one frozen value every part of the crawl reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from kbsync.core.schedule import DEFAULT_MAX_INTERVAL, DEFAULT_MIN_INTERVAL, Cadence
from kbsync.errors import ParameterError
from kbsync.sources.web.addresses import AddressPolicy
from kbsync.sources.web.urls import Scope, UrlError, canonicalize, host_of, port_of

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "DEFAULT_USER_AGENT",
    "WebConfig",
    "WebSettings",
    "build_address_policy",
    "build_scope",
    "canonical_urls",
]

DEFAULT_USER_AGENT = "kbsync/0.1 (+https://github.com/kbsync)"
DEFAULT_MEDIA_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "text/plain",
        "text/markdown",
        "text/x-markdown",
        "application/pdf",
    }
)
"""Media types listed as documents; other answers (images, archives) are skipped unread."""


@dataclass(frozen=True, slots=True)
class WebConfig:
    """Every setting of :class:`~kbsync.sources.web.WebSource`, checked and canonical (made by
    :meth:`WebSettings.validated`, where the defaults are)."""

    seeds: tuple[str, ...]
    sitemaps: tuple[str, ...]
    scope: Scope
    addresses: AddressPolicy
    max_pages: int
    max_depth: int
    user_agent: str
    per_host_connections: int
    max_connections: int
    delay: float
    timeout: float
    max_bytes: int
    max_decompressed_bytes: int
    max_redirects: int
    retry_after_cap: float
    retry_budget: int
    head_mode: bool
    revalidate_all: bool
    soft_404_check: bool
    use_robots_sitemaps: bool
    media_types: frozenset[str] | None
    robots_max_age: float
    min_interval: float
    max_interval: float

    def __post_init__(self) -> None:
        if not self.seeds and not self.sitemaps:
            raise ParameterError("a web source needs at least one seed or sitemap URL")
        self.check()

    def check(self) -> None:
        """Raise ParameterError for a setting out of range."""
        positive = {
            "max_pages": self.max_pages,
            "per_host_connections": self.per_host_connections,
            "max_connections": self.max_connections,
            "timeout": self.timeout,
            "max_bytes": self.max_bytes,
            "max_decompressed_bytes": self.max_decompressed_bytes,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ParameterError(f"{name} must be positive, got {value!r}")
        non_negative = {
            "max_depth": self.max_depth,
            "delay": self.delay,
            "max_redirects": self.max_redirects,
            "retry_after_cap": self.retry_after_cap,
            "retry_budget": self.retry_budget,
            "robots_max_age": self.robots_max_age,
        }
        for name, value in non_negative.items():
            if not value >= 0:
                raise ParameterError(f"{name} must not be negative, got {value!r}")
        agent = self.user_agent
        if not agent.strip() or any(c in agent for c in "\r\n\0") or not agent.isascii():
            raise ParameterError(f"user_agent must be one line of ASCII text, got {agent!r}")
        self.cadence  # noqa: B018 - checks the bounds of the revisit schedule

    @property
    def cadence(self) -> Cadence:
        """The revisit schedule's bounds (``min_interval``, ``max_interval``, in seconds)."""
        return Cadence(self.min_interval, self.max_interval)


@dataclass(frozen=True, slots=True)
class WebSettings:
    """The settings of a website source: a ``[[sources]]`` table of ``kind = "web"``, typed;
    :meth:`validated` checks them into a :class:`WebConfig`.

    Beyond the obvious ones:

    - ``urls``: the seeds, where the crawl starts.
    - ``allowed_hosts``: hosts whose pages belong to the source (default: the
      hosts of the seeds and sitemaps; ``*.example.com`` for subdomains);
      ``path_prefixes`` narrow it to paths starting with one of them.
    - ``allow_private_addresses``: false refuses local, private and metadata
      addresses; true allows every address but cloud metadata services; a
      list of addresses or networks (``["127.0.0.1"]``) allows those, on
      the ports 80 and 443 and those of the seeds and sitemaps; an entry with a port
      (``"127.0.0.1:8000"``, ``"[::1]:8000"``) allows that port only.
    - ``per_host_connections`` and ``delay`` (seconds between request starts
      to one host; a larger Crawl-delay wins) are per host; ``max_connections``
      bounds the whole crawl.
    - ``timeout`` is the total deadline of one request, body included.
    - ``retry_budget``: the retries a crawl may make in all. A timeout, a connection
      error, a 5xx or a 429 is tried again up to twice per URL in one crawl, after
      ``Retry-After`` (at most ``retry_after_cap`` seconds) or 1 s, then 2 s; 0 turns
      retrying off (see :mod:`kbsync.sources.web.retries`).
    - ``head_mode``: revalidate a known page with a conditional HEAD first and
      GET only when it changed (for servers that compute bodies even for a 304).
    - ``revalidate_all``: send no validators, so every page is downloaded and
      compared by content: the periodic full revalidation.
    - ``media_types``: answers of other types are skipped unread (None: all).
    - ``use_robots_sitemaps``: also read the sitemaps robots.txt of the seeds' origins names.
    - ``min_interval``/``max_interval`` (seconds, default 1 hour / 7 days): the bounds
      of each page's revisit interval (:mod:`kbsync.core.schedule`), which ``list_due`` obeys.

    The collections are tuples (a table's lists); a lone string is one URL, host or prefix.
    """

    urls: tuple[str, ...] = ()
    sitemaps: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] | None = None
    path_prefixes: tuple[str, ...] = ()
    max_pages: int = 1000
    max_depth: int = 5
    user_agent: str = DEFAULT_USER_AGENT
    allow_private_addresses: bool | tuple[str, ...] = False
    per_host_connections: int = 2
    max_connections: int = 8
    delay: float = 0.25
    timeout: float = 10.0
    max_bytes: int = 10_000_000
    max_decompressed_bytes: int = 50_000_000
    max_redirects: int = 5
    retry_after_cap: float = 60.0
    retry_budget: int = 100
    head_mode: bool = False
    revalidate_all: bool = False
    soft_404_check: bool = True
    use_robots_sitemaps: bool = True
    media_types: tuple[str, ...] | None = tuple(sorted(DEFAULT_MEDIA_TYPES))
    robots_max_age: float = 86_400.0
    min_interval: float = DEFAULT_MIN_INTERVAL
    max_interval: float = DEFAULT_MAX_INTERVAL

    def __post_init__(self) -> None:
        self.validated()  # a setting out of range is refused when the table is read

    def validated(self) -> WebConfig:
        """The checked, canonical settings; ParameterError naming the one that is wrong."""
        seeds = canonical_urls(self.urls, "seed")
        sitemaps = canonical_urls(self.sitemaps, "sitemap")
        media = self.media_types
        return WebConfig(
            seeds=seeds, sitemaps=sitemaps,
            scope=build_scope(self.allowed_hosts, self.path_prefixes, (*seeds, *sitemaps)),
            addresses=build_address_policy(self.allow_private_addresses,
                                           {port_of(u) for u in (*seeds, *sitemaps)}),
            media_types=None if media is None else frozenset(t.lower() for t in media),
            **{f.name: getattr(self, f.name) for f in fields(WebConfig)
               if f.name not in _DERIVED})


# WebConfig's fields that validated() derives rather than copies.
_DERIVED = frozenset({"seeds", "sitemaps", "scope", "addresses", "media_types"})


def canonical_urls(urls: str | Iterable[str], what: str) -> tuple[str, ...]:
    """The canonical forms of user-supplied URLs, without repeats; ParameterError when malformed."""
    if isinstance(urls, str):
        urls = (urls,)
    out: list[str] = []
    for url in urls:
        try:
            canonical = canonicalize(url)
        except UrlError as exc:
            raise ParameterError(f"invalid {what} URL: {exc}") from exc
        if canonical not in out:
            out.append(canonical)
    return tuple(out)


def build_scope(
    allowed_hosts: str | Iterable[str] | None,
    path_prefixes: str | Iterable[str],
    urls: Iterable[str],
) -> Scope:
    """The scope: the given hosts, or by default the hosts of ``urls`` (seeds and sitemaps)."""
    if isinstance(allowed_hosts, str):
        allowed_hosts = (allowed_hosts,)
    if isinstance(path_prefixes, str):
        path_prefixes = (path_prefixes,)
    hosts = [host_of(u) for u in urls] if allowed_hosts is None else list(allowed_hosts)
    try:
        return Scope.build(hosts, path_prefixes)
    except UrlError as exc:
        raise ParameterError(f"invalid scope: {exc}") from exc


def build_address_policy(allow: bool | str | Iterable[str],
                         ports: Iterable[int] = ()) -> AddressPolicy:
    """The address guard for ``allow_private_addresses``, whose entries without a port admit
    the web's ports and ``ports`` (those of the source's URLs); ParameterError when malformed."""
    try:
        return AddressPolicy.build(allow, ports)
    except ValueError as exc:
        raise ParameterError(f"invalid allow_private_addresses: {exc}") from exc
