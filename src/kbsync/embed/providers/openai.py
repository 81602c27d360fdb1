"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint over HTTP.

OpenAI itself, Ollama, vLLM, Text Embeddings Inference and LM Studio all answer
``POST {base_url}/embeddings`` with ``{"model": …, "input": [...]}`` by
``{"data": [{"index": i, "embedding": [...]}, ...]}``, so one client serves them
all. Needs httpx (extra ``openai``, also part of ``web``), imported only when an
embedder is built so that ``kbsync.embed.providers`` imports without it.

The embedder batches, retries what may succeed on a second try, validates every
answer and raises :class:`~kbsync.errors.EmbeddingError` for anything it cannot
use: the sync engine keeps the old version of a document whose chunks could not
be embedded, so a clear error is all it needs. The API key is read from the
environment at each request and never kept, logged, or put into a message.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import email.utils
import json
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from kbsync.core.chunking.tokens import EstimatingCounter
from kbsync.core.identity import embedder_params_hash
from kbsync.core.normalize import scan_words
from kbsync.embed import Vectors
from kbsync.embed.providers.openai_settings import OpenAISettings, safe_url
from kbsync.errors import DependencyMissingError, EmbeddingError
from kbsync.model import ANY_NORM, UNIT_NORM, VectorNorm

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIEmbedder", "OpenAISettings"]

logger = logging.getLogger(__name__)

# Answers worth another try: rate limiting and the server-side faults that pass.
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_RETRY_AFTER_STATUS = frozenset({429, 503})
# The exponential backoff's ceiling stops growing here, however many retries are allowed.
_MAX_BACKOFF = 60.0
# Of an error answer, this much is read and the first _MESSAGE_CHARS characters quoted.
_ERROR_BODY_BYTES = 64 * 1024
_MESSAGE_CHARS = 300
_PROBE_TEXT = "kbsync dimension probe"
_REDACTED = "[redacted]"

FloatMatrix = npt.NDArray[np.float64]


class _RetryableError(Exception):
    """One attempt failed in a way another attempt may not (timeout, connection, 429, 5xx)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# Models whose tokenizer is cl100k_base (OpenAI's embedding models documentation).
_CL100K_MODELS = ("text-embedding-3-", "text-embedding-ada-002")

class OpenAIEmbedder:
    """An :class:`~kbsync.embed.Embedder` backed by an OpenAI-compatible embeddings API.

    ``settings`` (:class:`OpenAISettings`) say where and how; beyond them:

    - ``transport``: an httpx transport (tests, custom TLS); the embedder never closes it.
    - ``sleep``: how to wait between attempts; tests record the waits instead.
    - ``seed``: seeds the jitter. ``None`` seeds from the OS so that many clients
      recovering from one outage do not retry in lockstep; tests pass a number.
    """

    def __init__(
        self,
        settings: OpenAISettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        try:
            import httpx  # noqa: F401  (only to fail early and clearly)
        except ImportError as exc:
            raise DependencyMissingError(
                "the OpenAI-compatible embedder", "openai", exc.name or "httpx", exc
            ) from exc
        self.settings = settings
        self._base_url = settings.base_url.rstrip("/")
        self._url = f"{self._base_url}/embeddings"
        self._host = _host_of(settings.base_url)
        self._dimension = settings.dimension
        self._transport = transport
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._counter = EstimatingCounter()
        self._client: httpx.Client | None = None
        if settings.api_key_env is not None:
            _redact_in_http_logs(settings.api_key_env)
        self._params_hash = embedder_params_hash(
            "openai-embeddings", "normalize", settings.normalize, "extra_body",
            settings.extra_json)

    # -- the Embedder protocol --------------------------------------------------------

    @property
    def identity(self) -> str:
        """``openai:{model}@{host}:{params_hash}:{dimension}``; asks the server if need be.

        The host, not the whole address: the same model behind another path of one
        server gives the same vectors, while the same name on another server may not.
        """
        return f"openai:{self.settings.model}@{self._host}:{self._params_hash}:{self.dimension}"

    @property
    def norm(self) -> VectorNorm:
        """Unit length with ``normalize`` (kbsync normalizes each row itself); else the
        server's vectors, whose norms it does not promise."""
        return UNIT_NORM if self.settings.normalize else ANY_NORM

    @property
    def token_counter(self) -> str | None:
        """The chunker's counter of this model's tokens (``token_counter = "embedder"``):
        cl100k_base for OpenAI's own embedding models, None for a model it cannot name."""
        return "tiktoken:cl100k_base" if self.settings.model.startswith(_CL100K_MODELS) else None

    @property
    def dimension(self) -> int:
        """The vector size, given or discovered (one probe request, then cached)."""
        if self._dimension is None:
            self._embed_batch([_PROBE_TEXT])
        assert self._dimension is not None  # set by the first valid answer
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        """The model's input window in tokens: chunk limits must stay within it."""
        return self.settings.max_input_tokens

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        return self.settings.model

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens of each text (see ``batch_tokens``); the server's tokenizer is remote.

        OpenAI's embedding models use cl100k_base, which the estimate tracks; for
        other servers' models it is an approximation like any other.
        """
        return [int(self._counter.count(scan_words(text)).sum()) for text in texts]

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order; L2-normalized when ``normalize``.

        The empty string gets a zero row without a request (APIs refuse empty input).
        Any failing batch fails the call: no partial result is returned.
        """
        texts = list(texts)
        pending = [i for i, text in enumerate(texts) if text]
        results: list[tuple[list[int], Vectors]] = []
        for batch in self._plan(texts, pending):
            results.append((batch, self._embed_batch([texts[i] for i in batch])))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for batch, vectors in results:
            out[batch] = vectors
        return out

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool (a transport passed in stays open: it is the caller's)."""
        client, self._client = self._client, None
        if client is not None and self._transport is None:
            client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(model={self.settings.model!r}, base_url={safe_url(self._base_url)!r}, "
            f"api_key_env={self.settings.api_key_env!r})"
        )

    # -- batching -----------------------------------------------------------------------

    def _plan(self, texts: Sequence[str], indices: Sequence[int]) -> list[list[int]]:
        """Split ``indices`` into consecutive batches bounded by count and estimated tokens."""
        batches: list[list[int]] = []
        batch: list[int] = []
        tokens = 0
        estimates = self.count_tokens([texts[i] for i in indices])
        for i, estimate in zip(indices, estimates, strict=True):
            n = max(1, estimate)
            full = len(batch) >= self.settings.batch_size
            if batch and (full or tokens + n > self.settings.batch_tokens):
                batches.append(batch)
                batch, tokens = [], 0
            batch.append(i)
            tokens += n
        if batch:
            batches.append(batch)
        return batches

    # -- one batch: retries ---------------------------------------------------------------

    def _embed_batch(self, texts: list[str]) -> Vectors:
        """Vectors of one batch, retrying transient failures; raises EmbeddingError."""
        payload = json.dumps(
            {"model": self.settings.model, "input": texts, **self.settings.extra_body},
            ensure_ascii=False,
        ).encode("utf-8")
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            key = self._api_key()
            try:
                return self._attempt(payload, len(texts), key)
            except _RetryableError as exc:
                reason = _redact(str(exc), key)
                if attempt + 1 == attempts:
                    raise self._error(
                        f"failed after {attempts} attempt{'s' if attempts > 1 else ''}: {reason}",
                        key,
                    ) from None
                wait = self._wait(attempt, exc.retry_after)
                logger.warning(
                    "embedding request to %s failed (%s); retry %d of %d in %.2f s",
                    self._host,
                    reason,
                    attempt + 1,
                    self.settings.max_retries,
                    wait,
                )
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, retry: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: the server's Retry-After, else full jitter."""
        if retry_after is not None:
            return min(retry_after, self.settings.retry_after_cap)
        ceiling = min(self.settings.backoff * 2.0**retry, _MAX_BACKOFF)
        return self._rng.uniform(0.0, ceiling)

    def _api_key(self) -> str | None:
        """The key, read now (so a rotated key is picked up); ``None`` when unset or empty."""
        if self.settings.api_key_env is None:
            return None
        return os.environ.get(self.settings.api_key_env) or None

    def _error(self, message: str, key: str | None) -> EmbeddingError:
        """An EmbeddingError naming the model and host, with the key scrubbed."""
        where = f"embedding with {self.settings.model!r} at {self._host}"
        return EmbeddingError(_redact(f"{where}: {message}", key))

    # -- one attempt ----------------------------------------------------------------------

    def _attempt(self, payload: bytes, n: int, key: str | None) -> Vectors:
        """One request and its vectors; raises _RetryableError or EmbeddingError."""
        status, headers, body = self._post(payload, key)
        if 200 <= status < 300:
            return self._vectors(body, n, key)
        message = _redact(f"HTTP {status}{_server_message(body)}", key)  # servers may echo it
        if status in _RETRY_STATUS:
            retry_after = None
            if status in _RETRY_AFTER_STATUS:
                retry_after = _parse_retry_after(headers.get("retry-after"))
            raise _RetryableError(message, retry_after)
        if 300 <= status < 400:
            location = safe_url(headers.get("location", ""))
            message += f" (not following the redirect to {location!r}: set base_url to it)"
        elif status in (401, 403):
            message += self._key_hint(key)
        elif status == 404:
            message += f" (is {self._url!r} an OpenAI-compatible embeddings endpoint?)"
        raise self._error(message, key)

    def _key_hint(self, key: str | None) -> str:
        """What to check after a 401 or 403, naming the variable, never the key."""
        if self.settings.api_key_env is None:
            return " (no API key sent: api_key_env is None)"
        if key is None:
            return f" (no API key sent: ${self.settings.api_key_env} is not set)"
        return f" (check the API key in ${self.settings.api_key_env})"

    def _post(self, payload: bytes, key: str | None) -> tuple[int, Mapping[str, str], bytes]:
        """POST ``payload`` and read the answer within the total deadline.

        httpx bounds each connect, write and read by ``timeout``, but a server that
        trickles bytes never trips a read timeout; so the exchange runs in a worker
        thread that this one stops waiting for at the deadline. The worker checks
        the deadline between chunks of the body and then gives up on its own.
        """
        client = self._http()  # made here, not in the worker, so no two workers race to make it
        deadline = time.monotonic() + self.settings.timeout
        box: list[tuple[int, Mapping[str, str], bytes] | BaseException] = []
        cancelled = threading.Event()

        def exchange() -> None:
            try:
                box.append(self._exchange(client, payload, key, deadline, cancelled))
            except BaseException as exc:  # handed over to the waiting thread
                box.append(exc)

        worker = threading.Thread(target=exchange, name="kbsync-embedding-request", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if not box:
            cancelled.set()
            raise _RetryableError(self._timed_out())
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _timed_out(self) -> str:
        """The message of a missed deadline."""
        return f"timed out: no complete answer within {self.settings.timeout:g} s"

    def _exchange(
        self,
        client: httpx.Client,
        payload: bytes,
        key: str | None,
        deadline: float,
        cancelled: threading.Event,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Send and read the answer (in the worker thread); failures become _RetryableError."""
        import httpx

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            request = client.build_request("POST", self._url, content=payload, headers=headers)
            response = client.send(request, stream=True)
            try:
                ok = 200 <= response.status_code < 300
                limit = None if ok else _ERROR_BODY_BYTES
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    if cancelled.is_set() or time.monotonic() > deadline:
                        raise _RetryableError(self._timed_out())
                    chunks.append(chunk)
                    size += len(chunk)
                    if limit is not None and size >= limit:
                        break
                return response.status_code, response.headers, b"".join(chunks)
            finally:
                response.close()
        except httpx.TimeoutException:
            raise _RetryableError(self._timed_out()) from None
        except httpx.RequestError as exc:
            detail = _redact(str(exc), key) or "no detail"
            raise _RetryableError(f"{type(exc).__name__}: {detail}") from None

    def _http(self) -> httpx.Client:
        """The connection pool, made on first use; redirects are refused, not followed."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(
                transport=self._transport,
                timeout=httpx.Timeout(self.settings.timeout),
                follow_redirects=False,
            )
        return self._client

    # -- the answer ---------------------------------------------------------------------

    def _vectors(self, body: bytes, n: int, key: str | None) -> Vectors:
        """The ``n`` vectors of an answer, ordered by ``index`` and validated."""
        try:
            document = json.loads(body)
        except (UnicodeDecodeError, ValueError):
            raise self._error(f"the answer is not JSON{_server_message(body)}", key) from None
        data = document.get("data") if isinstance(document, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise self._error("the answer has no 'data' list of objects", key)
        if len(data) != n:
            raise self._error(f"expected {n} vectors (one per input), got {len(data)}", key)
        order = self._order(data, key)
        rows: list[FloatMatrix] = [np.zeros(0)] * n
        for item, position in zip(data, order, strict=True):
            rows[position] = self._row(item.get("embedding"), position, key)
        sizes = sorted({row.size for row in rows})
        if len(sizes) > 1:  # only possible while the dimension is still unknown
            raise self._error(
                f"the vectors of one answer differ in dimension: {sizes[0]} and {sizes[-1]}", key
            )
        return self._finish(np.vstack(rows), key)

    def _order(self, data: list[dict[str, Any]], key: str | None) -> list[int]:
        """Each item's input position: its ``index``, or its place when no item has one."""
        indices = [item.get("index") for item in data]
        if all(i is None for i in indices):
            return list(range(len(data)))
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
            raise self._error("every item of 'data' needs an integer 'index'", key)
        order: list[int] = indices  # type: ignore[assignment]  # checked just above
        if sorted(order) != list(range(len(data))):
            raise self._error(
                f"the 'index' fields are not 0..{len(data) - 1} once each: {sorted(order)[:10]}",
                key,
            )
        return order

    def _row(self, embedding: object, position: int, key: str | None) -> FloatMatrix:
        """One vector as float64: a JSON list of numbers, or base64 of little-endian float32."""
        try:
            if isinstance(embedding, str):
                raw = base64.b64decode(embedding, validate=True)
                row = np.frombuffer(raw, dtype="<f4").astype(np.float64)
            elif isinstance(embedding, list):
                row = np.asarray(embedding, dtype=np.float64)
            else:
                raise TypeError
        except (TypeError, ValueError, binascii.Error):
            raise self._error(
                f"the embedding of input {position} is not a list of numbers", key
            ) from None
        if row.ndim != 1 or row.size == 0:
            raise self._error(f"the embedding of input {position} is not a flat vector", key)
        expected = self._dimension
        if expected is not None and row.size != expected:
            raise self._error(
                f"wrong dimension for input {position}: expected {expected}, got {row.size}", key
            )
        return row

    def _finish(self, matrix: FloatMatrix, key: str | None) -> Vectors:
        """Check finiteness (as float32, which overflows sooner), normalize, fix the dimension."""
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.isfinite(matrix.astype(np.float32)).all(axis=1)
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0])
            raise self._error(
                f"the vector of input {bad} has non-finite values (NaN or infinity)", key
            )
        if self.settings.normalize:
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        if self._dimension is None:
            self._dimension = int(matrix.shape[1])
        vectors: Vectors = matrix.astype(np.float32)
        return vectors


# -- helpers ----------------------------------------------------------------------------


def _host_of(url: str) -> str:
    """``host`` or ``host:port`` of an address, without credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


# httpcore logs every response header at DEBUG, and a server or proxy may echo the
# Authorization header back in one; these are the loggers it writes them with.
_HTTP_LOGGERS = ("httpcore.http11", "httpcore.http2", "httpcore.connection", "httpx")


class _KeyRedactingFilter(logging.Filter):
    """Scrubs the API keys named by environment variables from the HTTP libraries' records."""

    def __init__(self) -> None:
        super().__init__()
        self.variables: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        keys = [k for k in (os.environ.get(v) for v in sorted(self.variables)) if k]
        if not keys:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix; let logging report it
            return True
        scrubbed = message
        for key in keys:
            scrubbed = _redact(scrubbed, key)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


_LOG_FILTER = _KeyRedactingFilter()
_LOG_FILTER_LOCK = threading.Lock()


def _redact_in_http_logs(variable: str) -> None:
    """Scrub the key held in ``variable`` from httpx's and httpcore's log records.

    Why at the loggers: their DEBUG records quote response headers verbatim, and
    a filter on the logger runs before any handler, wherever logging is configured.
    """
    with _LOG_FILTER_LOCK:
        _LOG_FILTER.variables.add(variable)
        for name in _HTTP_LOGGERS:
            logger_ = logging.getLogger(name)
            if _LOG_FILTER not in logger_.filters:
                logger_.addFilter(_LOG_FILTER)


def _redact(text: str, key: str | None) -> str:
    """``text`` with every occurrence of the API key replaced (servers may echo it)."""
    return text.replace(key, _REDACTED) if key else text


def _server_message(body: bytes) -> str:
    """``": <message>"`` of an error answer (OpenAI's ``error.message``, or the text) or ``""``."""
    text = body.decode("utf-8", "replace").strip()
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if isinstance(document, dict):
        error = document.get("error", document.get("message", document.get("detail")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error)
    text = " ".join(text.split())
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + "…"
    return f": {text}" if text else ""


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` asks for (delay-seconds or HTTP date), ``None`` if unusable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT by definition
            when = when.replace(tzinfo=datetime.UTC)
        return max(0.0, when.timestamp() - time.time())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
