"""HTTP requests with every safeguard a crawler of strangers' servers needs.

- Every request passes its host's politeness gate (:mod:`.politeness`).
- The host is resolved with ``getaddrinfo`` and every address checked by the
  address guard (:mod:`.addresses`) before connecting; the connection goes to
  one of the checked addresses (the Host header and the TLS server name stay
  the host's name), so a second DNS answer cannot redirect it.
- One deadline (``timeout``) covers the whole exchange: resolution,
  connection, headers and body. A server that drips one byte at a time
  cannot hold a crawl longer than that.
- Redirects are followed by hand (at most ``max_redirects``, loops
  detected), each target checked again by the guard and by the caller's hop
  check (scope, robots.txt). After only permanent redirects (301, 308) the
  key is the new URL; after any temporary one (302, 303, 307) it stays the
  URL last reached permanently.
- Bodies are read raw and decoded here (:mod:`.decoding`), with a cap on the
  bytes received (``max_bytes``, checked against Content-Length first) and a
  cap on the bytes decoded (``max_decompressed_bytes``).
- A timeout, a connection error or a transient status (5xx, 429) is tried
  again, at most three times a URL in a crawl and within its retry budget
  (:mod:`.retries`); a ``Retry-After`` of a 429 or 503 (delta seconds or an HTTP
  date) of at most ``retry_after_cap`` seconds makes the whole host wait that
  long, retried or not, and one beyond the cap is not waited for.
- Environment proxies are not used (``trust_env=False``): the address guard
  must judge the address actually connected to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from kbsync.errors import SourceError
from kbsync.model import Validators
from kbsync.sources.web.addresses import AddressRefused, resolve
from kbsync.sources.web.config import WebConfig
from kbsync.sources.web.decoding import ACCEPT_ENCODING, DecodingError, decoder_for
from kbsync.sources.web.politeness import HostGates, Pass
from kbsync.sources.web.retries import Retries, backoff, is_transient_status
from kbsync.sources.web.urls import DEFAULT_PORTS, UrlError, canonicalize, origin_of

__all__ = [
    "REDIRECT_STATUSES",
    "RETRY_STATUSES",
    "Failure",
    "FetchError",
    "Fetcher",
    "Response",
    "parse_content_type",
    "retry_after_seconds",
]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
PERMANENT_REDIRECTS = frozenset({301, 308})
RETRY_STATUSES = frozenset({429, 503})
DRAIN_BYTES = 65_536
"""An unread body up to this size is read anyway, so its connection can serve the next request."""
DRAIN_SECONDS = 1.0
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8"

HopCheck = Callable[[str], Awaitable[None]]
ValidatorsFor = Callable[[str], Validators | None]


class Failure(StrEnum):
    """Why a fetch gave no HTTP answer."""

    NETWORK = "network"
    """Resolution, connection, timeout, reset, truncated or malformed response: may pass."""
    REFUSED = "refused"
    """The address guard refused the host or an address it resolves to."""
    SCOPE = "scope"
    """A redirect left the crawl's scope."""
    ROBOTS = "robots"
    """A redirect led to an address robots.txt disallows."""
    REDIRECT = "redirect"
    """A redirect loop, too many redirects, or a Location that is no http(s) URL."""
    TOO_LARGE = "too-large"
    """The body passed max_bytes, or decoded past max_decompressed_bytes."""
    BAD_BODY = "bad-body"
    """A corrupt compressed body or an unsupported Content-Encoding."""


class FetchError(SourceError):
    """A URL could not be fetched; ``reason`` says why in words, ``kind`` in a category."""

    def __init__(self, url: str, reason: str, kind: Failure) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Response:
    """The final answer to a request, after redirects.

    ``requested`` is the URL asked for, ``url`` the one that answered, ``key``
    the URL reached by permanent redirects only (the document's key).
    ``body`` is None unless the answer was a 200 (or 203) to a GET of an
    accepted media type. ``conditional`` tells whether validators were sent.
    """

    requested: str
    url: str
    key: str
    status: int
    media_type: str
    charset: str | None
    validators: Validators | None
    body: bytes | None
    conditional: bool = False
    retry_after: str | None = None
    attempts: int = 1
    """The requests of ``url`` this crawl made, this one included (more than one after a
    transient failure: see :mod:`.retries`)."""
    not_retried: str | None = None
    """Why a transient failure was not tried again, when the count of attempts does not say."""
    typed: bool = True
    """Whether the server declared a Content-Type (else ``media_type`` is the default)."""


@dataclass(frozen=True, slots=True)
class _Answer:
    """One exchange, before redirects are followed."""

    status: int
    headers: httpx.Headers
    body: bytes | None
    conditional: bool
    attempts: int = 1
    not_retried: str | None = None


class _Borrowed(httpx.AsyncBaseTransport):
    """A caller's transport, shared by the crawl's clients and never closed by them."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """The caller owns the transport."""


class Fetcher:
    """The HTTP side of one crawl: clients per origin, opened lazily, closed together."""

    def __init__(
        self,
        config: WebConfig,
        gates: HostGates,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._config = config
        self._gates = gates
        self._transport = transport
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._retries = Retries(config.retry_budget)

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every client (and the connections they hold)."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.aclose()

    async def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        validators_for: ValidatorsFor | None = None,
        on_hop: HopCheck | None = None,
        follow: bool = True,
        media_types: frozenset[str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> Response:
        """Fetch the canonical ``url``, following redirects; FetchError when there is no answer.

        ``validators_for(key)`` gives the validators to send for the document
        at ``key`` (re-evaluated when a permanent redirect changes the key).
        ``on_hop(target)`` may raise FetchError to stop at a redirect target.
        The body is read only for ``media_types`` (None: any), up to
        ``max_bytes`` (default: the configured cap); with ``truncate`` a
        longer body is cut there instead of failing.
        """
        limit = self._config.max_bytes if max_bytes is None else max_bytes
        current = key = url
        permanent = True
        visited = {url}
        hops = 0
        while True:
            validators = validators_for(key) if validators_for is not None else None
            answer = await self._request(
                method, current, validators, media_types=media_types, limit=limit, truncate=truncate
            )
            location = answer.headers.get("location")
            if not (follow and answer.status in REDIRECT_STATUSES and location):
                return _response(url, current, key, answer)
            try:
                target = canonicalize(location, base=current)
            except UrlError as exc:
                raise FetchError(
                    url,
                    f"HTTP {answer.status} redirect from {current} to an unusable address: {exc}",
                    Failure.REDIRECT,
                ) from exc
            if target in visited:
                raise FetchError(
                    url, f"redirect loop: {current} redirects back to {target}", Failure.REDIRECT
                )
            hops += 1
            if hops > self._config.max_redirects:
                raise FetchError(
                    url,
                    f"more than max_redirects={self._config.max_redirects} redirects "
                    f"(the last from {current} to {target})",
                    Failure.REDIRECT,
                )
            visited.add(target)
            if permanent and answer.status in PERMANENT_REDIRECTS:
                key = target
            else:
                permanent = False
            if answer.status == 303 and method != "HEAD":
                method = "GET"
            if on_hop is not None:
                await on_hop(target)
            current = target

    async def _request(
        self,
        method: str,
        url: str,
        validators: Validators | None,
        *,
        media_types: frozenset[str] | None,
        limit: int,
        truncate: bool,
    ) -> _Answer:
        """One exchange, tried again while it fails transiently (see :mod:`.retries`)."""
        retries, cap = self._retries, self._config.retry_after_cap
        while True:
            try:
                answer = await self._exchange(method, url, validators, media_types, limit, truncate)
            except FetchError as exc:
                if exc.kind is not Failure.NETWORK:
                    raise
                if retries.take(url):
                    await self._gates.sleep(backoff(retries.attempts(url) - 1, cap))
                    continue
                raise FetchError(url, exc.reason + _tries(retries.attempts(url),
                                                          retries.why_not(url)), exc.kind) from exc
            attempts = retries.attempts(url)
            if not is_transient_status(answer.status):
                return replace(answer, attempts=attempts)
            value = answer.headers.get("retry-after")
            asked = retry_after_seconds(value) if answer.status in RETRY_STATUSES else None
            if asked is not None and asked > cap:
                return replace(answer, attempts=attempts, not_retried=(
                    f"with Retry-After {value!r}, beyond retry_after_cap={cap:g} s, "
                    "so not retried"))
            if asked is not None:  # the server asked it of every request to the host
                self._gates.get(_host(url)).defer(asked)
            if not retries.take(url):
                return replace(answer, attempts=attempts, not_retried=retries.why_not(url))
            if asked is None:
                await self._gates.sleep(backoff(retries.attempts(url) - 1, cap))

    async def _exchange(
        self,
        method: str,
        url: str,
        validators: Validators | None,
        media_types: frozenset[str] | None,
        limit: int,
        truncate: bool,
    ) -> _Answer:
        timeout = self._config.timeout
        async with self._gates.get(_host(url)).slot() as granted:
            try:
                async with asyncio.timeout(timeout):
                    return await self._connect_and_read(
                        method, url, validators, media_types, limit, truncate, granted
                    )
            except TimeoutError as exc:
                raise FetchError(
                    url, f"timed out: no complete answer within {timeout:g} s", Failure.NETWORK
                ) from exc

    async def _connect_and_read(
        self,
        method: str,
        url: str,
        validators: Validators | None,
        media_types: frozenset[str] | None,
        limit: int,
        truncate: bool,
        granted: Pass,
    ) -> _Answer:
        parts = urlsplit(url)
        host = _host(url)
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        try:
            addresses = await resolve(host, port, self._config.addresses)
        except AddressRefused as exc:
            raise FetchError(url, f"address refused: {exc}", Failure.REFUSED) from exc
        except OSError as exc:
            raise FetchError(url, f"cannot resolve {host}: {exc}", Failure.NETWORK) from exc
        headers = {
            # The request goes to an address; the server still sees the name.
            "Host": parts.netloc,
            "User-Agent": self._config.user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": ACCEPT_ENCODING,
        }
        if validators is not None and validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators is not None and validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
        conditional = "If-None-Match" in headers or "If-Modified-Since" in headers
        extensions: dict[str, Any] = {"sni_hostname": host} if parts.scheme == "https" else {}

        async def trace(event: str, info: Mapping[str, Any]) -> None:
            # The politeness pause runs from here: the request's headers are on the wire.
            if event.endswith("send_request_headers.complete"):
                granted.sent()

        extensions["trace"] = trace
        client = self._client(origin_of(url))
        failure: Exception | None = None
        for address in addresses:
            pinned = f"[{address}]" if ":" in address else address
            target = urlunsplit((parts.scheme, f"{pinned}:{port}", parts.path, parts.query, ""))
            request = client.build_request(method, target, headers=headers, extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                failure = exc  # try the host's next address
                continue
            except httpx.HTTPError as exc:
                raise _network_error(url, exc) from exc
            granted.sent()  # for a transport that does not trace: sent, since answered
            body = None
            try:
                if method == "GET" and response.status_code in (200, 203):
                    media_type, _ = parse_content_type(response.headers.get("content-type"))
                    if media_types is None or media_type in media_types:
                        body = await self._read_body(url, response, limit, truncate)
                answer = _Answer(response.status_code, response.headers, body, conditional)
            except httpx.HTTPError as exc:
                raise _network_error(url, exc) from exc
            finally:
                if body is None:
                    await _drain(response)
                with contextlib.suppress(httpx.HTTPError):  # the connection is dropped anyway
                    await response.aclose()
            return answer
        raise FetchError(url, f"cannot connect to {host}: {failure}", Failure.NETWORK)

    async def _read_body(
        self, url: str, response: httpx.Response, limit: int, truncate: bool
    ) -> bytes:
        declared = response.headers.get("content-length", "").strip()
        if not truncate and declared.isdigit() and int(declared) > limit:
            raise FetchError(
                url,
                f"body of {declared} bytes (Content-Length) exceeds max_bytes={limit}",
                Failure.TOO_LARGE,
            )
        cap = limit if truncate else self._config.max_decompressed_bytes
        try:
            decoder = decoder_for(response.headers.get("content-encoding"), cap, truncate=truncate)
            received = 0
            async for chunk in response.aiter_raw():
                received += len(chunk)
                if received > limit:
                    if truncate:
                        decoder.feed(chunk[: len(chunk) - (received - limit)])
                        return decoder.finish(partial=True)
                    raise FetchError(
                        url,
                        f"body exceeds max_bytes={limit} (stopped reading at {received} bytes)",
                        Failure.TOO_LARGE,
                    )
                decoder.feed(chunk)
            return decoder.finish()
        except DecodingError as exc:
            if exc.over_cap:
                raise FetchError(
                    url, f"{exc} (a compression bomb?); stopped decoding", Failure.TOO_LARGE
                ) from exc
            raise FetchError(url, str(exc), Failure.BAD_BODY) from exc

    def _client(self, origin: str) -> httpx.AsyncClient:
        """One client per origin: connections (and TLS sessions) are never shared across names."""
        client = self._clients.get(origin)
        if client is None:
            connections = self._config.per_host_connections
            transport: httpx.AsyncBaseTransport = (
                _Borrowed(self._transport)
                if self._transport is not None
                else httpx.AsyncHTTPTransport(
                    retries=0,
                    limits=httpx.Limits(
                        max_connections=connections, max_keepalive_connections=connections
                    ),
                )
            )
            client = httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,
                timeout=httpx.Timeout(self._config.timeout),
                trust_env=False,
            )
            self._clients[origin] = client
        return client


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """Media type (lower case, no parameters; ``text/html`` when absent) and charset parameter."""
    if not value or not value.split(";", 1)[0].strip():
        return "text/html", None
    media_type, *params = value.split(";")
    charset = None
    for param in params:
        name, _, val = param.partition("=")
        if name.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return media_type.strip().lower(), charset


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (delta seconds or an HTTP date), or None."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _response(requested: str, url: str, key: str, answer: _Answer) -> Response:
    headers = answer.headers
    media_type, charset = parse_content_type(headers.get("content-type"))
    etag = headers.get("etag")
    last_modified = headers.get("last-modified")
    validators = Validators(etag, last_modified) if etag or last_modified else None
    return Response(
        requested=requested,
        url=url,
        key=key,
        status=answer.status,
        media_type=media_type,
        charset=charset,
        validators=validators,
        body=answer.body,
        conditional=answer.conditional,
        retry_after=headers.get("retry-after"),
        attempts=answer.attempts,
        not_retried=answer.not_retried,
        typed=bool(headers.get("content-type", "").strip()),
    )


async def _drain(response: httpx.Response) -> None:
    """Read a short unread body (an error page, a redirect's note) so the connection is reused.

    A connection is kept alive only when its last response was read to the end;
    a body longer than DRAIN_BYTES is not worth the bytes, and its connection is closed.
    """
    if response.is_closed or response.is_stream_consumed:
        return
    declared = response.headers.get("content-length", "").strip()
    bodiless = response.status_code in (204, 304) or response.request.method == "HEAD"
    chunked = "chunked" in response.headers.get("transfer-encoding", "").lower()
    if not (bodiless or chunked or (declared.isdigit() and int(declared) <= DRAIN_BYTES)):
        return  # long, or delimited by the end of the connection: not worth waiting for
    # A short deadline of its own: a dripping error page must not turn an answer into a timeout.
    with contextlib.suppress(httpx.HTTPError, TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read > DRAIN_BYTES:
                    return


def _tries(attempts: int, why_not: str | None) -> str:
    """What a failure's message adds about its retries: `` (3 attempts)``, why not retried."""
    text = f" ({attempts} attempts)" if attempts > 1 else ""
    return text + (f"; {why_not}" if why_not else "")


def _host(url: str) -> str:
    host = urlsplit(url).hostname
    if not host:
        raise FetchError(url, "URL without a host", Failure.REDIRECT)
    return host


def _network_error(url: str, exc: httpx.HTTPError) -> FetchError:
    """A FetchError that says in words what went wrong on the wire."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        reason = f"timed out ({type(exc).__name__}: {detail})"
    elif isinstance(exc, httpx.RemoteProtocolError):
        reason = f"truncated or malformed response: {detail}"
    elif isinstance(exc, httpx.ReadError | httpx.WriteError):
        reason = f"connection lost while reading the response (reset by the server?): {detail}"
    elif isinstance(exc, httpx.ConnectError):
        reason = f"cannot connect: {detail}"
    else:
        reason = f"{type(exc).__name__}: {detail}"
    return FetchError(url, reason, Failure.NETWORK)
