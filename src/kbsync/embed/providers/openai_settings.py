"""The settings of the OpenAI-compatible embedder: the ``[embedder]`` table of ``kind = "openai"``.

A frozen value checked on its own, so that ``kbsync.toml`` is checked before any
request, and the embedder takes one value rather than a dozen arguments.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kbsync.errors import ParameterError

__all__ = ["OpenAISettings", "safe_url"]


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    """How to reach an OpenAI-compatible ``/embeddings`` endpoint and batch for it.

    - ``model``: the model name the server knows (``"text-embedding-3-small"``,
      ``"nomic-embed-text"``, …).
    - ``base_url``: up to and including the version segment; ``/embeddings`` is appended.
      Redirects are not followed (they could carry the key elsewhere): give the final address.
    - ``api_key_env``: the environment variable holding the key, read at each request
      and sent as ``Authorization: Bearer …``; unset or empty sends no header (local
      servers need none). ``None`` never sends one.
    - ``dimension``: the expected vector size; ``None`` discovers it from the first
      answer. It only validates: to ask OpenAI's ``text-embedding-3-*`` for shorter
      vectors, pass ``extra_body = {dimensions = n}`` as well.
    - ``max_input_tokens``: the model's input window, for sizing chunks; texts are not
      truncated here, and a server that refuses an over-long input fails the batch.
    - ``batch_size``, ``batch_tokens``: a request carries at most this many texts and,
      by estimate, this many tokens (a single text over the budget goes alone).
    - ``max_retries``, ``backoff``: retries after timeouts, connection errors and HTTP
      429/500/502/503/504, waiting a uniformly random time in
      ``[0, backoff * 2**retry]`` ("full jitter", ceiling at most 60 s).
    - ``retry_after_cap``: a ``Retry-After`` on 429/503 is waited exactly, up to this.
    - ``timeout``: the total deadline of one request, connection to last byte.
    - ``normalize``: L2-normalize every row (part of the identity).
    - ``extra_body``: more JSON fields for each request (``dimensions``,
      ``encoding_format``, ``truncate``…); part of the identity.
    """

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    dimension: int | None = None
    max_input_tokens: int = 8191
    batch_size: int = 64
    batch_tokens: int = 100_000
    max_retries: int = 5
    backoff: float = 0.5
    retry_after_cap: float = 30.0
    timeout: float = 30.0
    normalize: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.model:
            raise ParameterError("the OpenAI-compatible embedder needs a model name")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ParameterError(
                f"base_url must be an http(s) address with a host, got {safe_url(self.base_url)!r}")
        if self.dimension is not None and self.dimension < 1:
            raise ParameterError(f"dimension must be at least 1, got {self.dimension}")
        for name in ("max_input_tokens", "batch_size", "batch_tokens"):
            if getattr(self, name) < 1:
                raise ParameterError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ParameterError(f"max_retries must be at least 0, got {self.max_retries}")
        for name in ("backoff", "retry_after_cap"):
            number = getattr(self, name)
            if not (math.isfinite(number) and number >= 0):
                raise ParameterError(f"{name} must be a finite number >= 0, got {number}")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ParameterError(f"timeout must be a finite number > 0, got {self.timeout}")
        if {"model", "input"} & self.extra_body.keys():
            raise ParameterError("extra_body may not set 'model' or 'input'")
        self.extra_json  # noqa: B018 - refuses a body that is not plain JSON

    @property
    def extra_json(self) -> str:
        """``extra_body`` as canonical JSON: what the identity commits to."""
        try:
            return json.dumps(dict(self.extra_body), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"extra_body must be plain JSON: {exc}") from exc


def safe_url(url: str) -> str:
    """``url`` without a user name or password, fit for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid address>"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
