"""Embedding providers beyond the built-in hashing embedder: local models and HTTP APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.embed.providers.openai import OpenAIEmbedder

__all__ = ["OpenAIEmbedder"]


__getattr__ = names_on_first_use(__name__,
                                 {"kbsync.embed.providers.openai": ("OpenAIEmbedder",)})
"""A provider, imported on first use: the settings modules beside them load alone."""
