"""Chunk sizes in an embedding model's own tokens, read from its ``tokenizer.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kbsync.core.chunking import TokenCounter
from kbsync.core.identity import tokenizer_hash
from kbsync.core.normalize import IntArray, WordScan
from kbsync.errors import DependencyMissingError, ParameterError

__all__ = ["TOKENIZER_PREFIX", "TokenizerCounter", "counter_for"]

TOKENIZER_PREFIX = "tokenizer:"
"""A ``token_counter`` setting ``"tokenizer:<path>"`` names a model's ``tokenizer.json``."""


class TokenizerCounter:
    """Exact counts in an embedding model's own tokens, from its ``tokenizer.json``.

    Needs the ``tokenizers`` library (it comes with the ``local`` extra). Each
    distinct word is encoded once, with its leading space, without special tokens;
    WordPiece and the BPE pre-tokenizers never merge across a space, so a chunk's
    count is the sum of its words' and the model reads ``special_tokens`` more.
    The identity commits to the file's content, not its location.
    """

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise DependencyMissingError("a model's tokenizer", "local", "tokenizers",
                                         exc) from exc
        file = Path(path)
        try:
            data = file.read_bytes()
            tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:  # OSError, UnicodeDecodeError or the library's own
            raise ParameterError(f"cannot read the tokenizer {file}: {exc}") from exc
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._tokenizer: Any = tokenizer
        processor = tokenizer.post_processor
        self.special_tokens: int = processor.num_special_tokens_to_add(False) if processor else 0
        self._identity = tokenizer_hash(data)
        self._memo: dict[str, int] = {}

    @property
    def identity(self) -> str:
        return self._identity

    def count(self, scan: WordScan) -> IntArray:
        src, ts, te = scan.source, scan.text_starts.tolist(), scan.text_ends.tolist()
        words = [src[a:b] for a, b in zip(ts, te, strict=True)]
        memo = self._memo
        missing = list({w for w in words if w not in memo})
        if missing:
            encoded = self._tokenizer.encode_batch([" " + w for w in missing],
                                                   add_special_tokens=False)
            memo.update((w, max(1, len(e.ids))) for w, e in zip(missing, encoded, strict=True))
        return np.fromiter((memo[w] for w in words), dtype=np.int64, count=len(words))


def counter_for(name: str) -> TokenCounter | None:
    """The tokenizer counter a ``token_counter`` setting names, or None for the core's own."""
    if name.startswith(TOKENIZER_PREFIX):
        return TokenizerCounter(name.removeprefix(TOKENIZER_PREFIX))
    return None
