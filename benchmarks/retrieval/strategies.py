"""Chunking strategies side by side: re-embedding churn on real histories beside answer recall.

One command measures every configuration on both axes and prints them together.

Configurations (``KBSYNC`` and ``PEERS`` below; ``--kbsync STRATEGY:key=value,...`` adds more)
    kbsync's default as ``kbsync init`` writes it (``kbsync.engine.DEFAULT_CHUNKER``: the
    sentences strategy, 48-192 tokens); TTTD at 48-192 tokens (the previous default), the
    same with ``snap = true``; the strictly local strategy with the same limits. Peers: LangChain's
    ``RecursiveCharacterTextSplitter(chunk_size=2000, chunk_overlap=0)``, the same splitter
    with ``chunk_size=128`` and kbsync's token estimate as its length function, and semchunk
    at 128 tokens of the same estimate. The estimate (``EstimatingCounter`` over
    ``scan_words``, cl100k-like) counts tokens everywhere in this benchmark, so "128 tokens"
    means the same thing for every splitter and for kbsync's limits.

Recall (``<repo>/../shared/corpora/qa-squad11-train.json.gz``: 50 long SQuAD training
articles, 500 questions with character spans of their answers)
    Every configuration is searched in ``vector``, ``text`` and ``hybrid`` modes, k = 10,
    without context windows and with 512-token ones. A result is relevant when the span it
    returns overlaps a gold span of the question in the question's document: the chunk's
    span, or with context on the span from the window's first chunk to its last, in
    character offsets of the document text. Scores: recall@1, recall@5 (a relevant result
    at rank 1, in the top 5), MRR@10 (1 / rank of the first relevant result, 0 beyond 10),
    and the mean estimated tokens of one returned result (what a prompt pays per hit).

    kbsync configurations run through kbsync itself: a temporary knowledge base over the
    documents written as ``.txt`` files (``kbsync init``, its ``[chunker]`` table replaced,
    ``[embedder] kind = "local"``), a real ``sync`` and ``KnowledgeBase.search``. A hit's
    offsets index the stored canonical text; they are mapped back to the file's text
    through the normalizer's word offsets (on this set the two texts are equal, which the
    run checks and reports). Peers chunk the same texts in-process and are indexed with
    the same embedder and kbsync's search (``peer_index.py``), their windows grown over
    neighbouring chunks up to 512 tokens as kbsync grows its own. Vectors of identical
    texts are computed once per run and shared by all configurations.

Churn (the three histories of ``<repo>/../shared/corpora/``, read with its ``replay.py``)
    Every version of every file is read through kbsync's extractor for its kind (Markdown
    and HTML become their record text, as a sync sees them) and every configuration,
    peers included, chunks that record text. After the snapshot, for each commit: the
    re-embedded tokens are the tokens of the distinct chunks of the changed files whose
    text no document had before the commit (the embedding cache's rule: a chunk seen
    anywhere is not embedded again, a renamed file costs only its edits). The line-diff
    oracle of a commit is the tokens of the new versions' lines outside the equal runs of
    a line diff against the old versions (``changed_spans`` of ``benchmarks/replay.py``; a
    new file counts whole). The table sums both over each history and gives their ratio.
    Only changed files are chunked again.

Run it from the repository root with the environment that has ``sentence-transformers``,
the model package and the peers (``benchmarks/requirements.txt``)::

    python benchmarks/retrieval/strategies.py                  # everything (tens of minutes)
    python benchmarks/retrieval/strategies.py --quick          # 10 documents, 100 questions,
                                                               # one history
    python benchmarks/retrieval/strategies.py --embedder hashing --quick   # offline smoke run
    python benchmarks/retrieval/strategies.py --kbsync sentences:min_tokens=64,max_tokens=256
    python benchmarks/retrieval/strategies.py --json           # the figures as JSON
    python benchmarks/retrieval/strategies.py --half held      # the questions of the 25
                                                               # articles held out from tuning
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from peer_index import CachingEmbedder, K, PeerIndex, tokens  # noqa: E402
from toml_tables import set_table  # noqa: E402

from kbsync.app.knowledge_base import KnowledgeBase  # noqa: E402
from kbsync.core.chunking import make_params  # noqa: E402
from kbsync.core.normalize import normalize  # noqa: E402
from kbsync.engine import (  # noqa: E402
    DEFAULT_CHUNKER,
    MODEL_TAIL_ABOVE,
    init_config,
    make_embedder,
)
from kbsync.errors import ConfigError, KbsyncError  # noqa: E402
from kbsync.extract.registry import extractor_for, media_type_for  # noqa: E402
from kbsync.extract.text import first_line_title  # noqa: E402
from kbsync.sync import Chunker  # noqa: E402
from replay import changed_spans  # noqa: E402

__all__ = ["ChunkBook", "OffsetMap", "first_relevant", "half_of", "main", "overlaps",
           "scores_of"]

ROOT = HERE.parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"
QA_FILE = "qa-squad11-train.json.gz"
HISTORIES = ("fastapi-docs-history", "django-docs-history", "fastapi-docs-2023-history")
QUICK_HISTORY = "fastapi-docs-2023-history"
QUICK_DOCUMENTS = 10
QUICK_QUESTIONS = 100
MODES = ("vector", "text", "hybrid")
CONTEXTS = (0, 512)  # context_tokens: the chunk alone, then kbsync's default window

Span = tuple[int, int]
Split = Callable[[str], list[Span]]

console = Console(width=160, stderr=True)
notes: list[str] = []


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class KbsyncSetup:
    """A kbsync chunker configuration, measured through kbsync's own engine."""

    label: str
    strategy: str
    params: Mapping[str, Any]

    @property
    def chunker(self) -> Chunker:
        return Chunker(self.strategy, dict(self.params))

    @property
    def describe(self) -> str:
        return " ".join([self.strategy, *(f"{k}={v}" for k, v in self.params.items())])


@dataclass(frozen=True)
class PeerSetup:
    """Another splitter: ``make()`` returns a function from a text to its chunks' spans."""

    label: str
    describe: str
    make: Callable[[], Split]


def _located(text: str, chunks: Iterable[str]) -> list[Span]:
    """Spans of ``chunks``, substrings of ``text`` in order (what a splitter returned)."""
    spans: list[Span] = []
    cursor = 0
    for chunk in chunks:
        if not chunk.strip():
            continue
        at = text.find(chunk, cursor)
        if at < 0:
            at = text.find(chunk)
        if at < 0:
            raise ValueError(f"a chunk is not a substring of its text: {chunk[:40]!r}")
        spans.append((at, at + len(chunk)))
        cursor = at + len(chunk)
    return spans


def _langchain(size: int, by_tokens: bool) -> Split:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0,
                                              length_function=tokens if by_tokens else len)
    return lambda text: _located(text, splitter.split_text(text))


def _semchunk(size: int) -> Split:
    import semchunk

    chunker = semchunk.chunkerify(tokens, size)

    def split(text: str) -> list[Span]:
        chunks, offsets = chunker(text, offsets=True)
        return [(int(s), int(e)) for c, (s, e) in zip(chunks, offsets, strict=True)
                if c.strip()]

    return split


# TTTD as `kbsync init` wrote it before the sentences strategy became the default.
_TTTD = {"min_tokens": 48, "max_tokens": 192, "primary_bits": 6, "backup_bits": 4}

KBSYNC: tuple[KbsyncSetup, ...] = (
    # What `kbsync init` writes with a model (token counts aside: every configuration here
    # counts the estimate) and with the hashing embedder.
    KbsyncSetup("kbsync default, model", DEFAULT_CHUNKER.strategy,
                {**DEFAULT_CHUNKER.params, "tail_above": MODEL_TAIL_ABOVE}),
    KbsyncSetup("kbsync default", DEFAULT_CHUNKER.strategy, dict(DEFAULT_CHUNKER.params)),
    KbsyncSetup("kbsync tttd", "tttd", _TTTD),
    KbsyncSetup("kbsync tttd snap", "tttd", {**_TTTD, "snap": True}),
    KbsyncSetup("kbsync local", "local", {"min_tokens": 48, "max_tokens": 192}),
)

PEERS: tuple[PeerSetup, ...] = (
    PeerSetup("langchain 2000 chars",
              "RecursiveCharacterTextSplitter(chunk_size=2000, chunk_overlap=0)",
              lambda: _langchain(2000, by_tokens=False)),
    PeerSetup("langchain 128 tokens",
              "RecursiveCharacterTextSplitter(chunk_size=128, chunk_overlap=0, "
              "length_function=kbsync estimate)",
              lambda: _langchain(128, by_tokens=True)),
    PeerSetup("semchunk 128", "semchunk.chunkerify(kbsync estimate, 128)",
              lambda: _semchunk(128)),
)


def parse_kbsync(spec: str) -> KbsyncSetup:
    """``STRATEGY:key=value,key=value`` as a configuration (values: bool, int, float, text)."""
    strategy, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, raw = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{item!r}: expected key=value")
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            for kind in (int, float):
                try:
                    value = kind(raw)
                    break
                except ValueError:
                    pass
        params[key.strip()] = value
    return KbsyncSetup(f"kbsync {spec}", strategy.strip(), params)


def available(setup: KbsyncSetup) -> str:
    """Why ``setup`` cannot run here ("" when it can)."""
    try:
        make_params(setup.strategy, **setup.params)
    except (KbsyncError, TypeError) as error:
        return str(error)
    return ""


def kbsync_split(setup: KbsyncSetup) -> Callable[[str], list[str]]:
    chunker = setup.chunker
    return lambda text: [c.text for c in chunker.chunks(text)]


def peer_split(setup: PeerSetup) -> Callable[[str], list[str]]:
    split = setup.make()
    return lambda text: [text[s:e] for s, e in split(text)]


# --------------------------------------------------------------------------- recall


@dataclass(frozen=True)
class Document:
    id: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    doc: str
    question: str
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Returned:
    """One search result: the span of text it returns, and that span's tokens."""

    doc: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class Scores:
    recall_1: float
    recall_5: float
    mrr_10: float
    context_tokens: float


def overlaps(a: Span, b: Span) -> bool:
    """Whether two half-open character spans share a character."""
    return a[0] < b[1] and b[0] < a[1]


def first_relevant(question: Question, returned: Sequence[Returned]) -> int | None:
    """The rank (from 1) of the first result overlapping a gold span, within :data:`K`."""
    for rank, r in enumerate(returned[:K], start=1):
        if r.doc == question.doc and any(overlaps((r.start, r.end), g) for g in question.spans):
            return rank
    return None


def scores_of(ranks: Sequence[int | None], sizes: Sequence[int]) -> Scores:
    """Recall@1, recall@5, MRR@10 of first-relevant ranks; mean tokens of the results."""
    n = max(len(ranks), 1)
    return Scores(recall_1=sum(r == 1 for r in ranks) / n,
                  recall_5=sum(r is not None and r <= 5 for r in ranks) / n,
                  mrr_10=sum(1.0 / r for r in ranks if r is not None) / n,
                  context_tokens=statistics.fmean(sizes) if sizes else 0.0)


class OffsetMap:
    """Character offsets of a normalized text mapped back to the text it came from."""

    def __init__(self, raw: str, canonical: str) -> None:
        self.same = raw == canonical
        if self.same:
            return
        found = normalize(raw)
        if found.text != canonical:
            raise ValueError("the canonical text is not the normalized raw text")
        again = normalize(canonical)  # idempotent: the same words, offsets into canonical
        self.canon_starts, self.canon_ends = again.word_starts, again.word_ends
        self.raw_starts, self.raw_ends = found.word_starts, found.word_ends
        self.length = len(raw)

    def start(self, offset: int) -> int:
        """Where the character at ``offset`` (or the next word) begins in the raw text."""
        if self.same:
            return offset
        i = int(np.searchsorted(self.canon_ends, offset, side="right"))
        if i >= len(self.canon_starts):
            return self.length
        inside = max(0, offset - int(self.canon_starts[i]))
        return int(self.raw_starts[i]) + min(inside, int(self.raw_ends[i] - self.raw_starts[i]))

    def end(self, offset: int) -> int:
        """Where a span ending at ``offset`` ends in the raw text."""
        if self.same:
            return offset
        j = int(np.searchsorted(self.canon_starts, offset, side="left")) - 1
        if j < 0:
            return 0
        inside = offset - int(self.canon_starts[j])
        return int(self.raw_starts[j]) + min(inside, int(self.raw_ends[j] - self.raw_starts[j]))


HALVES_SEED = 36


def half_of(docs: Sequence[Document], half: str) -> set[str]:
    """The ids of one half of the articles, ``"tune"`` or ``"held"``: their ids sorted and
    shuffled by ``random.Random(36)``, the first half to tune on, the rest held out."""
    ids = sorted(d.id for d in docs)
    random.Random(HALVES_SEED).shuffle(ids)
    return set(ids[:len(ids) // 2] if half == "tune" else ids[len(ids) // 2:])


def load_qa(path: Path, documents: int | None) -> tuple[list[Document], list[Question]]:
    data = json.loads(gzip.decompress(path.read_bytes()))
    docs = [Document(d["id"], d["text"]) for d in data["documents"]][:documents]
    wanted = {d.id for d in docs}
    questions = [Question(q["id"], q["doc"], q["question"],
                          tuple((int(s), int(e)) for s, e in q["spans"]))
                 for q in data["questions"] if q["doc"] in wanted]
    return docs, questions


@dataclass
class ChunkStats:
    chunks: int = 0
    mean_tokens: float = 0.0
    straddling: float = 0.0  # share of chunks holding a paragraph break
    over_window: int | None = None  # chunks longer than the model's input window


def chunk_stats(texts: Sequence[str], embedder: CachingEmbedder) -> ChunkStats:
    limit = embedder.max_input_tokens
    over = None
    if limit is not None and not embedder.identity.startswith("hashing"):
        over = int(sum(n > limit for n in embedder.count_tokens(list(texts))))
    return ChunkStats(len(texts), statistics.fmean(map(tokens, texts)) if texts else 0.0,
                      sum("\n\n" in t for t in texts) / max(len(texts), 1), over)


Evaluation = dict[str, dict[str, Scores]]  # context label -> mode -> scores
Ask = Callable[[Question, str, int], list[Returned]]


def evaluate(ask: Ask, questions: Sequence[Question], modes: Sequence[str]) -> Evaluation:
    out: Evaluation = {}
    for context in CONTEXTS:
        by_mode: dict[str, Scores] = {}
        for mode in modes:
            ranks, sizes = [], []
            for q in questions:
                returned = ask(q, mode, context)
                ranks.append(first_relevant(q, returned))
                sizes.extend(r.tokens for r in returned)
            by_mode[mode] = scores_of(ranks, sizes)
        out[str(context)] = by_mode
    return out


def _open_kb(folder: Path, setup: KbsyncSetup, settings: Mapping[str, Any]) -> KnowledgeBase:
    init_config(folder, ["docs"], embedder=dict(settings))
    file = folder / "kbsync.toml"
    text = set_table(file.read_text(encoding="utf-8"), "chunker",
                     {"strategy": setup.strategy, **setup.params})
    file.write_text(text, encoding="utf-8")
    try:
        return KnowledgeBase.open(folder)
    except ConfigError as error:
        if "allow_truncation" not in str(error):
            raise
        notes.append(f"{setup.label}: kbsync refused its max_tokens for the model's input "
                     "window; ran with allow_truncation = true")
        file.write_text(set_table(text, "embedder", {**settings, "allow_truncation": True}),
                        encoding="utf-8")
        return KnowledgeBase.open(folder)


def kbsync_recall(setup: KbsyncSetup, settings: Mapping[str, Any], embedder: CachingEmbedder,
                  docs: Sequence[Document], questions: Sequence[Question],
                  modes: Sequence[str]) -> tuple[ChunkStats, Evaluation]:
    """Chunk statistics and scores of ``setup``, through a real knowledge base."""
    by_file = {f"{i:03d}.txt": d for i, d in enumerate(docs)}  # titles need not be file names
    with tempfile.TemporaryDirectory(prefix="kbsync-strategies-") as tmp:
        folder = Path(tmp)
        (folder / "docs").mkdir()
        for name, doc in by_file.items():
            (folder / "docs" / name).write_text(doc.text, encoding="utf-8", newline="")
        with _open_kb(folder, setup, settings) as kb:
            kb.embedder = embedder  # the run's shared vectors; the same identity
            report = kb.sync(yes=True)
            if report.failed:
                notes.append(f"{setup.label}: the sync reported failures")
            # Every current chunk's span, by index: a window may hold chunks the search
            # does not return (boilerplate), which the store's indexed chunks leave out.
            stored = {key: kb.document(key).text for key in by_file}
            chunker = setup.chunker
            spans = {key: [(c.start, c.end) for c in chunker.chunks(text)]
                     for key, text in stored.items()}
            indexed = sum(map(len, spans.values()))
            if indexed != kb.status().chunks:
                notes.append(f"{setup.label}: the store holds {kb.status().chunks} chunks, "
                             f"chunking its texts again made {indexed}")
            maps = {key: OffsetMap(by_file[key].text, stored[key]) for key in spans}
            differ = sum(not m.same for m in maps.values())
            if differ:
                notes.append(f"{setup.label}: {differ} stored texts differ from their files; "
                             "offsets mapped through the normalizer")
            texts = [stored[key][s:e] for key in sorted(spans) for s, e in spans[key]]
            stats = chunk_stats(texts, embedder)

            def ask(q: Question, mode: str, context: int) -> list[Returned]:
                hits = kb.search(q.question, k=K, mode=mode,  # type: ignore[arg-type]
                                 context_tokens=context)
                out = []
                for h in hits:
                    first, last = (h.first, h.last) if h.first >= 0 else (h.index, h.index)
                    m = maps[h.key]
                    if spans[h.key][h.index] != (h.start, h.end):
                        raise AssertionError(f"{setup.label}: hit {h.key}#{h.index} is not "
                                             "where chunking the stored text puts it")
                    out.append(Returned(by_file[h.key].id, m.start(spans[h.key][first][0]),
                                        m.end(spans[h.key][last][1]),
                                        tokens(h.context or h.text)))
                return out

            return stats, evaluate(ask, questions, modes)


def peer_recall(setup: PeerSetup, embedder: CachingEmbedder, docs: Sequence[Document],
                questions: Sequence[Question],
                modes: Sequence[str]) -> tuple[ChunkStats, Evaluation]:
    """Chunk statistics and scores of a peer splitter, indexed in-process."""
    split = setup.make()
    owners: list[str] = []
    spans: list[Span] = []
    for doc in docs:
        for span in split(doc.text):
            owners.append(doc.id)
            spans.append(span)
    text_of = {d.id: d.text for d in docs}
    texts = [text_of[o][s:e] for o, (s, e) in zip(owners, spans, strict=True)]
    stats = chunk_stats(texts, embedder)
    index = PeerIndex(texts, embedder, owners,
                      {d.id: first_line_title(d.text) for d in docs})  # a .txt's title

    def ask(q: Question, mode: str, context: int) -> list[Returned]:
        out = []
        for _, first, last in index.windows(q.question, K, mode, context):
            start, end = spans[first][0], spans[last][1]
            out.append(Returned(owners[first], start, end,
                                tokens(text_of[owners[first]][start:end])))
        return out

    return stats, evaluate(ask, questions, modes)


# --------------------------------------------------------------------------- churn


@dataclass
class ChunkBook:
    """The chunk texts of the current documents of one configuration, by path."""

    by_path: dict[str, list[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def commit(self, changed: Mapping[str, Sequence[str] | None]) -> list[str]:
        """Apply new chunk lists (None: the path is gone); the distinct texts to embed.

        A text is to embed when no document had it before the commit, whichever path
        it was at: the embedding cache's rule.
        """
        fresh = list(dict.fromkeys(t for chunks in changed.values() if chunks
                                   for t in chunks if not self.counts[t]))
        for path, chunks in changed.items():
            self.counts.subtract(self.by_path.pop(path, []))
            if chunks is not None:
                self.by_path[path] = list(chunks)
                self.counts.update(chunks)
        self.counts = +self.counts  # drop the texts no document has any more
        return fresh


@dataclass
class Churn:
    commits: int = 0
    tokens: int = 0  # re-embedded tokens over the history's commits
    oracle: int = 0  # tokens of the changed lines (line-diff oracle)

    @property
    def ratio(self) -> float:
        return self.tokens / self.oracle if self.oracle else float("nan")


def _corpora_replay() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kbsync_corpora_replay",
                                                  CORPORA / "replay.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(CORPORA / "replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record_text(path: str, content: str) -> str | None:
    """The text kbsync chunks for this file (None: not a document, or unreadable)."""
    media = media_type_for(path)
    extractor = extractor_for(media)
    if extractor is None:
        return None
    try:
        return extractor.extract(content.encode("utf-8"), locator=path, media_type=media).text
    except KbsyncError as error:
        notes.append(f"{path}: not extracted ({error})")
        return None


def oracle_tokens(old: str | None, new: str) -> int:
    """Tokens of the lines of ``new`` that a line diff against ``old`` does not keep."""
    if old is None:
        return tokens(new)
    return sum(tokens(new[s:e]) for s, e in changed_spans(old, new))


def history_churn(name: str,
                  splits: Mapping[str, Callable[[str], list[str]]]) -> dict[str, Churn]:
    """Re-embedded tokens and the oracle over one history, per configuration."""
    replay = _corpora_replay()
    books = {label: ChunkBook() for label in splits}
    out = {label: Churn() for label in splits}
    raw: dict[str, str] = {}
    for event in replay.iter_history(CORPORA / f"{name}.jsonl.gz"):
        changed: dict[str, str | None] = {}
        oracle = 0
        if event["kind"] == "snapshot":
            raw = dict(event["files"])
            changed = {p: record_text(p, t) for p, t in raw.items()}
        else:
            for change in event["changes"]:
                path, new = change["path"], change["content"]
                old = raw.pop(path, None)
                if change["op"] == "rename":
                    old = raw.pop(change["old_path"], None)
                    changed[change["old_path"]] = None
                if new is None:
                    changed[path] = None
                    continue
                raw[path] = new
                changed[path] = record_text(path, new)
                if changed[path] is not None:
                    oracle += oracle_tokens(old, new)
        for label, split in splits.items():
            chunks = {p: None if t is None else split(t) for p, t in changed.items()}
            fresh = books[label].commit(chunks)
            if event["kind"] == "commit":
                out[label].commits += 1
                out[label].tokens += sum(map(tokens, fresh))
                out[label].oracle += oracle
    return out


# --------------------------------------------------------------------------- report


@dataclass
class Result:
    label: str
    params: str
    stats: ChunkStats | None = None
    recall: Evaluation = field(default_factory=dict)
    churn: dict[str, Churn] = field(default_factory=dict)
    seconds: float = 0.0

    def churn_total(self) -> Churn:
        total = Churn()
        for c in self.churn.values():
            total.commits += c.commits
            total.tokens += c.tokens
            total.oracle += c.oracle
        return total


def _f(value: float) -> str:
    return f"{100 * value:.1f}"


def print_report(results: Sequence[Result], modes: Sequence[str], histories: Sequence[str],
                 questions: int, docs: int) -> None:
    out = Console(width=220)
    table = Table(title="Configurations (tokens: kbsync's estimate)")
    for column in ("configuration", "parameters"):
        table.add_column(column)
    for column in ("chunks", "mean\ntokens", "holding a\nparagraph break", "over the\nmodel window",
                   "seconds"):
        table.add_column(column, justify="right")
    for r in results:
        s = r.stats
        if s is None:  # recall not measured: the QA set was not chunked
            table.add_row(r.label, r.params, "—", "—", "—", "—", f"{r.seconds:.0f}")
            continue
        table.add_row(r.label, r.params, str(s.chunks), f"{s.mean_tokens:.0f}",
                      f"{s.straddling:.1%}", "—" if s.over_window is None else str(s.over_window),
                      f"{r.seconds:.0f}")
    out.print(table)

    table = Table(title=f"Recall: {questions} questions over {docs} documents, k = {K} "
                        "(recall@1 / recall@5 / MRR@10 in %, tokens per hit)")
    table.add_column("configuration")
    table.add_column("context")
    for mode in modes:
        table.add_column(f"{mode}\nR@1 / R@5 / MRR", justify="right")
    table.add_column("tokens\nper hit", justify="right")
    for r in results:
        for context, by_mode in r.recall.items():
            cells = [f"{_f(s.recall_1)} / {_f(s.recall_5)} / {_f(s.mrr_10)}"
                     for s in (by_mode[m] for m in modes)]
            hit_tokens = statistics.fmean(by_mode[m].context_tokens for m in modes)
            table.add_row(r.label, "chunk" if context == "0" else context, *cells,
                          f"{hit_tokens:.0f}")
    out.print(table)

    if not histories:
        out.print("churn: not measured")
        return
    table = Table(title="Churn: re-embedded tokens over each history's commits, "
                        "and their ratio to the line-diff oracle")
    table.add_column("configuration")
    for name in histories:
        table.add_column(f"{name}\ntokens (× oracle)", justify="right")
    table.add_column("all\n× oracle", justify="right")
    for r in results:
        cells = [f"{r.churn[n].tokens:,} ({r.churn[n].ratio:.2f}×)" if n in r.churn else "—"
                 for n in histories]
        total = r.churn_total()
        table.add_row(r.label, *cells, f"{total.ratio:.2f}×" if total.oracle else "—")
    if results and results[0].churn:
        first = results[0]
        table.add_row("line-diff oracle", *(f"{first.churn[n].oracle:,}" if n in first.churn
                                            else "—" for n in histories),
                      f"{first.churn_total().oracle:,}")
    out.print(table)

    table = Table(title="Side by side: churn and recall@5 (%)")
    table.add_column("configuration")
    table.add_column("churn\n× oracle", justify="right")
    for mode in modes:
        table.add_column(f"{mode}\nchunk", justify="right")
        table.add_column(f"{mode}\n512", justify="right")
    for r in results:
        total = r.churn_total()
        cells = []
        for mode in modes:
            for context in ("0", "512"):
                s = r.recall.get(context, {}).get(mode)
                cells.append("—" if s is None else _f(s.recall_5))
        table.add_row(r.label, f"{total.ratio:.2f}×" if total.oracle else "—", *cells)
    out.print(table)


def to_json(results: Sequence[Result], meta: Mapping[str, Any]) -> str:
    rows = []
    for r in results:
        rows.append({"label": r.label, "params": r.params, "seconds": round(r.seconds, 1),
                     "chunks": None if r.stats is None else asdict(r.stats),
                     "recall": {c: {m: asdict(s) for m, s in by.items()}
                                for c, by in r.recall.items()},
                     "churn": {n: {**asdict(c), "ratio": c.ratio} for n, c in r.churn.items()}})
    return json.dumps({**meta, "configurations": rows, "notes": notes}, indent=2)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_DOCUMENTS} documents, {QUICK_QUESTIONS} questions, "
                             f"one history ({QUICK_HISTORY})")
    parser.add_argument("--embedder", choices=("local", "hashing"), default="local")
    parser.add_argument("--kbsync", action="append", type=parse_kbsync, default=[],
                        metavar="STRATEGY:key=value,...", help="another kbsync configuration")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the configurations whose label holds TEXT")
    parser.add_argument("--no-recall", action="store_true", help="churn only")
    parser.add_argument("--no-churn", action="store_true", help="recall only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--half", choices=("tune", "held"),
                        help="ask only the questions of one half of the articles (every "
                             "article is still indexed): the half ranking changes are tuned "
                             "on, or the half held out from tuning")
    args = parser.parse_args(argv)

    qa_path = CORPORA / QA_FILE
    if not qa_path.is_file():
        console.print(f"no corpus at {qa_path}: the benchmark needs ../shared/corpora")
        return 2
    started = time.perf_counter()
    settings: dict[str, Any] = ({"kind": "hashing", "dimension": 1024}
                                if args.embedder == "hashing" else {"kind": "local"})
    embedder = CachingEmbedder(make_embedder(settings))
    docs, questions = load_qa(qa_path, QUICK_DOCUMENTS if args.quick else None)
    if args.quick:
        questions = questions[:QUICK_QUESTIONS]
    if args.half:
        wanted = half_of(docs, args.half)
        questions = [q for q in questions if q.doc in wanted]
    histories = (QUICK_HISTORY,) if args.quick else HISTORIES

    kbsync: list[KbsyncSetup] = []
    for setup in (*KBSYNC, *args.kbsync):
        why = available(setup)
        if why:
            notes.append(f"{setup.label}: skipped ({why})")
        else:
            kbsync.append(setup)
    peers = list(PEERS)
    if args.only:
        kbsync = [s for s in kbsync if any(t in s.label for t in args.only)]
        peers = [s for s in peers if any(t in s.label for t in args.only)]

    results: list[Result] = []
    for k_setup in kbsync:
        results.append(Result(k_setup.label, k_setup.describe))
    for p_setup in peers:
        results.append(Result(p_setup.label, p_setup.describe))
    by_label = {r.label: r for r in results}

    if not args.no_recall:
        for k_setup in kbsync:
            t0 = time.perf_counter()
            r = by_label[k_setup.label]
            try:
                r.stats, r.recall = kbsync_recall(k_setup, settings, embedder, docs, questions,
                                                  MODES)
            except Exception as error:  # one configuration's failure must not lose the rest
                notes.append(f"{k_setup.label}: recall failed ({type(error).__name__}: {error})")
            r.seconds += time.perf_counter() - t0
            console.log(f"recall: {k_setup.label} done ({embedder.computed} texts embedded)")
        for p_setup in peers:
            t0 = time.perf_counter()
            r = by_label[p_setup.label]
            try:
                r.stats, r.recall = peer_recall(p_setup, embedder, docs, questions, MODES)
            except Exception as error:
                notes.append(f"{p_setup.label}: recall failed ({type(error).__name__}: {error})")
            r.seconds += time.perf_counter() - t0
            console.log(f"recall: {p_setup.label} done ({embedder.computed} texts embedded)")
    if not args.no_churn:
        splits = {s.label: kbsync_split(s) for s in kbsync}
        splits.update({s.label: peer_split(s) for s in peers})
        for name in histories:
            if not (CORPORA / f"{name}.jsonl.gz").is_file():
                notes.append(f"{name}: no such history in ../shared/corpora; left out")
                continue
            t0 = time.perf_counter()
            for label, churn in history_churn(name, splits).items():
                by_label[label].churn[name] = churn
            console.log(f"churn: {name} done in {time.perf_counter() - t0:.0f} s")

    meta = {"embedder": embedder.identity, "documents": len(docs), "questions": len(questions),
            "histories": list(histories), "seconds": round(time.perf_counter() - started)}
    if args.json:
        print(to_json(results, meta))
    else:
        print_report(results, MODES, [h for h in histories if any(h in r.churn
                                                                 for r in results)],
                     len(questions), len(docs))
        out = Console(width=220)
        for note in notes:
            out.print(f"note: {note}", markup=False)
        out.print(f"embedder: {embedder.identity}; {embedder.computed} distinct texts embedded; "
                  f"total time {meta['seconds']} s", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
