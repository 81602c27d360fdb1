"""Plain per-word Python reference implementations of the vectorized chunkers.

They share no code with ``kbsync.core.chunking`` beyond the parameter classes, so a
test that compares the two catches a slip in either.
"""

from __future__ import annotations

import unicodedata

from kbsync.core.chunking.params import TTTDParams

M64 = (1 << 64) - 1
WORD_BASE = 0x100000001B3
WINDOW_BASE = 0x9E3779B97F4A7C15
LINE_BREAKS = "\n\x0b\x85\u2028"
SEPARATORS = "\x0c\x1c\x1d\x1e\u2029"


def mix(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def words_of(text: str) -> list[tuple[str, bool]]:
    """Normalized words, each with "a paragraph mark precedes it"."""
    out: list[tuple[str, bool]] = []
    gap = ""
    word = ""
    for ch in text + " ":
        if ch.isspace():
            if word:
                kept = "".join(c for c in word if c != "\x00" and not 0xD800 <= ord(c) <= 0xDFFF)
                clean = unicodedata.normalize("NFC", kept)
                if clean:
                    out.append((clean, paragraph(gap)))
                    gap = ""
                word = ""
            gap += ch
        else:
            word += ch
    return out


def paragraph(gap: str) -> bool:
    lines = 0
    i = 0
    while i < len(gap):
        c = gap[i]
        if c == "\r":
            lines += 1
            if i + 1 < len(gap) and gap[i + 1] == "\n":
                i += 1
        elif c in LINE_BREAKS:
            lines += 1
        i += 1
    return lines >= 2 or any(c in SEPARATORS for c in gap)


def canonical(words: list[tuple[str, bool]]) -> str:
    out = ""
    for k, (w, p) in enumerate(words):
        if k:
            out += "\n\n" if p else " "
        out += w
    return out


def word_hash(word: str) -> int:
    data = word.encode("utf-8")
    h = 0
    for j, byte in enumerate(data):
        h = (h + byte * pow(WORD_BASE, j, 1 << 64)) & M64
    return mix(h ^ len(data))


def estimate_tokens(word: str) -> int:
    def cls(byte: int) -> int:
        if 97 <= byte <= 122 or 65 <= byte <= 90:
            return 0
        if 48 <= byte <= 57:
            return 1
        return 3 if byte >= 0x80 else 2

    div = [8, 3, 3, 3]
    data = word.encode("utf-8")
    total, i = 0, 0
    while i < len(data):
        c = cls(data[i])
        j = i
        while j < len(data) and cls(data[j]) == c:
            j += 1
        total += -(-(j - i) // div[c])
        i = j
    return max(total, 1)


def fingerprints(hashes: list[int], window: int) -> list[int]:
    out = []
    for k in range(len(hashes)):
        f = 0
        for j in range(window):
            h = hashes[k - j] if k - j >= 0 else 0
            f = (f + h * pow(WINDOW_BASE, j, 1 << 64)) & M64
        out.append(mix(f))
    return out


def tttd(text: str, params: TTTDParams) -> list[tuple[str, str, int]]:
    """(canonical text, boundary kind, tokens) of each chunk, one word at a time."""
    words = words_of(text)
    tokens = [estimate_tokens(w) for w, _ in words]
    fps = fingerprints([word_hash(w) for w, _ in words], params.window_words)
    pmask, bmask = (1 << params.primary_bits) - 1, (1 << params.backup_bits) - 1
    out = []
    s, n = 0, len(words)
    while s < n:
        total, backup, cut, kind = 0, -1, -1, ""
        k = s
        while k < n:
            total += tokens[k]
            if total > params.max_tokens:
                break
            if total >= params.min_tokens:
                if fps[k] & pmask == 0:
                    cut, kind = k, "primary"
                    break
                if fps[k] & bmask == 0:
                    backup = k
            k += 1
        if cut < 0:
            if k == n:
                cut, kind = n - 1, "final"
            elif backup >= 0:
                cut, kind = backup, "backup"
            else:
                cut, kind = max(s, k - 1), "hard"
        out.append((canonical(words[s : cut + 1]), kind, sum(tokens[s : cut + 1])))
        s = cut + 1
    return out
