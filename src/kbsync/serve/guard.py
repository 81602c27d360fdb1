"""Checks that keep other web sites, and other local processes, from acting through the dashboard.

A page on another site can make the browser send requests to 127.0.0.1, and a
name that resolves to 127.0.0.1 (DNS rebinding) can even read the answers. So
every request must name an expected host, and every action (a POST) must come
from the dashboard's own pages: same-origin ``Origin`` / ``Sec-Fetch-Site``
headers when the browser sends them, and always this process's write token.

Any process on the machine can ask a loopback server for a page, so the write
token is handed only to the browser the user opened the address ``kbsync serve``
printed in: that address carries a second secret (``?token=``, as Jupyter's
does), which is exchanged for an HttpOnly, SameSite=Strict cookie, and every
action needs that cookie as well. The pages, and ``GET /api/actions``, carry the
write token only for a request with the cookie.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["LOGIN_PARAMETER", "TOKEN_FIELD", "TOKEN_HEADER", "Guard", "is_loopback"]

TOKEN_FIELD = "csrf_token"
TOKEN_HEADER = "x-csrf-token"
LOGIN_PARAMETER = "token"
"""The query parameter of the address ``kbsync serve`` prints that carries :attr:`Guard.login`."""
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _hostname(netloc: str) -> str | None:
    try:
        return urlsplit("//" + netloc).hostname
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Guard:
    """The host names a request may address, and the per-process token actions need."""

    bound: str = "127.0.0.1"
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """The write token an action carries (a form field or a header)."""
    login: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """The secret of the printed address, and then of the browser's cookie."""

    @staticmethod
    def cookie_name(port: int | None) -> str:
        """The cookie of the dashboard on ``port`` (a browser sends a cookie of 127.0.0.1 to
        every port of it, so two dashboards on one machine need two names)."""
        return f"kbsync-dashboard-{port or 0}"

    def signed_in(self, cookie: str | None) -> bool:
        """Whether ``cookie`` (its value, or None) is this process's login secret."""
        return cookie is not None and hmac.compare_digest(cookie, self.login)

    def host_allowed(self, headers: Mapping[str, str]) -> bool:
        """Whether the ``Host`` header names this server (any name when bound to all
        interfaces, where clients may use names this process cannot know)."""
        if self.bound in _WILDCARDS:
            return True
        name = _hostname(headers.get("host", ""))
        return name is not None and name in (_LOOPBACK_NAMES | {self.bound.strip("[]").lower()})

    def refusal(self, headers: Mapping[str, str], submitted: str | None,
                cookie: str | None) -> str | None:
        """Why an action request must be refused, or None when it may proceed; ``cookie``
        is the value of the request's :meth:`cookie_name` cookie."""
        if not self.host_allowed(headers):
            return "unexpected Host header"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"cross-site request ({site})"
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != headers.get("host"):
            return "the request comes from another origin"
        if not self.signed_in(cookie):
            return ("not signed in: open the address `kbsync serve` printed (its ?token= "
                    "signs this browser in)")
        if not submitted or not hmac.compare_digest(submitted, self.token):
            return "missing or wrong CSRF token"
        return None
