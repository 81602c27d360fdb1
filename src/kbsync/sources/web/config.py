"""The validated settings of a web source, as one frozen value every part of the crawl reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kbsync.errors import ParameterError
from kbsync.schedule import DEFAULT_MAX_INTERVAL, DEFAULT_MIN_INTERVAL, Cadence
from kbsync.sources.web.addresses import AddressPolicy
from kbsync.sources.web.urls import Scope, UrlError, canonicalize, host_of

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "DEFAULT_USER_AGENT",
    "WebConfig",
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
    """Every setting of :class:`~kbsync.sources.web.WebSource`, checked and canonical."""

    seeds: tuple[str, ...]
    sitemaps: tuple[str, ...]
    scope: Scope
    addresses: AddressPolicy
    max_pages: int = 1000
    max_depth: int = 5
    user_agent: str = DEFAULT_USER_AGENT
    per_host_connections: int = 2
    max_connections: int = 8
    delay: float = 0.25
    timeout: float = 10.0
    max_bytes: int = 10_000_000
    max_decompressed_bytes: int = 50_000_000
    max_redirects: int = 5
    retry_after_cap: float = 60.0
    head_mode: bool = False
    revalidate_all: bool = False
    soft_404_check: bool = True
    use_robots_sitemaps: bool = True
    media_types: frozenset[str] | None = DEFAULT_MEDIA_TYPES
    robots_max_age: float = 86_400.0
    min_interval: float = DEFAULT_MIN_INTERVAL
    max_interval: float = DEFAULT_MAX_INTERVAL

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


def build_address_policy(allow: bool | str | Iterable[str]) -> AddressPolicy:
    """The address guard for ``allow_private_addresses``; ParameterError when malformed."""
    try:
        return AddressPolicy.build(allow)
    except ValueError as exc:
        raise ParameterError(f"invalid allow_private_addresses: {exc}") from exc
