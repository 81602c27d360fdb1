"""Benchmark text: the sample corpus, and large English-like text generated from its prose.

``generated_text(size_bytes, seed)`` trains an order-2 word Markov chain on the prose
sentences of ``examples/corpus`` (``*.txt`` and ``*.md``; code blocks, tables and headings
are skipped), then emits sentences grouped into paragraphs separated by blank lines until
``size_bytes`` UTF-8 bytes are reached. The output is deterministic for a given corpus, size
and seed, and is cached under ``benchmarks/.data/`` (git-ignored).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "CORPUS_DIR",
    "DATA_DIR",
    "corpus_files",
    "generated_text",
    "prose_sentences",
    "sample_corpus_text",
    "vocabulary",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = REPO_ROOT / "examples" / "corpus"
DATA_DIR = Path(__file__).resolve().parent / ".data"

_GENERATOR_VERSION = "markov2-v1"
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_MARKUP = re.compile(r"`|\*\*|\[([^\]]*)\]\([^)]*\)")


def corpus_files(*suffixes: str) -> list[Path]:
    """Files of the sample corpus in name order, optionally only those with ``suffixes``."""
    files = sorted(p for p in CORPUS_DIR.iterdir() if p.is_file())
    return [p for p in files if not suffixes or p.suffix in suffixes]


def vocabulary() -> list[str]:
    """The words of the sample corpus, sorted (a fixed vocabulary of real words)."""
    words: set[str] = set()
    for path in sorted(CORPUS_DIR.iterdir()):
        if path.is_file():
            words.update(re.findall(r"[A-Za-z]{2,}", path.read_text(encoding="utf-8")))
    return sorted(words)


def sample_corpus_text() -> str:
    """All files of the sample corpus joined with blank lines."""
    return "\n\n".join(p.read_text(encoding="utf-8") for p in corpus_files())


def _prose_paragraphs(text: str, markdown: bool) -> Iterator[str]:
    """Paragraphs of running prose; Markdown code, tables and headings are skipped."""
    in_code = False
    lines: list[str] = []
    for raw in [*text.splitlines(), ""]:
        line = raw.rstrip()
        if markdown and line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
            continue
        skip = markdown and (in_code or line.lstrip().startswith(("#", "|", ">")))
        if not line.strip() or skip:
            if lines:
                yield " ".join(lines)
                lines = []
            continue
        if markdown:
            line = _MARKUP.sub(lambda m: m.group(1) or "", _LIST_MARKER.sub("", line))
        lines.append(line.strip())


def prose_sentences() -> list[list[str]]:
    """Sentences (as word lists) of the corpus prose, the Markov chain's training set."""
    sentences: list[list[str]] = []
    for path in corpus_files(".txt", ".md"):
        text = path.read_text(encoding="utf-8")
        for paragraph in _prose_paragraphs(text, markdown=path.suffix == ".md"):
            for sentence in _SENTENCE_SPLIT.split(paragraph):
                words = sentence.split()
                if len(words) >= 4 and words[-1][-1] in ".!?":
                    sentences.append(words)
    return sentences


class _Markov2:
    """An order-2 word chain: successors of each word pair, with ``None`` ending a sentence."""

    def __init__(self, sentences: list[list[str]]) -> None:
        table: dict[tuple[str, str], list[str | None]] = {}
        for words in sentences:
            a, b = "", ""
            for word in [*words, None]:
                table.setdefault((a, b), []).append(word)
                if word is None:
                    break
                a, b = b, word
        self._table = {state: tuple(nexts) for state, nexts in table.items()}

    def sentences(self, rng: random.Random, max_words: int = 60) -> Iterator[str]:
        table, rand = self._table, rng.random
        while True:
            a, b = "", ""
            words: list[str] = []
            while len(words) < max_words:
                nexts = table[(a, b)]
                word = nexts[int(rand() * len(nexts))]
                if word is None:
                    break
                words.append(word)
                a, b = b, word
            if words[-1][-1] in ".!?":  # drop sentences cut off by max_words
                yield " ".join(words)


def _generate(size_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    sentences = _Markov2(prose_sentences()).sentences(rng)
    paragraphs: list[str] = []
    total = 0
    while total < size_bytes:
        paragraph = " ".join(next(sentences) for _ in range(rng.randint(2, 7)))
        paragraphs.append(paragraph)
        total += len(paragraph.encode("utf-8")) + 2
    return "\n\n".join(paragraphs) + "\n"


def _corpus_digest() -> str:
    digest = hashlib.sha256(_GENERATOR_VERSION.encode())
    for path in corpus_files(".txt", ".md"):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def generated_text(size_bytes: int, seed: int = 0) -> str:
    """At least ``size_bytes`` of English-like prose, deterministic in the corpus and ``seed``."""
    path = DATA_DIR / f"generated-{size_bytes}-{seed}-{_corpus_digest()}.txt"
    if path.exists():
        return path.read_text(encoding="utf-8")
    text = _generate(size_bytes, seed)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return text


if __name__ == "__main__":
    import sys
    import time

    size = int(float(sys.argv[1]) * 1_000_000) if len(sys.argv) > 1 else 5_000_000
    started = time.perf_counter()
    sample = _generate(size, 0)
    elapsed = time.perf_counter() - started
    print(f"{len(sample.encode()):,} bytes in {elapsed:.1f} s")
    print(sample[:1500])
