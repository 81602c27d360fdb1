"""Retrieval benchmark: answer recall and re-embedding churn, side by side, per configuration.

What is measured
    For each configuration an index of the sample corpus (``examples/corpus``, 28 files) is
    built, and every question of ``questions.jsonl`` (see ``check_questions.py``) is asked in
    three modes, ``vector``, ``text`` and ``hybrid``, with k = 10. A returned result is
    *relevant* when its context (``hit.context`` when kbsync returns one, else the chunk
    text) holds the question's answer passage:

    * the answer, whitespace runs collapsed to one space, is a substring of the context,
      collapsed the same way; or
    * at least 60% of the answer's word 4-grams occur in the context (words are ``\\w+``
      runs, lower-cased; an answer of fewer than four words is one gram). This is fair to
      small chunks that cut a two-sentence answer in half, and to contexts that hold the
      passage with different markup or line breaks.

    Scores: recall@1 and recall@5 (share of questions with a relevant result at rank 1, in
    the top 5) and MRR@10 (mean of 1 / rank of the first relevant result, 0 when none is in
    the top 10). "Context tokens per hit" is the mean size of one returned result's context
    (over every result returned for every question): what a RAG prompt pays per result.
    Tokens are counted everywhere with kbsync's ``EstimatingCounter`` over
    ``kbsync.core.normalize.scan_words`` (a cl100k-like estimate).

    "Re-embedded token share" is measured on an edit set: N random single-sentence edits
    (insert, delete or replace a sentence; ``make_edits`` from ``benchmarks/chunking.py``)
    of one of the corpus's prose documents (``*.txt``), each applied to the original on its
    own. For each edit: tokens in the edited document's chunks whose text the original
    document did not have (the chunks that must be embedded again) divided by the tokens of
    all the edited document's chunks; the table shows the mean over edits.

Configurations
    a. kbsync TTTD, ``min_tokens = 200``, ``max_tokens = 800`` (mean about 400 tokens).
    b. kbsync strictly local strategy, ``min_tokens = 200``, ``max_tokens = 900``.
    c. kbsync embed-small / return-big: TTTD ``48``/``192`` searched with
       ``context_tokens = 512``.
    d. fixed-size chunks of 390 whitespace-separated words (about 512 tokens).
    e. LangChain ``RecursiveCharacterTextSplitter(chunk_size=2000, chunk_overlap=0)``.

    a-c run through kbsync's engine (a temporary knowledge base of a copy of the corpus,
    ``[embedder] kind = "local"``: the all-MiniLM-L6-v2 sentence-transformers model).
    d and e are indexed in-process with the same embedding model and the search kbsync's
    store does (``peer_index.py``: brute-force cosine for ``vector``, an SQLite FTS5 table
    shaped like kbsync's, ranked by ``bm25`` over the query's words as kbsync reduces them,
    for ``text``, reciprocal rank fusion, k = 60 over the top 40 of each, for ``hybrid``). The
    peers chunk each file's raw text; kbsync chunks its extracted record text.

    MiniLM reads at most 256 word pieces, so chunks of 400 tokens are truncated by the
    model. kbsync refuses such a configuration unless ``allow_truncation = true``; this
    benchmark then sets it and says so, and the configuration table shows how many chunks
    of each configuration the model truncates (peers are truncated silently the same way).

Run it from the repository root with the environment that has ``sentence-transformers``,
the model package and the peers (``benchmarks/requirements.txt``)::

    python benchmarks/retrieval/run.py            # all questions, three modes, 200 edits
    python benchmarks/retrieval/run.py --quick    # 16 questions, hybrid only, 50 edits

``--embedder hashing`` runs everything with kbsync's offline hashing embedder instead; by
default (``auto``) the local model is used when it loads, else hashing, with a note.
"""

from __future__ import annotations

import argparse
import inspect
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from check_questions import CORPUS, Question, collapse, load_questions  # noqa: E402
from peer_index import PeerIndex  # noqa: E402
from toml_tables import set_table  # noqa: E402

from chunking import make_edits  # noqa: E402
from kbsync.app.knowledge_base import KnowledgeBase  # noqa: E402
from kbsync.core.chunking.tokens import EstimatingCounter  # noqa: E402
from kbsync.core.normalize import scan_words  # noqa: E402
from kbsync.embed import Embedder  # noqa: E402
from kbsync.engine import init_config, make_embedder  # noqa: E402
from kbsync.errors import ConfigError, KbsyncError  # noqa: E402
from kbsync.extract.registry import extractor_for, media_type_for  # noqa: E402
from kbsync.sync import Chunker  # noqa: E402

Mode = str
Split = Callable[[str], list[str]]
Search = Callable[[str, Mode], list[str]]

MODES: tuple[Mode, ...] = ("vector", "text", "hybrid")
K = 10
RRF_K = 60
POOL = max(4 * K, 20)  # kbsync's hybrid pool for k = 10: 40
GRAM = 4
GRAM_SHARE = 0.6
FIXED_WORDS = 390
LANGCHAIN_CHARS = 2000
QUICK_QUESTIONS = 16

console = Console(width=150)
notes: list[str] = []
_COUNTER = EstimatingCounter()


# --------------------------------------------------------------------------- measuring


def tokens(text: str) -> int:
    """Estimated tokens of ``text`` (kbsync's ``EstimatingCounter``)."""
    return int(_COUNTER.count(scan_words(text)).sum())


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _grams(words: Sequence[str]) -> set[tuple[str, ...]]:
    if len(words) < GRAM:
        return {tuple(words)}
    return {tuple(words[i : i + GRAM]) for i in range(len(words) - GRAM + 1)}


@dataclass(frozen=True)
class Answer:
    """A question's answer passage, prepared for matching against returned contexts."""

    collapsed: str
    grams: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, question: Question) -> Answer:
        return cls(collapse(question.answer), frozenset(_grams(_words(question.answer))))

    def found_in(self, context: str) -> bool:
        if self.collapsed in collapse(context):
            return True
        shared = len(self.grams & _grams(_words(context)))
        return shared >= GRAM_SHARE * len(self.grams)


@dataclass(frozen=True)
class Scores:
    recall_1: float
    recall_5: float
    mrr_10: float
    context_tokens: float


def evaluate(search: Search, questions: Sequence[Question], mode: Mode) -> Scores:
    """Recall@1, recall@5, MRR@10 and mean context tokens per returned result."""
    at_1 = at_5 = 0
    reciprocal = 0.0
    sizes: list[int] = []
    for question in questions:
        answer = Answer.of(question)
        contexts = search(question.question, mode)[:K]
        sizes.extend(tokens(c) for c in contexts)
        rank = next((i + 1 for i, c in enumerate(contexts) if answer.found_in(c)), None)
        if rank is not None:
            at_1 += rank == 1
            at_5 += rank <= 5
            reciprocal += 1.0 / rank
    n = max(len(questions), 1)
    return Scores(at_1 / n, at_5 / n, reciprocal / n, statistics.fmean(sizes) if sizes else 0.0)


# --------------------------------------------------------------------------- corpus and churn


@dataclass(frozen=True)
class Document:
    name: str
    raw: str


def corpus_documents() -> list[Document]:
    return [Document(p.name, p.read_text(encoding="utf-8"))
            for p in sorted(CORPUS.iterdir()) if p.is_file()]


@dataclass(frozen=True)
class Edit:
    document: str
    text: str


def edit_set(documents: Sequence[Document], count: int, seed: int) -> list[Edit]:
    """``count`` single-sentence edits, each of one random prose document of the corpus."""
    prose = [d for d in documents if d.name.endswith(".txt")]
    rng = random.Random(seed)
    edits = []
    for _ in range(count):
        doc = prose[rng.randrange(len(prose))]
        (one,) = make_edits(doc.raw, 1, rng.randrange(2**31))
        edits.append(Edit(doc.name, one.text))
    return edits


@dataclass(frozen=True)
class Churn:
    share: float  # mean share of the edited document's tokens in chunks to embed again
    new_chunks: float  # mean count of those chunks per edit


def churn(prepare: Callable[[str, str], str], split: Split,
          documents: Sequence[Document], edits: Sequence[Edit]) -> Churn:
    """Mean share of an edited document's chunk tokens that sit in chunks it did not have."""
    known: dict[str, set[str]] = {}
    shares = []
    counts = []
    for edit in edits:
        if edit.document not in known:
            raw = next(d.raw for d in documents if d.name == edit.document)
            known[edit.document] = set(split(prepare(edit.document, raw)))
        chunks = split(prepare(edit.document, edit.text))
        total = sum(tokens(c) for c in chunks)
        fresh = [c for c in chunks if c not in known[edit.document]]
        shares.append(sum(tokens(c) for c in fresh) / max(total, 1))
        counts.append(len(fresh))
    return Churn(statistics.fmean(shares), statistics.fmean(counts))


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class KbsyncConfig:
    key: str
    label: str
    strategy: str
    min_tokens: int
    max_tokens: int
    context_tokens: int | None = None

    @property
    def params(self) -> str:
        text = f"{self.strategy} min_tokens={self.min_tokens} max_tokens={self.max_tokens}"
        return text + (f", context_tokens={self.context_tokens}" if self.context_tokens else "")


@dataclass(frozen=True)
class PeerConfig:
    key: str
    label: str
    params: str
    split: Split


@dataclass
class Result:
    key: str
    label: str
    params: str
    chunks: int = 0
    mean_chunk_tokens: float = 0.0
    truncated: int | None = None
    index_seconds: float = 0.0
    churn: Churn | None = None
    scores: dict[Mode, Scores] = field(default_factory=dict)
    skipped: str = ""


def _fixed(text: str) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + FIXED_WORDS]) for i in range(0, len(words), FIXED_WORDS)]


def _langchain() -> Split:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=LANGCHAIN_CHARS, chunk_overlap=0)
    return lambda text: list(splitter.split_text(text))


KBSYNC_CONFIGS = (
    KbsyncConfig("a", "a. kbsync TTTD ~400", "tttd", 200, 800),
    KbsyncConfig("b", "b. kbsync local ~400", "local", 200, 900),
    KbsyncConfig("c", "c. kbsync small→big", "tttd", 48, 192, context_tokens=512),
)


def peer_configs() -> list[PeerConfig]:
    peers = [PeerConfig("d", "d. fixed-size 512", f"{FIXED_WORDS} words (~512 tokens)", _fixed)]
    try:
        peers.append(PeerConfig("e", "e. LangChain recursive",
                                f"RecursiveCharacterTextSplitter({LANGCHAIN_CHARS}, overlap 0)",
                                _langchain()))
    except ImportError as error:
        notes.append(f"e. LangChain recursive: left out ({error}); "
                     "install benchmarks/requirements.txt")
    return peers


# --------------------------------------------------------------------------- embedders


def choose_embedder(wanted: str) -> tuple[dict[str, Any], Embedder]:
    """The ``[embedder]`` settings and the embedder they make (local model when it loads)."""
    hashing: dict[str, Any] = {"kind": "hashing", "dimension": 1024}
    if wanted == "hashing":
        return hashing, make_embedder(hashing)
    try:
        local: dict[str, Any] = {"kind": "local"}
        return local, make_embedder(local)
    except (KbsyncError, ImportError) as error:
        if wanted == "local":
            raise
        notes.append(f"the local embedder is not available ({type(error).__name__}: {error}); "
                     "ran with kind = \"hashing\"")
        return hashing, make_embedder(hashing)


def truncated_count(embedder: Embedder, texts: Sequence[str]) -> int | None:
    limit = getattr(embedder, "max_input_tokens", None)
    count = getattr(embedder, "count_tokens", None)
    if limit is None or count is None:
        return None
    return int(sum(n > limit for n in count(list(texts))))


# --------------------------------------------------------------------------- kbsync engine


def open_engine(folder: Path, config: KbsyncConfig, embedder: dict[str, Any]) -> KnowledgeBase:
    """A synced knowledge base of a copy of the corpus in ``folder``, per ``config``."""
    shutil.copytree(CORPUS, folder / "docs")
    init_config(folder, ["docs"])
    file = folder / "kbsync.toml"
    original = file.read_text(encoding="utf-8")
    chunker = {"strategy": config.strategy, "min_tokens": config.min_tokens,
               "max_tokens": config.max_tokens}
    text = set_table(set_table(original, "chunker", chunker), "embedder", embedder)
    file.write_text(text, encoding="utf-8")
    try:
        engine = KnowledgeBase.open(folder)
    except ConfigError as error:
        if "allow_truncation" not in str(error):
            raise
        notes.append(f"{config.label}: kbsync refused max_tokens = {config.max_tokens} for this "
                     "embedder's input window; ran with allow_truncation = true (the model "
                     "embeds only the start of longer chunks)")
        with_truncation = {**embedder, "allow_truncation": True}
        file.write_text(set_table(text, "embedder", with_truncation), encoding="utf-8")
        engine = KnowledgeBase.open(folder)
    return engine


def run_kbsync(config: KbsyncConfig, settings: dict[str, Any], embedder: Embedder,
               questions: Sequence[Question], modes: Sequence[Mode],
               documents: Sequence[Document], edits: Sequence[Edit]) -> Result:
    result = Result(config.key, config.label, config.params)
    extra: dict[str, Any] = {}
    if config.context_tokens is not None:
        if "context_tokens" not in inspect.signature(KnowledgeBase.search).parameters:
            result.skipped = "KnowledgeBase.search has no context_tokens yet"
            notes.append(f"{config.label}: skipped ({result.skipped})")
            return result
        extra["context_tokens"] = config.context_tokens

    chunker = Chunker(config.strategy, {"min_tokens": config.min_tokens,
                                        "max_tokens": config.max_tokens})

    def prepare(name: str, raw: str) -> str:
        extractor = extractor_for(media_type_for(name))
        if extractor is None:
            raise ValueError(f"{name}: kbsync has no extractor for it")
        return extractor.extract(raw.encode("utf-8"), locator=name).text

    def split(text: str) -> list[str]:
        return [chunk.text for chunk in chunker.chunks(text)]

    chunks = [c for d in documents for c in split(prepare(d.name, d.raw))]
    result.chunks = len(chunks)
    result.mean_chunk_tokens = statistics.fmean(tokens(c) for c in chunks)
    result.churn = churn(prepare, split, documents, edits)
    result.truncated = truncated_count(embedder, chunks)

    with tempfile.TemporaryDirectory(prefix="kbsync-retrieval-") as tmp:
        started = time.perf_counter()
        with open_engine(Path(tmp), config, settings) as engine:
            report = engine.sync(yes=True)
            result.index_seconds = time.perf_counter() - started
            if report.failed:
                notes.append(f"{config.label}: the sync reported failures")
            indexed = engine.status()
            if indexed.chunks != result.chunks:  # the churn chunker should match the engine's
                notes.append(f"{config.label}: the engine indexed {indexed.chunks} chunks, "
                             f"this benchmark's own chunking made {result.chunks}")

            def search(query: str, mode: Mode) -> list[str]:
                hits = engine.search(query, k=K, mode=mode, **extra)  # type: ignore[arg-type]
                return [getattr(h, "context", None) or h.text for h in hits]

            for mode in modes:
                result.scores[mode] = evaluate(search, questions, mode)
    console.log(f"{config.label}: done")
    return result


# --------------------------------------------------------------------------- peer index


def run_peer(config: PeerConfig, embedder: Embedder, questions: Sequence[Question],
             modes: Sequence[Mode], documents: Sequence[Document],
             edits: Sequence[Edit]) -> Result:
    result = Result(config.key, config.label, config.params)
    chunks = [c for d in documents for c in config.split(d.raw) if c.strip()]
    result.chunks = len(chunks)
    result.mean_chunk_tokens = statistics.fmean(tokens(c) for c in chunks)
    result.churn = churn(lambda _name, raw: raw, config.split, documents, edits)
    result.truncated = truncated_count(embedder, chunks)
    started = time.perf_counter()
    index = PeerIndex(chunks, embedder)
    result.index_seconds = time.perf_counter() - started
    for mode in modes:
        result.scores[mode] = evaluate(index.search, questions, mode)
    console.log(f"{config.label}: done")
    return result


# --------------------------------------------------------------------------- report


def print_configurations(results: Sequence[Result]) -> None:
    table = Table(title="Configurations")
    for column in ("configuration", "parameters"):
        table.add_column(column)
    for column in ("chunks", "mean tokens\nper chunk", "chunks truncated\nby the model",
                   "new chunks\nper edit", "index s"):
        table.add_column(column, justify="right")
    for r in results:
        if r.skipped:
            table.add_row(r.label, r.params, "—", "—", "—", "—", f"skipped: {r.skipped}")
            continue
        table.add_row(r.label, r.params, str(r.chunks), f"{r.mean_chunk_tokens:.0f}",
                      "—" if r.truncated is None else str(r.truncated),
                      "—" if r.churn is None else f"{r.churn.new_chunks:.2f}",
                      f"{r.index_seconds:.1f}")
    console.print(table)


def print_mode(results: Sequence[Result], mode: Mode, questions: int, edits: int) -> None:
    table = Table(title=f"{mode} search: {questions} questions, k = {K}; churn over {edits} edits")
    table.add_column("configuration")
    for column in ("recall@1", "recall@5", "MRR@10", "context tokens\nper hit",
                   "re-embedded\ntoken share"):
        table.add_column(column, justify="right")
    for r in results:
        s = r.scores.get(mode)
        if s is None:
            table.add_row(r.label, "—", "—", "—", "—", "—")
            continue
        table.add_row(r.label, f"{s.recall_1:.3f}", f"{s.recall_5:.3f}", f"{s.mrr_10:.3f}",
                      f"{s.context_tokens:.0f}",
                      "—" if r.churn is None else f"{r.churn.share:.1%}")
    console.print(table)


def _verdict(ok: bool) -> str:
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def print_targets(results: Sequence[Result], modes: Sequence[Mode]) -> None:
    by_key = {r.key: r for r in results if not r.skipped}
    table = Table(title="Targets")
    for column in ("target", "measured", "verdict"):
        table.add_column(column)
    a, e = by_key.get("a"), by_key.get("e")
    if a is not None and e is not None and a.churn is not None and e.churn is not None:
        ca, ce = a.churn.share, e.churn.share
        table.add_row("(a) re-embeds ≤ ½ the tokens of (e) recursive on the edit set",
                      f"{ca:.1%} vs {ce:.1%} ({ca / max(ce, 1e-9):.2f}×)",
                      _verdict(ca <= 0.5 * ce))
        for mode in modes:
            ra, re_ = a.scores[mode].recall_5, e.scores[mode].recall_5
            table.add_row(f"(a) recall@5 ≥ (e) recall@5, {mode}", f"{ra:.3f} vs {re_:.3f}",
                          _verdict(ra >= re_))
    else:
        table.add_row("(a) vs (e) recursive", "(e) or (a) missing", "—")
    if a is not None and "hybrid" in a.scores and "vector" in a.scores:
        h, v = a.scores["hybrid"], a.scores["vector"]
        table.add_row("(a) hybrid ≥ vector-only (recall@5 and MRR@10)",
                      f"recall@5 {h.recall_5:.3f} vs {v.recall_5:.3f}; "
                      f"MRR {h.mrr_10:.3f} vs {v.mrr_10:.3f}",
                      _verdict(h.recall_5 >= v.recall_5 and h.mrr_10 >= v.mrr_10))
    else:
        table.add_row("(a) hybrid ≥ vector-only", "needs both modes (not with --quick)", "—")
    console.print(table)


def _versions(embedder: Embedder) -> str:
    found = []
    for name in ("kbsync", "sentence-transformers", "torch", "langchain-text-splitters"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return (f"Python {platform.python_version()}; {', '.join(found)}\n"
            f"embedder: {embedder.identity}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_QUESTIONS} questions, hybrid only, 50 edits")
    parser.add_argument("--edits", type=int, default=None, help="edits in the churn set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", choices=("auto", "local", "hashing"), default="auto")
    parser.add_argument("--only", default="abcde", help="configurations to run, e.g. 'ae'")
    args = parser.parse_args(argv)

    questions = load_questions()
    modes: Sequence[Mode] = MODES
    edit_count = 200
    if args.quick:
        step = len(questions) / QUICK_QUESTIONS
        questions = [questions[int(i * step)] for i in range(QUICK_QUESTIONS)]
        modes, edit_count = ("hybrid",), 50
    if args.edits is not None:
        edit_count = args.edits

    started = time.perf_counter()
    settings, embedder = choose_embedder(args.embedder)
    console.print(_versions(embedder))
    documents = corpus_documents()
    edits = edit_set(documents, edit_count, args.seed)

    results: list[Result] = []
    for kb in KBSYNC_CONFIGS:
        if kb.key in args.only:
            results.append(run_kbsync(kb, settings, embedder, questions, modes, documents,
                                      edits))
    for peer in peer_configs():
        if peer.key in args.only:
            results.append(run_peer(peer, embedder, questions, modes, documents, edits))

    print_configurations(results)
    for mode in modes:
        print_mode(results, mode, len(questions), edit_count)
    print_targets(results, modes)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"total time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
