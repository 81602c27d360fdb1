"""A deterministic, offline embedder: feature hashing of word unigrams and bigrams.

It needs no model and no network, gives the same vector on every machine, and
is good enough to make search work on a fresh install and in tests. Real
models plug in behind the same protocol. The compiled kernel finds the terms
(:func:`term_keys`); its vectors are bit for bit those of the Python path.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

from kbsync.errors import ParameterError
from kbsync.model import VectorNorm

if TYPE_CHECKING:  # NumPy is imported where vectors are computed
    import numpy as np
    import numpy.typing as npt

    from kbsync.embed import Vectors

__all__ = ["HashingEmbedder", "python_term_keys", "term_keys"]

_TOKEN = re.compile(r"\w+")


def _stem(word: str) -> str:
    """A light suffix stripper: "retries", "retried", "retrying" all become "retr"."""
    for suffix in ("ying", "ies", "ied", "ing", "ed", "es", "s", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=1 << 17)
def _features(word: str) -> tuple[bytes, int, int]:
    """A word's stem (UTF-8), the stem's code, and the code of the stem and a space, from
    which a bigram's code continues."""
    stem = _stem(word).encode()
    return stem, zlib.crc32(stem), zlib.crc32(stem + b" ")


class HashingEmbedder:
    """Signed feature hashing (CRC32) of lower-cased content words and their bigrams.

    Counts are damped (``1 + log(count)``) and rows L2-normalized, so cosine
    similarity rewards shared topic words rather than long texts.
    """

    version = "hashing-v1"
    #: Its NumPy and Python steps hold the interpreter lock: a sync embeds with it in turn
    #: with the store's writes rather than in a thread beside them (measured slower).
    holds_gil = True
    #: Rows are L2-normalized; a text with no word to hash (none, or stopwords only) is
    #: the zero vector.
    norm = VectorNorm(1.0, zero=True)

    def __init__(self, dimension: int = 1024) -> None:
        if dimension < 8:
            raise ParameterError(f"the hashing embedder needs dimension >= 8, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_input_tokens(self) -> int | None:
        return None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(_TOKEN.findall(t)) for t in texts]

    @property
    def identity(self) -> str:
        return f"{self.version}:stemmed-unigram+bigram:log-tf:{self._dimension}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        dim = self._dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        keys = term_keys(list(texts))
        if not len(keys):
            return out
        # One count of every (row, code) pair for the whole batch, in (row, code) order:
        # each row's buckets take their terms in the order a row-by-row count gives them.
        unique, counts = np.unique(keys, return_counts=True)
        code = (unique & np.uint64(0xFFFFFFFF)).astype(np.int64)
        weights = (1.0 + np.log(counts)).astype(np.float32)
        signs = np.where(code & 0x80000000, -1.0, 1.0).astype(np.float32)
        rows = (unique >> np.uint64(32)).astype(np.int64)
        np.add.at(out, (rows, code % dim), signs * weights)
        for row in np.unique(rows).tolist():
            # Row by row, as np.linalg.norm does it (without its checks): the sum of a
            # batch's norms takes another order and changes the last bits.
            vector = out[row]
            norm = float(np.sqrt(vector.dot(vector)))
            if norm:
                vector /= norm
        return out


    def share_terms(self, query: str, texts: Sequence[str]) -> list[bool]:
        """Whether each of ``texts`` holds a term of ``query``: its vector's likeness to the
        query's is then more than the collisions of unrelated terms in shared buckets
        (random letters read 0.14 against the sample corpus's nearest chunk)."""
        import numpy as np

        keys = term_keys([query, *texts])
        rows = (keys >> np.uint64(32)).astype(np.int64)
        codes = keys & np.uint64(0xFFFFFFFF)
        wanted = codes[rows == 0]
        shared = set(rows[(rows > 0) & np.isin(codes, wanted)].tolist())
        return [row in shared for row in range(1, len(texts) + 1)]


def term_keys(texts: list[str]) -> npt.NDArray[np.uint64]:
    """Each term of each text as ``row << 32 | code``, in no particular order.

    A term is a stem (its CRC-32) or a pair of neighbouring stems (the CRC of "a b"). The
    compiled kernel finds the words of ASCII texts itself; of the others it is handed
    the words Python's regular expression finds (Unicode's letters and case rules).
    """
    import numpy as np

    from kbsync.core import native  # the compiled kernel, loaded when texts are embedded
    from kbsync.core.stopwords import STOPWORDS

    kernel = native.kernel
    if kernel is None:
        return python_term_keys(texts, range(len(texts)))
    data, others = kernel.hashing_keys(texts, STOPWORDS)
    if others:  # their words as Python's Unicode rules find them; the rest as before
        words: list[str | list[str]] = [[]] * len(texts)
        for row in others:
            words[row] = _TOKEN.findall(texts[row].lower())
        data += kernel.hashing_keys(words, STOPWORDS)[0]
    return np.frombuffer(data, dtype=np.uint64)


def python_term_keys(texts: Sequence[str], rows: Iterable[int]) -> npt.NDArray[np.uint64]:
    """:func:`term_keys` of the texts at ``rows``, word by word in Python."""
    import numpy as np

    from kbsync.core.stopwords import STOPWORDS

    keys: list[int] = []
    for row in rows:
        words = [_features(w) for w in _TOKEN.findall(texts[row].lower()) if w not in STOPWORDS]
        high = row << 32
        keys += [high | code for _, code, _ in words]
        # A bigram's code is the CRC of "a b", continued from the CRC of "a ".
        keys += [high | zlib.crc32(b[0], a[2]) for a, b in pairwise(words)]
    return np.array(keys, dtype=np.uint64)
