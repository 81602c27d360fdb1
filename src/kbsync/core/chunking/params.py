"""Validated chunker parameters; their canonical form is hashed into every chunk identity."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kbsync.core.identity import Field
from kbsync.errors import ParameterError

__all__ = ["ByteParams", "LocalParams", "SentenceParams", "TTTDParams"]

_FINGERPRINT_BITS = 64


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")


def _limits(min_tokens: int, max_tokens: int) -> None:
    _positive("min_tokens", min_tokens)
    _positive("max_tokens", max_tokens)
    if min_tokens > max_tokens:
        raise ParameterError(f"min_tokens ({min_tokens}) is greater than max_tokens ({max_tokens})")


@dataclass(frozen=True, slots=True)
class TTTDParams:
    """Rabin TTTD over the word stream (DESIGN.md §3).

    Defaults aim at retrieval: chunks average about 300 tokens (roughly 230
    words of prose), never exceed 512 tokens (the input window of most
    open embedding models) and stay above 128 tokens so no chunk is a stray
    fragment without context. A primary candidate every ~2^7 words past the
    minimum lands the mean there; the backup condition (2^5) makes hard cuts rare.
    """

    window_words: int = 8
    min_tokens: int = 128
    max_tokens: int = 512
    primary_bits: int = 7
    backup_bits: int = 5
    token_counter: str = "estimate"
    snap: bool = False
    snap_window_words: int = 16

    chunker_id = "tttd-v1"

    def __post_init__(self) -> None:
        _positive("window_words", self.window_words)
        _limits(self.min_tokens, self.max_tokens)
        _positive("primary_bits", self.primary_bits)
        _positive("backup_bits", self.backup_bits)
        if self.primary_bits > _FINGERPRINT_BITS:
            raise ParameterError(
                f"primary_bits ({self.primary_bits}) is wider than the "
                f"{_FINGERPRINT_BITS}-bit fingerprint"
            )
        if self.backup_bits >= self.primary_bits:
            raise ParameterError(
                f"backup_bits ({self.backup_bits}) must be smaller than primary_bits "
                f"({self.primary_bits}): the backup condition is the weaker one"
            )
        if self.snap:
            _positive("snap_window_words", self.snap_window_words)
        elif self.snap_window_words < 0:
            raise ParameterError("snap_window_words must not be negative")

    def canonical(self) -> dict[str, Field]:
        """Every setting that can move a boundary or change chunk text."""
        fields: dict[str, Field] = dict(asdict(self))
        if not self.snap:
            fields["snap_window_words"] = 0
        return fields


@dataclass(frozen=True, slots=True)
class LocalParams:
    """The strictly local strategy (see :mod:`kbsync.core.chunking.local`).

    Primary cuts are strict local minima of the window fingerprint within
    ``min_tokens`` on both sides, so they are at least ``min_tokens`` apart and
    average about twice that; stretches without one get winnowing picks every
    ``max_tokens - min_tokens`` tokens at most.
    """

    window_words: int = 8
    min_tokens: int = 128
    max_tokens: int = 512
    token_counter: str = "estimate"

    chunker_id = "local-v1"

    def __post_init__(self) -> None:
        _positive("window_words", self.window_words)
        _limits(self.min_tokens, self.max_tokens)
        if self.max_tokens <= self.min_tokens:
            raise ParameterError(
                f"the local strategy needs max_tokens > min_tokens "
                f"(got {self.max_tokens} <= {self.min_tokens})"
            )

    @property
    def span(self) -> int:
        """Tokens of a window that gets a forced cut when it holds no anchor."""
        return self.max_tokens - self.min_tokens

    @property
    def reach(self) -> int:
        """How far, in tokens, a cut decision reads on either side (local.stream_cuts)."""
        return self.max_tokens

    def canonical(self) -> dict[str, Field]:
        return dict(asdict(self))


@dataclass(frozen=True, slots=True)
class SentenceParams:
    """The sentence-aware strategy (see :mod:`kbsync.core.chunking.sentences`).

    Chunks end at paragraph and sentence ends, are at most ``max_tokens`` long, and
    two primary cuts are at least ``min_tokens`` apart. The defaults aim at small-chunk
    retrieval: chunks of about 90 tokens, a few sentences or one short paragraph
    (``benchmarks/retrieval`` measured them against larger and smaller ones).

    ``tail_above`` (0: off) cuts a chunk that ends a paragraph and holds more than that
    many tokens once more, before the paragraph's last sentences: the fewest that hold
    at least :attr:`tail_min` tokens, when they hold at most :attr:`tail_max` and leave
    ``min_tokens`` before them. A short closing sentence then is a chunk of its own,
    and matches a question about it closely (``kbsync init`` sets it to 100).
    """

    window_words: int = 8
    min_tokens: int = 48
    max_tokens: int = 192
    token_counter: str = "estimate"
    tail_above: int = 0

    chunker_id = "sentences-v1"

    def __post_init__(self) -> None:
        _positive("window_words", self.window_words)
        _limits(self.min_tokens, self.max_tokens)
        if self.max_tokens <= self.min_tokens:
            raise ParameterError(
                f"the sentences strategy needs max_tokens > min_tokens "
                f"(got {self.max_tokens} <= {self.min_tokens})"
            )
        if self.tail_above:
            _positive("tail_above", self.tail_above)

    @property
    def tail_min(self) -> int:
        """The fewest tokens a tail cut off a chunk holds (a quarter of ``min_tokens``)."""
        return max(1, self.min_tokens // 4)

    @property
    def tail_max(self) -> int:
        """The most tokens a tail cut off a chunk holds."""
        return self.min_tokens + self.tail_min

    @property
    def span(self) -> int:
        """Tokens of a window that gets a forced cut when it holds no anchor."""
        return self.max_tokens

    @property
    def reach(self) -> int:
        """How far, in tokens, a cut decision reads on either side (local.stream_cuts)."""
        return self.max_tokens + self.min_tokens

    def canonical(self) -> dict[str, Field]:
        fields = dict(asdict(self))
        if not self.tail_above:  # off, as before it existed: the same identities
            del fields["tail_above"]
        return fields


@dataclass(frozen=True, slots=True)
class ByteParams:
    """Byte-level CDC: polynomial rolling hash (base 257, modulus 2^61-1) over a byte window."""

    window_bytes: int = 48
    min_size: int = 512
    avg_size: int = 2048
    max_size: int = 8192

    chunker_id = "bytes-v1"

    def __post_init__(self) -> None:
        for name in ("window_bytes", "min_size", "avg_size", "max_size"):
            _positive(name, getattr(self, name))
        if not self.min_size <= self.avg_size <= self.max_size:
            raise ParameterError(
                f"byte CDC sizes must satisfy min <= avg <= max, got "
                f"{self.min_size} / {self.avg_size} / {self.max_size}"
            )
        if self.avg_size < 2:
            raise ParameterError("avg_size must be at least 2")

    @property
    def mask(self) -> int:
        """``2^(bit_length(avg) - 1) - 1``: a boundary every ~avg/2 bytes past the minimum."""
        return (1 << (self.avg_size.bit_length() - 1)) - 1

    def canonical(self) -> dict[str, Field]:
        return dict(asdict(self))
