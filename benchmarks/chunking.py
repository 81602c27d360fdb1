"""Chunking benchmark: kbsync against peer chunkers, side by side in one process.

Two things are measured.

Throughput
    MB/s (UTF-8 bytes of input per second, best of 3 runs, ``time.perf_counter``) on the
    sample corpus (``examples/corpus``) and on a large English-like text generated from it
    (``benchmarks/corpus.py``; 50 MB by default). Word/text chunkers: kbsync TTTD, kbsync
    local, LangChain ``RecursiveCharacterTextSplitter``, semchunk, chonkie
    ``RecursiveChunker`` (word tokenizer, works offline) and steadlith ``CDCChunker``
    (pure-Python per-word CDC). Byte CDC: kbsync ``byte_chunks`` and pyfastcdc (FastCDC
    2020, Cython). Text chunkers run with the parameters tuned for the churn test (mean
    chunk about 256 words). A chunker that would need more than ``SLOW_RUN_S`` per run on
    the generated text is measured on a slice of it (5 MB), and the table says so.

Churn
    The ``*.txt`` prose of the sample corpus, joined, gets N random single-sentence edits
    (insert a sentence taken from elsewhere, delete a sentence, replace a sentence), each
    applied to the original text independently. Every chunker is tuned so its mean chunk
    on the original is close to 256 words. For each edit we count the edited text's chunks
    whose text is not among the original's chunk texts ("new chunks per edit") and the
    share of the edited text's words that lie in those chunks ("share of new tokens",
    counted in words).

The chunking core
    ``chunk_text`` with the default TTTD parameters (identities included), the strictly
    local strategy and the sentences strategy beside LangChain
    ``RecursiveCharacterTextSplitter(chunk_size=2000, chunk_overlap=0).split_text`` on prose
    (the generated text), Markdown (documentation files of ``../shared/corpora`` when
    present, else ``examples/corpus``) and source code (kbsync.s own ``src``), each
    repeated to the same size; median of ``--repeat`` runs, ``time.perf_counter``, all in
    one process. Beside them the physical floors measured in the same run (``str.encode``,
    BLAKE2b over the bytes, one NumPy copy of them), ``normalize()``, byte CDC, and
    ``compare()`` of two 100 KB versions, with the compiled kernel and with the NumPy
    reference (``kbsync.core.native``).

Run it from the repository root with the peers installed (``benchmarks/requirements.txt``)::

    python benchmarks/chunking.py                 # 50 MB generated text, 500 edits
    python benchmarks/chunking.py --quick         # 5 MB, 100 edits: about a minute
    python benchmarks/chunking.py --size-mb 20 --edits 200
    python benchmarks/chunking.py --core --size-mb 20   # the chunking-core table only

A peer that is not installed or cannot run offline is left out with a printed note.
"""

from __future__ import annotations

import argparse
import gc
import math
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import REPO_ROOT, corpus_files, generated_text, sample_corpus_text
from kbsync import byte_chunks, chunk_text, compare, native, normalize

Split = Callable[[str], Sequence[str]]
Cut = Callable[[bytes], int]

TARGET_WORDS = 256
SLOW_RUN_S = 15.0
SLICE_MB = 5
TARGET_TTTD_MB_S = 150.0
TARGET_LOCAL_MB_S = 80.0
TARGET_STEADLITH_RATIO = 50.0
TARGET_TTTD_NEW_CHUNKS = 1.4

console = Console(width=160)
notes: list[str] = []


# --------------------------------------------------------------------------- chunkers


@dataclass(frozen=True)
class TextChunker:
    """A text chunker with one integer size knob, tuned to a mean of ``TARGET_WORDS`` words."""

    name: str
    knob: str
    bounds: tuple[int, int]
    build: Callable[[int], Split]
    describe: Callable[[int], str]
    is_kbsync: bool = False


@dataclass(frozen=True)
class ByteChunker:
    name: str
    params: str
    cut: Cut
    is_kbsync: bool = False


def _words(text: str) -> int:
    return len(text.split())


def _kbsync_tttd(min_tokens: int) -> Split:
    def split(text: str) -> list[str]:
        result = chunk_text(
            text,
            strategy="tttd",
            min_tokens=min_tokens,
            max_tokens=1024,
            primary_bits=7,
            backup_bits=5,
            window_words=8,
        )
        return [chunk.text for chunk in result.chunks]

    return split


def _kbsync_local(min_tokens: int) -> Split:
    def split(text: str) -> list[str]:
        result = chunk_text(
            text, strategy="local", min_tokens=min_tokens, max_tokens=4 * min_tokens, window_words=8
        )
        return [chunk.text for chunk in result.chunks]

    return split


def _fixed(size: int) -> Split:
    def split(text: str) -> list[str]:
        words = text.split()
        return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]

    return split


def text_chunkers() -> list[TextChunker]:
    """kbsync's strategies, fixed-size, and every peer that imports; a note for the rest."""
    chunkers = [
        TextChunker(
            "kbsync TTTD",
            "min_tokens",
            (16, 900),
            _kbsync_tttd,
            lambda v: f"min_tokens={v} max_tokens=1024 bits=7/5 window=8",
            is_kbsync=True,
        ),
        TextChunker(
            "kbsync local",
            "min_tokens",
            (16, 900),
            _kbsync_local,
            lambda v: f"min_tokens={v} max_tokens={4 * v} window=8",
            is_kbsync=True,
        ),
        TextChunker("fixed-size", "words", (TARGET_WORDS, TARGET_WORDS), _fixed, "{} words".format),
    ]
    for factory in (_langchain, _semchunk, _chonkie, _steadlith):
        try:
            chunkers.append(factory())
        except Exception as error:  # a peer that is missing or broken is reported, not fatal
            notes.append(
                f"{factory.__name__.strip('_')}: left out ({type(error).__name__}: {error})"
            )
    return chunkers


def _langchain() -> TextChunker:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    def build(chars: int) -> Split:
        return RecursiveCharacterTextSplitter(chunk_size=chars, chunk_overlap=0).split_text

    return TextChunker(
        "LangChain recursive",
        "chunk_size",
        (200, 20_000),
        build,
        lambda v: f"chunk_size={v} chars, overlap 0",
    )


def _semchunk() -> TextChunker:
    import semchunk.semchunk as semchunk_impl

    def build(size: int) -> Split:
        def split(text: str) -> list[str]:
            # A fresh (memoized) counter per call, so repeated timing runs get no warm cache.
            def count(piece: str) -> int:
                return len(piece.split())

            try:
                chunks = semchunk_impl.chunk(text, size, count)
                if not isinstance(chunks, list):  # (chunks, offsets) only with offsets=True
                    raise TypeError(f"semchunk returned {type(chunks).__name__}")
                return chunks
            finally:
                getattr(semchunk_impl, "_memoized_token_counters", {}).pop(count, None)

        return split

    return TextChunker(
        "semchunk", "chunk_size", (16, 2000), build, lambda v: f"chunk_size={v} words"
    )


def _chonkie() -> TextChunker:
    from chonkie import RecursiveChunker

    RecursiveChunker(tokenizer="word", chunk_size=64).chunk("Offline check. It works.")

    def build(size: int) -> Split:
        def split(text: str) -> list[str]:
            # A fresh chunker per call: its token counts are memoized per instance, and a
            # warm cache would flatter repeated timing runs.
            chunker = RecursiveChunker(tokenizer="word", chunk_size=size)
            return [chunk.text for chunk in chunker.chunk(text)]

        return split

    return TextChunker(
        "chonkie recursive",
        "chunk_size",
        (16, 2000),
        build,
        lambda v: f"chunk_size={v} (word tokenizer)",
    )


def _steadlith() -> TextChunker:
    from steadlith import CDCChunker, CDCParams

    def params(min_tokens: int) -> CDCParams:
        return CDCParams(
            min_tokens=min_tokens,
            max_tokens=max(1024, 2 * min_tokens),
            primary_mask_bits=7,
            backup_mask_bits=5,
        )

    def build(min_tokens: int) -> Split:
        return CDCChunker(params(min_tokens)).split_text

    def describe(min_tokens: int) -> str:
        p = params(min_tokens)
        return (
            f"min_tokens={p.min_tokens} max_tokens={p.max_tokens} bits=7/5 window={p.window_words}"
        )

    return TextChunker("steadlith CDCChunker", "min_tokens", (16, 900), build, describe)


def byte_chunkers() -> list[ByteChunker]:
    chunkers = [
        ByteChunker(
            "kbsync byte CDC",
            "defaults: min 512 / avg 2048 / max 8192",
            lambda data: len(byte_chunks(data)),
            is_kbsync=True,
        )
    ]
    try:
        from pyfastcdc import FastCDC

        fastcdc = FastCDC(2048, min_size=512, max_size=8192)
        chunkers.append(
            ByteChunker(
                "pyfastcdc",
                "avg 2048 / min 512 / max 8192",
                lambda data: sum(1 for _ in fastcdc.cut_buf(data)),
            )
        )
    except Exception as error:
        notes.append(f"pyfastcdc: left out ({type(error).__name__}: {error})")
    return chunkers


# --------------------------------------------------------------------------- tuning


@dataclass(frozen=True)
class Tuned:
    chunker: TextChunker
    value: int
    split: Split
    mean_words: float
    chunks: int

    @property
    def params(self) -> str:
        return self.chunker.describe(self.value)


def _mean_words(split: Split, text: str) -> tuple[float, int]:
    chunks = split(text)
    return sum(_words(c) for c in chunks) / max(len(chunks), 1), len(chunks)


def tune(chunker: TextChunker, text: str) -> Tuned:
    """The knob value whose mean chunk on ``text`` is closest to ``TARGET_WORDS`` words.

    Bisects for the smallest value reaching the target (the mean grows with the knob),
    then keeps whichever of it and its predecessor lands closer.
    """
    cache: dict[int, tuple[float, int]] = {}

    def mean(value: int) -> float:
        if value not in cache:
            cache[value] = _mean_words(chunker.build(value), text)
        return cache[value][0]

    low, high = chunker.bounds
    while low < high:
        middle = (low + high) // 2
        if mean(middle) < TARGET_WORDS:
            low = middle + 1
        else:
            high = middle
    candidates = [v for v in (low - 1, low) if chunker.bounds[0] <= v <= chunker.bounds[1]]
    best = min(candidates, key=lambda v: abs(mean(v) - TARGET_WORDS))
    mean(best)
    return Tuned(chunker, best, chunker.build(best), *cache[best])


# --------------------------------------------------------------------------- throughput


def best_time(fn: Callable[[], object], runs: int = 3, min_time: float = 0.2) -> float:
    """Best of ``runs`` timings of ``fn``; quick calls are repeated to span ``min_time``."""

    def timed(repeat: int) -> float:
        gc.collect()
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - started) / repeat

    first = timed(1)
    repeat = 1 if first >= min_time else max(1, math.ceil(min_time / max(first, 1e-9)))
    times = [first] if repeat == 1 else []
    while len(times) < runs:
        times.append(timed(repeat))
    return min(times)


def prefix_slice(text: str, size_bytes: int) -> str:
    """A prefix of ``text`` of about ``size_bytes``, ending at a paragraph break."""
    if len(text) <= size_bytes:
        return text
    cut = text.rfind("\n\n", 0, size_bytes)
    return text[: cut if cut > 0 else size_bytes]


@dataclass(frozen=True)
class Speed:
    name: str
    group: str  # "text" or "bytes"
    params: str
    mb_s: dict[str, float]
    measured_mb: dict[str, float]
    sliced: dict[str, bool]
    is_kbsync: bool


def measure_throughput(
    tuned: list[Tuned], bytes_: list[ByteChunker], inputs: dict[str, str]
) -> list[Speed]:
    encoded = {label: text.encode("utf-8") for label, text in inputs.items()}
    largest = max(encoded, key=lambda label: len(encoded[label]))
    results: list[Speed] = []

    def run(
        name: str,
        group: str,
        params: str,
        is_kbsync: bool,
        call: Callable[[str, bytes], object],
    ) -> None:
        mb_s: dict[str, float] = {}
        measured: dict[str, float] = {}
        sliced: dict[str, bool] = {}
        for label, text in inputs.items():
            data = encoded[label]
            is_slice = False
            if label == largest and mb_s:
                predicted = len(data) / 1e6 / min(mb_s.values())
                if predicted > SLOW_RUN_S:
                    text = prefix_slice(text, SLICE_MB * 1_000_000)
                    data = text.encode("utf-8")
                    is_slice = True
            seconds = best_time(partial(call, text, data))
            mb_s[label] = len(data) / 1e6 / seconds
            measured[label] = len(data) / 1e6
            sliced[label] = is_slice
        results.append(Speed(name, group, params, mb_s, measured, sliced, is_kbsync))
        console.log(f"throughput: {name} done")

    for t in tuned:
        run(t.chunker.name, "text", t.params, t.chunker.is_kbsync, _on_text(t.split))
    for b in bytes_:
        run(b.name, "bytes", b.params, b.is_kbsync, _on_bytes(b.cut))
    return results


def _on_text(split: Split) -> Callable[[str, bytes], object]:
    return lambda text, _data: split(text)


def _on_bytes(cut: Cut) -> Callable[[str, bytes], object]:
    return lambda _text, data: cut(data)


def print_throughput(speeds: list[Speed], labels: list[str]) -> None:
    by_name = {s.name: s for s in speeds}
    tttd = by_name.get("kbsync TTTD")
    byte_cdc = by_name.get("kbsync byte CDC")
    table = Table(
        title="Throughput (MB/s, best of 3)",
        caption="kbsync ÷ peer: kbsync TTTD for text chunkers, kbsync byte CDC for byte CDC. "
        f"Text chunkers use the churn table's parameters (~{TARGET_WORDS}-word chunks).",
    )
    table.add_column("chunker")
    for label in labels:
        table.add_column(f"{label}\nMB/s", justify="right")
        table.add_column(f"{label}\nkbsync ÷ peer", justify="right")
    table.add_column("note")
    for speed in speeds:
        reference = tttd if speed.group == "text" else byte_cdc
        row = [speed.name]
        for label in labels:
            row.append(f"{speed.mb_s[label]:,.2f}")
            if speed.is_kbsync or reference is None:
                row.append("—")
            else:
                row.append(f"{reference.mb_s[label] / speed.mb_s[label]:,.3g}×")
        sliced = [
            f"{label}: {speed.measured_mb[label]:.1f} MB slice"
            for label in labels
            if speed.sliced[label]
        ]
        row.append("; ".join(sliced))
        table.add_row(*row)
    console.print(table)

    checks = Table(title="Throughput targets (on the generated text)")
    for column in ("target", "measured", "verdict"):
        checks.add_column(column)
    main = labels[-1]
    if tttd is not None:
        checks.add_row(
            f"kbsync TTTD ≥ {TARGET_TTTD_MB_S:.0f} MB/s",
            f"{tttd.mb_s[main]:.1f} MB/s",
            _verdict(tttd.mb_s[main] >= TARGET_TTTD_MB_S),
        )
    local = by_name.get("kbsync local")
    if local is not None:
        checks.add_row(
            f"kbsync local ≥ {TARGET_LOCAL_MB_S:.0f} MB/s",
            f"{local.mb_s[main]:.1f} MB/s",
            _verdict(local.mb_s[main] >= TARGET_LOCAL_MB_S),
        )
    steadlith = by_name.get("steadlith CDCChunker")
    if tttd is not None and steadlith is not None:
        for label in labels:
            ratio = tttd.mb_s[label] / steadlith.mb_s[label]
            checks.add_row(
                f"kbsync TTTD ÷ steadlith per-word ≥ {TARGET_STEADLITH_RATIO:.0f}× ({label})",
                f"{ratio:.1f}×",
                _verdict(ratio >= TARGET_STEADLITH_RATIO),
            )
    console.print(checks)


def _verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


# --------------------------------------------------------------------------- churn

_SENTENCE = re.compile(r"[A-Z0-9\"'(“‘][^\n]*?[.!?]+[\"'’”)]*(?=\s|$)")


@dataclass(frozen=True)
class Edit:
    kind: str  # "insert", "delete" or "replace"
    text: str


def sentence_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _SENTENCE.finditer(text)]


def make_edits(text: str, count: int, seed: int) -> list[Edit]:
    """``count`` single-sentence edits, each applied to the original ``text`` on its own."""
    rng = random.Random(seed)
    spans = sentence_spans(text)
    edits: list[Edit] = []
    for _ in range(count):
        kind = rng.choice(("insert", "delete", "replace"))
        start, end = spans[rng.randrange(len(spans))]
        donor_start, donor_end = spans[rng.randrange(len(spans))]
        while text[donor_start:donor_end] == text[start:end]:
            donor_start, donor_end = spans[rng.randrange(len(spans))]
        donor = text[donor_start:donor_end]
        if kind == "insert":
            edited = f"{text[:start]}{donor} {text[start:]}"
        elif kind == "replace":
            edited = f"{text[:start]}{donor}{text[end:]}"
        elif text[end : end + 1] == " ":  # delete the sentence and the space after it
            edited = text[:start] + text[end + 1 :]
        else:  # the paragraph's last sentence: delete the space before it
            edited = text[: start - 1 if text[start - 1 : start] == " " else start] + text[end:]
        edits.append(Edit(kind, edited))
    return edits


@dataclass(frozen=True)
class Churn:
    tuned: Tuned
    new_chunks: list[int]
    new_share: list[float]
    by_kind: dict[str, list[int]]


def measure_churn(tuned: Tuned, original: str, edits: list[Edit]) -> Churn:
    known = set(tuned.split(original))
    new_chunks: list[int] = []
    new_share: list[float] = []
    by_kind: dict[str, list[int]] = {"insert": [], "delete": [], "replace": []}
    for edit in edits:
        chunks = tuned.split(edit.text)
        fresh = [c for c in chunks if c not in known]
        total = sum(_words(c) for c in chunks)
        new_chunks.append(len(fresh))
        new_share.append(sum(_words(c) for c in fresh) / max(total, 1))
        by_kind[edit.kind].append(len(fresh))
    console.log(f"churn: {tuned.chunker.name} done")
    return Churn(tuned, new_chunks, new_share, by_kind)


def print_churn(results: list[Churn], edits: int, words: int) -> None:
    table = Table(
        title=f"Churn: {edits} single-sentence edits of {words:,} words of prose "
        f"(target mean chunk {TARGET_WORDS} words)"
    )
    for column in ("chunker", "parameters", "mean words", "chunks"):
        table.add_column(column, justify="left" if column in ("chunker", "parameters") else "right")
    for column in (
        "new chunks\nper edit",
        "p95",
        "insert",
        "delete",
        "replace",
        "share of new\ntokens (words)",
    ):
        table.add_column(column, justify="right")
    for churn in results:
        t = churn.tuned
        table.add_row(
            t.chunker.name,
            t.params,
            f"{t.mean_words:.1f}",
            str(t.chunks),
            f"{statistics.fmean(churn.new_chunks):.2f}",
            f"{_p95(churn.new_chunks):.0f}",
            *(f"{statistics.fmean(v):.2f}" if v else "—" for v in churn.by_kind.values()),
            f"{statistics.fmean(churn.new_share):.1%}",
        )
    console.print(table)

    checks = Table(title="Churn targets")
    for column in ("target", "measured", "verdict"):
        checks.add_column(column)
    by_name = {c.tuned.chunker.name: c for c in results}
    if "kbsync TTTD" in by_name:
        value = statistics.fmean(by_name["kbsync TTTD"].new_chunks)
        checks.add_row(
            f"kbsync TTTD ≤ {TARGET_TTTD_NEW_CHUNKS} new chunks per edit",
            f"{value:.2f}",
            _verdict(value <= TARGET_TTTD_NEW_CHUNKS),
        )
    if "fixed-size" in by_name:
        value = statistics.fmean(by_name["fixed-size"].new_chunks)
        checks.add_row("fixed-size ~30 new chunks per edit (reported)", f"{value:.2f}", "—")
    console.print(checks)


def _p95(values: list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)])


# --------------------------------------------------------------------------- the chunking core

TARGET_CORE_RATIO = 1.0
TARGET_LOCAL_RATIO = 0.7
TARGET_NORMALIZE_MB_S = 300.0
TARGET_BYTES_MB_S = 300.0
TARGET_COMPARE_MS = 2.0
LANGCHAIN_SIZE = 2000


def median_time(fn: Callable[[], object], runs: int) -> float:
    """Median of ``runs`` timings of one call of ``fn``."""
    times = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _repeated(text: str, size: int) -> str:
    return (text + "\n\n") * max(1, size // max(len(text.encode()), 1) + 1)


def core_inputs(size: int, seed: int) -> dict[str, str]:
    """Prose, Markdown and source code of about ``size`` UTF-8 bytes each."""
    history = REPO_ROOT.parent / "shared" / "corpora" / "fastapi-docs-history.jsonl.gz"
    if history.is_file():
        import gzip
        import json

        with gzip.open(history, "rt", encoding="utf-8") as lines:
            files = json.loads(next(lines))["files"]
        markdown = "\n\n".join(files[k] for k in sorted(files) if k.endswith(".md"))
        markdown_label = "Markdown (fastapi docs)"
    else:
        markdown = "\n\n".join(p.read_text(encoding="utf-8") for p in corpus_files(".md"))
        markdown_label = "Markdown (examples/corpus)"
        notes.append("../shared/corpora not found: Markdown is examples/corpus repeated")
    code = "\n\n".join(p.read_text(encoding="utf-8")
                        for folder in ("src",) for p in sorted((REPO_ROOT / folder).rglob("*.py")))
    out = {"prose (generated)": generated_text(size, seed), markdown_label: markdown,
           "source code (kbsync)": code}
    return {label: prefix_slice(_repeated(text, size), size) for label, text in out.items()}


@dataclass(frozen=True)
class CoreRow:
    label: str
    mb: float
    tttd: float
    local: float
    sentences: float
    langchain: float
    tttd_numpy: float
    encode: float
    blake2b: float
    copy: float


def _with_kernel(kernel: object, fn: Callable[[], object]) -> Callable[[], object]:
    def call() -> object:
        saved = native.kernel
        native.kernel = kernel  # type: ignore[assignment]
        try:
            return fn()
        finally:
            native.kernel = saved

    return call


Check = tuple[str, str, str, bool | None]
"""A target row: what, measured, goal, met (None: reported only)."""


def measure_core(size: int, seed: int, runs: int) -> tuple[list[CoreRow], list[Check]]:
    import hashlib

    import numpy as np
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=LANGCHAIN_SIZE, chunk_overlap=0)
    compiled = native.kernel
    rows: list[CoreRow] = []
    for label, text in core_inputs(size, seed).items():
        data = text.encode("utf-8")
        mb = len(data) / 1e6
        array = np.frombuffer(data, dtype=np.uint8)

        def rate(fn: Callable[[], object], mb: float = mb) -> float:
            return mb / median_time(fn, runs)

        rows.append(CoreRow(
            label, mb,
            tttd=rate(lambda text=text: chunk_text(text)),
            local=rate(lambda text=text: chunk_text(text, strategy="local")),
            sentences=rate(lambda text=text: chunk_text(text, strategy="sentences")),
            langchain=rate(lambda text=text: splitter.split_text(text)),
            tttd_numpy=rate(_with_kernel(None, lambda text=text: chunk_text(text)))
            if compiled is not None else float("nan"),
            encode=rate(lambda text=text: text.encode("utf-8")),
            blake2b=rate(lambda data=data: hashlib.blake2b(data, digest_size=32).digest()),
            copy=rate(lambda array=array: array.copy()),
        ))
        console.log(f"core: {label} done")

    code = next(text for label, text in core_inputs(size, seed).items() if "code" in label)
    code_mb = len(code.encode()) / 1e6
    prose = next(iter(core_inputs(size, seed).values()))
    prose_bytes = prose.encode()
    old = prefix_slice(prose[200_000:], 100_000)
    words = old.split(" ")
    half = len(words) // 2
    new = " ".join([*words[:half], "an", "inserted", "sentence.", *words[half:]])
    extras: list[Check] = []
    for name, kernel in (("compiled", compiled), ("NumPy", None)):
        if name == "compiled" and kernel is None:
            continue
        norm = code_mb / median_time(_with_kernel(kernel, lambda: normalize(code)), runs)
        cdc = len(prose_bytes) / 1e6 / median_time(
            _with_kernel(kernel, lambda: byte_chunks(prose_bytes)), runs)
        cmp_ms = 1000 * median_time(_with_kernel(kernel, lambda: compare(old, new)), max(runs, 5))
        ok = name == "compiled" or compiled is None
        extras += [
            (f"normalize() on source code ({name})", f"{norm:,.0f} MB/s",
             f"≥ {TARGET_NORMALIZE_MB_S:.0f} MB/s", norm >= TARGET_NORMALIZE_MB_S if ok else None),
            (f"byte CDC on prose ({name})", f"{cdc:,.0f} MB/s", f"≥ {TARGET_BYTES_MB_S:.0f} MB/s",
             cdc >= TARGET_BYTES_MB_S if ok else None),
            (f"compare() of two 100 KB versions ({name})", f"{cmp_ms:.2f} ms",
             f"≤ {TARGET_COMPARE_MS:.0f} ms", cmp_ms <= TARGET_COMPARE_MS if ok else None),
        ]
    return rows, extras


def print_core(rows: list[CoreRow], extras: list[Check], runs: int) -> None:
    table = Table(
        title=f"The chunking core (MB/s, median of {runs}; {native.describe()})",
        caption=f"LangChain = RecursiveCharacterTextSplitter(chunk_size={LANGCHAIN_SIZE}, "
        "chunk_overlap=0).split_text; kbsync TTTD, local and sentences with default "
        "parameters, identities included. Floors: str.encode, BLAKE2b-256 over the bytes, "
        "one NumPy copy.",
    )
    for column in ("input", "MB", "kbsync TTTD", "÷ LangChain", "kbsync local", "÷ LangChain",
                   "kbsync sentences", "÷ LangChain", "LangChain", "TTTD, NumPy path", "encode",
                   "BLAKE2b", "NumPy copy"):
        table.add_column(column, justify="left" if column == "input" else "right")
    for r in rows:
        table.add_row(r.label, f"{r.mb:.1f}", f"{r.tttd:,.1f}", f"{r.tttd / r.langchain:.2f}×",
                      f"{r.local:,.1f}", f"{r.local / r.langchain:.2f}×", f"{r.sentences:,.1f}",
                      f"{r.sentences / r.langchain:.2f}×", f"{r.langchain:,.1f}",
                      f"{r.tttd_numpy:,.1f}", f"{r.encode:,.0f}", f"{r.blake2b:,.0f}",
                      f"{r.copy:,.0f}")
    console.print(table)
    checks = Table(title="Chunking-core targets")
    for column in ("target", "measured", "goal", "verdict"):
        checks.add_column(column)
    for r in rows:
        checks.add_row(f"TTTD ÷ LangChain ({r.label})", f"{r.tttd / r.langchain:.2f}×",
                       f"≥ {TARGET_CORE_RATIO:.1f}×",
                       _verdict(r.tttd / r.langchain >= TARGET_CORE_RATIO))
        checks.add_row(f"local ÷ LangChain ({r.label})", f"{r.local / r.langchain:.2f}×",
                       f"≥ {TARGET_LOCAL_RATIO:.1f}×",
                       _verdict(r.local / r.langchain >= TARGET_LOCAL_RATIO))
        checks.add_row(f"sentences ÷ LangChain ({r.label})",
                       f"{r.sentences / r.langchain:.2f}×", f"≥ {TARGET_LOCAL_RATIO:.1f}×",
                       _verdict(r.sentences / r.langchain >= TARGET_LOCAL_RATIO))
    for name, measured, goal, ok in extras:
        checks.add_row(name, measured, goal, "—" if ok is None else _verdict(ok))
    console.print(checks)


_STREAM_SCRIPT = """
import resource, sys, time
sys.path.insert(0, {bench!r})
from corpus import generated_text
from kbsync import chunk_stream
piece = generated_text(4_000_000, 1)
target = {size}
def pieces():
    sent = 0
    while sent < target:
        yield piece
        sent += len(piece)
started = time.perf_counter()
count = sum(1 for _ in chunk_stream(pieces()))
# VmHWM is this process's own peak; ru_maxrss would count the parent's from before exec.
status = open("/proc/self/status").read() if sys.platform == "linux" else ""
hwm = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
peak = int(hwm[0]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(count, time.perf_counter() - started, peak)
"""


def measure_stream(size_mb: int) -> Check:
    """Peak RSS of a fresh process streaming ``size_mb`` MB through ``chunk_stream``."""
    import subprocess

    script = _STREAM_SCRIPT.format(bench=str(Path(__file__).resolve().parent),
                                   size=size_mb * 1_000_000)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    peak = float(out[2])
    return (f"chunk_stream of {size_mb:,} MB: peak RSS ({float(out[1]):.0f} s, {out[0]} chunks)",
            f"{peak:.0f} MB", "< 100 MB", peak < 100)


# --------------------------------------------------------------------------- main


def _versions() -> str:
    names = ["kbsync", "langchain-text-splitters", "semchunk", "chonkie", "steadlith", "pyfastcdc"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"Python {platform.python_version()}; " + ", ".join(found)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=50.0, help="generated text size (MB)")
    parser.add_argument("--edits", type=int, default=500, help="number of churn edits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="5 MB generated text, 100 edits")
    parser.add_argument("--core", action="store_true", help="only the chunking-core table")
    parser.add_argument("--repeat", type=int, default=3, help="runs per core figure (median)")
    parser.add_argument("--stream-mb", type=int, default=0,
                        help="also stream this many MB through chunk_stream in a fresh process "
                        "and report its peak RSS (1000 for the 1 GB target)")
    args = parser.parse_args(argv)
    size_mb, edit_count = (5.0, 100) if args.quick else (args.size_mb, args.edits)

    console.print(_versions())
    console.print(f"{platform.processor() or platform.machine()}, {platform.system()}")
    core_rows, core_extras = measure_core(int(size_mb * 1_000_000), args.seed, args.repeat)
    if args.stream_mb:
        core_extras.append(measure_stream(args.stream_mb))
    print_core(core_rows, core_extras, args.repeat)
    if args.core:
        for note in notes:
            console.print(f"[yellow]note:[/yellow] {note}")
        return

    prose = "\n\n".join(p.read_text(encoding="utf-8") for p in corpus_files(".txt"))
    started = time.perf_counter()
    chunkers = text_chunkers()
    tuned = [tune(chunker, prose) for chunker in chunkers]
    console.log(f"tuned {len(tuned)} chunkers to ~{TARGET_WORDS} words")

    sample = sample_corpus_text()
    generated = generated_text(int(size_mb * 1_000_000), args.seed)
    inputs = {
        f"sample corpus {len(sample.encode()) / 1e6:.2f} MB": sample,
        f"generated {len(generated.encode()) / 1e6:.0f} MB": generated,
    }
    speeds = measure_throughput(
        [t for t in tuned if t.chunker.name != "fixed-size"], byte_chunkers(), inputs
    )
    del generated

    edits = make_edits(prose, edit_count, args.seed)
    churn = [measure_churn(t, prose, edits) for t in tuned]

    print_throughput(speeds, list(inputs))
    print_churn(churn, edit_count, _words(prose))
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"total time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
