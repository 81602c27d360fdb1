from typing import Any

from typing_extensions import Buffer

ABI: int
NFC_UNIDATA_VERSION: str

def scan(
    text: str, window: int, history: Buffer, check_nfc: bool = False, mode: int = 0,
    sentences: bool = True, /,
) -> tuple[Any, ...] | int | None: ...
def local_cuts(
    fingerprint: Buffer, tokens: Buffer, radius: int, span: int, ranks: Buffer,
    eligible_below: int, first: bool, last: bool, /,
) -> tuple[bytearray, bytearray]: ...
def build_chunks(
    source: str, text_starts: Buffer, text_ends: Buffer, input_starts: Buffer,
    input_ends: Buffer, cum: Buffer, cuts: Buffer, kinds: Buffer,
    kind_objects: tuple[object, ...], chunk_type: type, prefix: bytes, start: int = 0,
    index: int = 0, /,
) -> list[Any]: ...
def rolling_hashes(data: Buffer, window: int, /) -> bytearray: ...
def byte_candidates(
    data: Buffer, lead: int, window: int, mask: int, utf8: bool, /
) -> bytearray: ...
def byte_chunks(
    data: Buffer, lead: int, window: int, mask: int, min_size: int, max_size: int,
    ended: bool, chunk_type: type, offset: int, index: int, /,
) -> tuple[list[Any], int]: ...
def byte_spans(
    data: Buffer, lead: int, window: int, mask: int, min_size: int, max_size: int, utf8: bool,
    ended: bool, /,
) -> bytearray: ...

class _Cutter:
    def feed(
        self, text: str, first_paragraph: int = -1, check_nfc: bool = False, /
    ) -> list[Any] | int | None: ...
    def feed_scanned(
        self, source: str, input_starts: Buffer, input_ends: Buffer, first_paragraph: bool,
        block_chars: int, /,
    ) -> list[Any]: ...
    def finish(self) -> list[Any]: ...

class TTTDCutter(_Cutter):
    def __init__(
        self, window_words: int, min_tokens: int, max_tokens: int, primary_bits: int,
        backup_bits: int, snap: bool, snap_window_words: int, chunk_type: type,
        kinds: tuple[object, ...], prefix: bytes,
    ) -> None: ...

class LocalCutter(_Cutter):
    def __init__(
        self, window_words: int, radius: int, span: int, reach: int, sentences: bool,
        chunk_type: type, kinds: tuple[object, ...], prefix: bytes,
    ) -> None: ...
def hashing_keys(
    texts: list[str] | list[str | list[str]], stopwords: frozenset[str], /
) -> tuple[bytes, list[int]]: ...
