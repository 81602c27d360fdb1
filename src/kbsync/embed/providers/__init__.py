"""Embedding providers beyond the built-in hashing embedder: local models and HTTP APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.embed.providers.openai import OpenAIEmbedder

__all__ = ["OpenAIEmbedder"]


def __getattr__(name: str) -> Any:
    """A provider, imported on first use: the settings modules beside them load alone."""
    return _attribute(name)


_attribute = names_on_first_use(__name__, {"OpenAIEmbedder": "kbsync.embed.providers.openai"})
