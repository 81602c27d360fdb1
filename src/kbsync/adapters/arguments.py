"""The search arguments both retrievers take, checked when they are given.

A retriever is built once and asked many times: a wrong argument refused at its
construction names itself there, where one left to the first search (or never read)
looked like a working retriever that ranked otherwise than asked.
"""

from __future__ import annotations

from typing import Any

from kbsync.errors import ParameterError
from kbsync.model import SEARCH_MODES

__all__ = ["check_context_tokens", "check_k", "check_mode", "check_score_threshold"]


def check_k(owner: str, k: Any) -> int:
    """``k``, the number of hits, a whole number of at least 1."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ParameterError(f"{owner}: k must be a whole number of at least 1, not {k!r}")
    return k


def check_mode(owner: str, mode: Any) -> None:
    """``mode``: ``None`` (the knowledge base's) or one of the search modes."""
    if mode is not None and mode not in SEARCH_MODES:
        raise ParameterError(f"{owner}: unknown mode {mode!r}: use vector, text or hybrid "
                             "(or None for the knowledge base's)")


def check_context_tokens(owner: str, tokens: Any) -> None:
    """``context_tokens``: ``None`` (the knowledge base's) or 0 or more."""
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or tokens < 0):
        raise ParameterError(f"{owner}: context_tokens must be None, 0 (the chunk alone) or "
                             f"more, not {tokens!r}")


def check_score_threshold(owner: str, threshold: Any) -> float:
    """A relevance threshold, a number from 0 to 1 (relevance is in [0, 1]: above 1 no hit
    is left, below 0 the threshold drops none)."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 <= threshold <= 1.0:
        raise ParameterError(f"{owner}: score_threshold must be a relevance from 0 to 1, "
                             f"not {threshold!r}")
    return float(threshold)
