"""Sync benchmark: kbsync against peer incremental indexers on a folder of Markdown files.

What is measured
    A deterministic corpus of N Markdown files (about 5 KB each: 10,000 files are about 50 MB),
    cut from the English-like text of ``benchmarks/corpus.py`` with a ``#`` title and a few
    ``##`` headings per file, spread over 100 nested folders (``docs/aNN/bNN/doc-NNNNN.md``).
    It is generated once and cached under ``benchmarks/.data/`` (git-ignored). Every tool gets
    its own fresh copy of it in a temporary folder there, and runs three steps in one process:

    1. first sync: index every file (wall time, ``time.perf_counter``);
    2. no-op re-sync: nothing changed (median of ``--noop-runs``; a run over 10 s is not
       repeated);
    3. 1 % edit re-sync: 1 % of the files (chosen with a fixed seed) each get one new sentence
       inserted between two sentences in the middle of a paragraph, the rest of the file kept;
       then a re-sync: wall time and the number of embeddings computed.

    Tools
        kbsync        ``KnowledgeBase.sync()`` with the configuration ``init_config`` writes (SQLite
                      store, sentences chunker, offline hashing embedder). Embeddings are counted by
                      kbsync itself (``report.sources[0].embeddings_computed``).
        steadlith     ``prepare_index`` (plan) + ``apply_prepared`` (transactional index) with
                      its own SQLite index, embedding cache and default ``cdc-rabin`` chunker.
        LangChain     ``index()`` with an ``SQLRecordManager`` (SQLite file), an
                      ``InMemoryVectorStore`` and ``cleanup="incremental"``; every run reads
                      all files and splits them with ``RecursiveCharacterTextSplitter``
                      (``chunk_size=1200``, no overlap), as LangChain users do. Two rows:
                      ``batch_size=100`` (the default: a file whose chunks straddle two
                      batches is deleted and re-embedded on every run, as LangChain's
                      documentation warns) and ``batch_size=5000`` (few files straddle; a
                      bigger batch overflows SQLite's limit of variables per statement).
        LlamaIndex    ``IngestionPipeline`` with a ``SimpleDocumentStore`` (upserts and deletes),
                      an ``IngestionCache`` and a ``SimpleVectorStore``; every run loads all
                      files (the path is the document id) and splits new ones with
                      ``SentenceSplitter(chunk_size=256)``.

    The peers embed with kbsync's offline hashing embedder behind a counting wrapper (steadlith
    keeps its hash provider's identity, so its cache keys are its own), so every tool pays the
    same, small, per-text embedding cost: the comparison is about sync work, not model cost.

Targets
    kbsync's first sync at least 1.5x as fast as each peer's; its no-op re-sync at least 20x
    faster than each peer's; at most 1.5 embeddings per
    edited file for kbsync after the 1 % edit. The table prints PASS or MISS for both, then
    kbsync's per-stage times of the no-op sync (``report.seconds``).

Run it from the repository root with the peers installed (``benchmarks/requirements.txt``)::

    python benchmarks/sync.py                # 10,000 files (about 50 MB), several minutes
    python benchmarks/sync.py --quick        # 1,000 files
    python benchmarks/sync.py --files 3000 --noop-runs 5

A peer that is not installed or cannot run offline is left out with a printed note.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DATA_DIR, generated_text
from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import init_config

FILE_BYTES = 5_000
FOLDERS = 10  # top-level folders, each with FOLDERS subfolders: FOLDERS**2 leaf folders
SECTION_PARAGRAPHS = 3  # a "##" heading before every third paragraph
EDIT_PERCENT = 1.0
EDIT_SEED = 20_240_601
SENTENCE_SEED = 1
DIMENSION = 256
LANGCHAIN_CHUNK_CHARS = 1_200
LANGCHAIN_BIG_BATCH = 5_000
NOTE_CHARS = 300
REPEAT_LIMIT_S = 10.0
TARGET_NOOP_RATIO = 20.0
TARGET_FIRST_RATIO = 1.5
TARGET_EMBEDS_PER_EDIT = 1.5
CORPUS_VERSION = "sync-corpus-v1"

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")

console = Console(width=160)
notes: list[str] = []

# --------------------------------------------------------------------------- corpus


def _title(paragraph: str, words: int) -> str:
    found = _WORD.findall(paragraph)[:words]
    return " ".join(w.capitalize() for w in found) or "Untitled"


def _file_path(index: int) -> str:
    leaf = index % (FOLDERS * FOLDERS)
    return f"docs/a{leaf // FOLDERS:02d}/b{leaf % FOLDERS:02d}/doc-{index:05d}.md"


def corpus_documents(files: int) -> dict[str, str]:
    """``files`` Markdown documents (relative path -> text), cut from the generated text."""
    text = generated_text(files * FILE_BYTES, seed=0)
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    if len(paragraphs) < 2 * files:
        raise SystemExit(f"the generated text has too few paragraphs for {files} files")
    total = sum(len(p) for p in paragraphs)
    documents: dict[str, str] = {}
    position, filled = 0, 0
    for index in range(files):
        goal = total * (index + 1) // files
        body: list[str] = []
        # At least two paragraphs per file, and leave two for each file still to come.
        while position < len(paragraphs) - 2 * (files - index - 1) and (
            filled < goal or len(body) < 2
        ):
            body.append(paragraphs[position])
            filled += len(paragraphs[position])
            position += 1
        if index == files - 1:
            body.extend(paragraphs[position:])
        parts = [f"# {_title(body[0], 6)}"]
        for number, paragraph in enumerate(body):
            if number and number % SECTION_PARAGRAPHS == 0:
                parts.append(f"## {_title(paragraph, 4)}")
            parts.append(paragraph)
        documents[_file_path(index)] = "\n\n".join(parts) + "\n"
    return documents


def build_corpus(files: int) -> tuple[Path, dict[str, str]]:
    """The cached corpus folder (its ``docs/`` inside) and its documents, written if needed."""
    documents = corpus_documents(files)
    digest = hashlib.sha256(CORPUS_VERSION.encode())
    for key, text in documents.items():
        digest.update(key.encode() + b"\0" + text.encode() + b"\0")
    root = DATA_DIR / f"sync-corpus-{files}"
    marker = root / ".complete"
    if marker.exists() and marker.read_text(encoding="utf-8") == digest.hexdigest():
        return root, documents
    shutil.rmtree(root, ignore_errors=True)
    for key, text in documents.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
    marker.write_text(digest.hexdigest(), encoding="utf-8")
    return root, documents


def _new_sentences(count: int) -> list[str]:
    """``count`` distinct generated sentences of 8 to 30 words (the inserted sentences)."""
    size = 64_000
    while True:
        text = generated_text(size, seed=SENTENCE_SEED)
        pool = sorted({
            s for p in text.split("\n\n") for s in _SENTENCE_SPLIT.split(p.strip())
            if 8 <= len(s.split()) <= 30
        })
        if len(pool) >= count:
            return random.Random(SENTENCE_SEED).sample(pool, count)
        size *= 4


def insert_sentence(text: str, sentence: str, rng: random.Random) -> str:
    """``text`` with ``sentence`` inserted between two sentences of its middle paragraph."""
    paragraphs = text.split("\n\n")
    prose = [i for i, p in enumerate(paragraphs)
             if not p.startswith("#") and len(_SENTENCE_SPLIT.split(p)) >= 2]
    if not prose:  # every paragraph has one sentence: put it after the first one
        prose = [i for i, p in enumerate(paragraphs) if not p.startswith("#")]
    target = prose[len(prose) // 2]
    sentences = _SENTENCE_SPLIT.split(paragraphs[target].rstrip("\n"))
    trailing = paragraphs[target][len(paragraphs[target].rstrip("\n")):]
    at = rng.randint(1, len(sentences) - 1) if len(sentences) > 1 else 1
    paragraphs[target] = " ".join([*sentences[:at], sentence, *sentences[at:]]) + trailing
    return "\n\n".join(paragraphs)


def plan_edits(documents: dict[str, str], percent: float) -> dict[str, str]:
    """The edited texts of ``percent`` % of the documents (deterministic)."""
    rng = random.Random(EDIT_SEED)
    count = max(1, round(len(documents) * percent / 100))
    chosen = sorted(rng.sample(sorted(documents), count))
    edits: dict[str, str] = {}
    for key, sentence in zip(chosen, _new_sentences(count), strict=True):
        edited = insert_sentence(documents[key], sentence, rng)
        if edited.replace(" " + sentence, "", 1) != documents[key] and \
                edited.replace(sentence + " ", "", 1) != documents[key]:
            raise AssertionError(f"{key}: the edit changed more than one sentence")
        edits[key] = edited
    return edits


def apply_edits(root: Path, edits: dict[str, str]) -> None:
    for key, text in edits.items():
        (root / key).write_text(text, encoding="utf-8", newline="\n")


# --------------------------------------------------------------------------- tools


@dataclass
class Step:
    seconds: float
    embeddings: int
    detail: str = ""


@dataclass
class ToolResult:
    name: str
    first: Step
    noop: Step
    edit: Step
    noop_runs: int
    extra: dict[str, Any] = field(default_factory=dict)


class Tool:
    """One indexer on one workspace: ``sync()`` runs an incremental sync and returns a Step."""

    name = ""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def sync(self) -> Step:
        raise NotImplementedError

    def close(self) -> None:
        return None


class KbsyncTool(Tool):
    name = "kbsync"

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        init_config(workspace, ["docs"], embedder={"kind": "hashing", "dimension": DIMENSION})
        self.engine = KnowledgeBase.open(workspace)
        self.reports: list[Any] = []

    def sync(self) -> Step:
        started = time.perf_counter()
        report = self.engine.sync(yes=True)
        seconds = time.perf_counter() - started
        self.reports.append(report)
        if report.failed:
            notes.append(f"kbsync: a sync reported failures: {report.sources[0].failures[:3]}")
        source = report.sources[0]
        docs = ", ".join(f"{k} {v}" for k, v in sorted(source.documents.items()) if v)
        chunks = ", ".join(f"{k} {v}" for k, v in sorted(source.chunks.items()) if v)
        return Step(seconds, source.embeddings_computed,
                    f"docs: {docs}; chunks: {chunks}; read {source.bytes_read:,} B")

    def close(self) -> None:
        self.engine.close()


class LangChainTool(Tool):
    name = "LangChain, batch 100"
    batch_size = 100  # index()'s default

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        from langchain_classic.indexes import SQLRecordManager
        from langchain_core.embeddings import Embeddings
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        hashing = HashingEmbedder(DIMENSION)

        class CountingEmbeddings(Embeddings):
            """kbsync's hashing embedder behind LangChain's interface, counting texts."""

            def __init__(self) -> None:
                self.count = 0

            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                self.count += len(texts)
                return [row.tolist() for row in hashing.embed(texts)]

            def embed_query(self, text: str) -> list[float]:
                return [float(v) for v in hashing.embed([text])[0]]

        self.embeddings = CountingEmbeddings()
        self.store = InMemoryVectorStore(self.embeddings)
        db = workspace / "langchain-records.sqlite"
        self.records = SQLRecordManager("kbsync-bench", db_url=f"sqlite:///{db.as_posix()}")
        self.records.create_schema()
        self.splitter = RecursiveCharacterTextSplitter(chunk_size=LANGCHAIN_CHUNK_CHARS,
                                                       chunk_overlap=0)

    def _load(self) -> list[Any]:
        from langchain_core.documents import Document

        docs = [Document(page_content=path.read_text(encoding="utf-8"),
                         metadata={"source": path.relative_to(self.workspace).as_posix()})
                for path in sorted((self.workspace / "docs").rglob("*.md"))]
        return self.splitter.split_documents(docs)

    def sync(self) -> Step:
        from langchain_core.indexing import index

        before = self.embeddings.count
        started = time.perf_counter()
        result = index(self._load(), self.records, self.store, cleanup="incremental",
                       source_id_key="source", key_encoder="sha256",
                       batch_size=self.batch_size)
        seconds = time.perf_counter() - started
        detail = ", ".join(f"{k.removeprefix('num_')} {v}" for k, v in result.items())
        return Step(seconds, self.embeddings.count - before, detail)


class LangChainBigBatchTool(LangChainTool):
    """``index()`` with big batches: few sources straddle two batches, so few are re-embedded.

    One batch of everything would be best, but ``SQLRecordManager.update`` writes a batch in
    one INSERT, and SQLite allows at most 32,766 variables (5 per record) in a statement.
    """

    name = f"LangChain, batch {LANGCHAIN_BIG_BATCH:,}"
    batch_size = LANGCHAIN_BIG_BATCH


class LlamaIndexTool(Tool):
    """``IngestionPipeline`` with a docstore (upserts and deletes) and an ingestion cache, as
    LlamaIndex documents incremental ingestion: each run loads every file (its path as the
    document id), and the docstore's document hashes skip the unchanged ones."""

    name = "LlamaIndex IngestionPipeline"

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        from llama_index.core.embeddings import BaseEmbedding
        from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.storage.docstore import SimpleDocumentStore
        from llama_index.core.vector_stores import SimpleVectorStore

        hashing = HashingEmbedder(DIMENSION)
        tool = self
        self.count = 0

        class CountingEmbedding(BaseEmbedding):
            """kbsync's hashing embedder behind LlamaIndex's interface, counting texts."""

            def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
                tool.count += len(texts)
                return [row.tolist() for row in hashing.embed(texts)]

            def _get_text_embedding(self, text: str) -> list[float]:
                return self._get_text_embeddings([text])[0]

            def _get_query_embedding(self, query: str) -> list[float]:
                return [float(v) for v in hashing.embed([query])[0]]

            async def _aget_query_embedding(self, query: str) -> list[float]:
                return self._get_query_embedding(query)

        self.pipeline = IngestionPipeline(
            transformations=[SentenceSplitter(chunk_size=256, chunk_overlap=0),
                             CountingEmbedding(embed_batch_size=64)],
            docstore=SimpleDocumentStore(), vector_store=SimpleVectorStore(),
            cache=IngestionCache(), docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE)

    def sync(self) -> Step:
        from llama_index.core import Document

        before = self.count
        started = time.perf_counter()
        docs = [Document(text=path.read_text(encoding="utf-8"),
                         id_=path.relative_to(self.workspace).as_posix())
                for path in sorted((self.workspace / "docs").rglob("*.md"))]
        nodes = self.pipeline.run(documents=docs)
        seconds = time.perf_counter() - started
        return Step(seconds, self.count - before, f"nodes written {len(nodes):,}")


class SteadlithTool(Tool):
    name = "steadlith"

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        from steadlith.config import SourcesConfig, SteadlithConfig

        self.config = SteadlithConfig(base_dir=workspace,
                                      sources=SourcesConfig(include=("docs/**/*.md",)))
        self.config.validate()
        self.count = 0

    @contextmanager
    def _counting_provider(self) -> Iterator[None]:
        """Patch steadlith's provider factory: same identity, kbsync's hashing, counted."""
        from steadlith.index import service

        original = service.create_provider
        hashing = HashingEmbedder(DIMENSION)
        tool = self

        class CountingProvider:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            @property
            def model_id(self) -> str:
                return str(self.inner.model_id)

            @property
            def params_hash(self) -> str:
                return str(self.inner.params_hash)

            @property
            def dimensions(self) -> int:
                return int(self.inner.dimensions)

            def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
                tool.count += len(texts)
                return [tuple(row.tolist()) for row in hashing.embed(texts)]

        def create_provider(config: Any) -> CountingProvider:
            return CountingProvider(original(config))

        service.create_provider = create_provider  # type: ignore[assignment]
        try:
            yield
        finally:
            service.create_provider = original

    def sync(self) -> Step:
        from steadlith.index import service

        before = self.count
        with self._counting_provider():
            started = time.perf_counter()
            prepared = service.prepare_index(self.config)
            result = service.apply_prepared(prepared)
            seconds = time.perf_counter() - started
        counts = {k.value: v for k, v in result.plan.counts.items() if v}
        detail = (f"plan: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; "
                  f"embedded {result.embedded_chunks}, cache hits {result.cache_hits}")
        return Step(seconds, self.count - before, detail)


def run_tool(factory: Callable[[Path], Tool], corpus: Path, edits: dict[str, str],
             noop_runs: int) -> ToolResult:
    """The three steps of one tool on a fresh copy of the corpus."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=DATA_DIR, prefix="sync-run-") as tmp:
        workspace = Path(tmp)
        shutil.copytree(corpus / "docs", workspace / "docs")
        tool = factory(workspace)
        try:
            gc.collect()
            first = tool.sync()
            noops: list[Step] = []
            for _ in range(noop_runs):
                gc.collect()
                noops.append(tool.sync())
                if noops[-1].seconds > REPEAT_LIMIT_S:
                    break
            median = statistics.median(s.seconds for s in noops)
            noop = Step(median, max(s.embeddings for s in noops), noops[-1].detail)
            apply_edits(workspace, edits)
            gc.collect()
            edit = tool.sync()
            extra: dict[str, Any] = {}
            if isinstance(tool, KbsyncTool):
                extra["reports"] = tool.reports
                extra["hits"] = len(tool.engine.search("retries and timeouts", k=5))
        finally:
            tool.close()
        return ToolResult(tool.name, first, noop, edit, len(noops), extra)


# --------------------------------------------------------------------------- output


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def print_results(results: list[ToolResult], files: int, edited: int) -> None:
    kb = next(r for r in results if r.name == "kbsync")
    table = Table(title=f"Sync: {files:,} Markdown files, {edited} edited (one sentence each)",
                  title_justify="left")
    table.add_column("tool", no_wrap=True)
    for name in ("first sync s", "no-op s", "no-op vs kbsync", "edit re-sync s", "embeds first",
                 "embeds no-op", "embeds after edit", "per edited file"):
        table.add_column(name, justify="right")
    for r in results:
        ratio = r.noop.seconds / kb.noop.seconds if kb.noop.seconds else float("inf")
        style = "bold" if r is kb else None
        table.add_row(r.name, _fmt_s(r.first.seconds),
                      f"{_fmt_s(r.noop.seconds)} ({r.noop_runs}x)",
                      "1.0x" if r is kb else f"{ratio:,.0f}x slower",
                      _fmt_s(r.edit.seconds), f"{r.first.embeddings:,}",
                      f"{r.noop.embeddings:,}", f"{r.edit.embeddings:,}",
                      f"{r.edit.embeddings / edited:.2f}", style=style)
    console.print(table)

    details = Table(title="What each sync did", title_justify="left", show_lines=True)
    details.add_column("tool", no_wrap=True)
    details.add_column("step")
    details.add_column("detail", overflow="fold")
    for r in results:
        for step_name, step in (("first", r.first), ("no-op", r.noop), ("edit", r.edit)):
            details.add_row(r.name, step_name, step.detail)
    console.print(details)

    reports = kb.extra["reports"]
    stages = Table(title="kbsync seconds per stage (report.seconds; no-op: the last no-op run)",
                   title_justify="left", min_width=70)
    stages.add_column("stage")
    for name in ("first sync", "no-op re-sync", "1 % edit re-sync"):
        stages.add_column(name, justify="right")
    picked = (reports[0], reports[-2], reports[-1])
    names = list(dict.fromkeys(k for r in picked for k in r.seconds))
    for stage in names:
        stages.add_row(stage, *(f"{r.seconds.get(stage, 0.0):.4f}" for r in picked))
    stages.add_row("sum of stages", *(f"{sum(r.seconds.values()):.4f}" for r in picked))
    stages.add_row("wall (timed)", *(f"{s.seconds:.4f}" for s in (kb.first, kb.noop, kb.edit)))
    console.print(stages)

    console.print("[bold]Targets[/bold]")
    peers = [r for r in results if r is not kb]
    if peers:
        for r in peers:
            ratio = r.noop.seconds / kb.noop.seconds if kb.noop.seconds else float("inf")
            verdict = "PASS" if ratio >= TARGET_NOOP_RATIO else "MISS"
            console.print(f"  {verdict}  no-op re-sync: kbsync {ratio:,.1f}x faster than "
                          f"{r.name} (target >= {TARGET_NOOP_RATIO:.0f}x)")
        for r in peers:
            ratio = r.first.seconds / kb.first.seconds if kb.first.seconds else float("inf")
            verdict = "PASS" if ratio >= TARGET_FIRST_RATIO else "MISS"
            console.print(f"  {verdict}  first sync: kbsync {ratio:,.2f}x as fast as "
                          f"{r.name} (target >= {TARGET_FIRST_RATIO}x)")
    else:
        console.print("  n/a   no-op re-sync ratio: no peer ran")
    per_file = kb.edit.embeddings / edited
    verdict = "PASS" if per_file <= TARGET_EMBEDS_PER_EDIT else "MISS"
    console.print(f"  {verdict}  kbsync embeddings per edited file: {per_file:.2f} "
                  f"({kb.edit.embeddings} for {edited} files; target <= "
                  f"{TARGET_EMBEDS_PER_EDIT})")
    checks = [
        ("first sync indexed every file", reports[0].total("new") == files),
        ("no-op re-syncs found every file unchanged",
         all(r.total("unchanged") == files for r in reports[1:-1])),
        ("no-op re-syncs computed no embedding",
         all(r.sources[0].embeddings_computed == 0 for r in reports[1:-1])),
        ("edit re-sync found exactly the edited files modified",
         reports[-1].total("modified") == edited
         and reports[-1].total("unchanged") == files - edited),
        ("search returns hits after the edit", kb.extra["hits"] > 0),
    ]
    for label, ok in checks:
        console.print(f"  {'ok  ' if ok else 'FAIL'}  kbsync check: {label}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=10_000, help="files in the corpus")
    parser.add_argument("--quick", action="store_true", help="1,000 files")
    parser.add_argument("--edit-percent", type=float, default=EDIT_PERCENT,
                        help="share of files edited before the last re-sync")
    parser.add_argument("--noop-runs", type=int, default=3,
                        help="no-op re-syncs per tool (median reported)")
    parser.add_argument("--tools", default="kbsync,steadlith,langchain,llamaindex",
                        help="comma-separated: kbsync,steadlith,langchain,llamaindex "
                             "(kbsync always runs)")
    args = parser.parse_args(argv)
    files = 1_000 if args.quick else args.files
    if files < 1 or args.noop_runs < 1:
        parser.error("--files and --noop-runs must be positive")

    started = time.perf_counter()
    corpus, documents = build_corpus(files)
    edits = plan_edits(documents, args.edit_percent)
    size = sum(len(t.encode()) for t in documents.values())
    console.print(
        f"[bold]kbsync sync benchmark[/bold]  Python {platform.python_version()} on "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs\n"
        f"corpus: {files:,} files, {size / 1e6:.1f} MB, {FOLDERS * FOLDERS} leaf folders "
        f"(built in {time.perf_counter() - started:.1f} s); edit: {len(edits)} files "
        f"({args.edit_percent:g} %), one inserted sentence each\n"
        f"versions: kbsync {_version('kbsync')}, steadlith {_version('steadlith')}, "
        f"langchain-core {_version('langchain-core')}, langchain-classic "
        f"{_version('langchain-classic')}, langchain-text-splitters "
        f"{_version('langchain-text-splitters')}, SQLAlchemy {_version('sqlalchemy')}, "
        f"llama-index-core {_version('llama-index-core')}"
    )

    wanted = {t.strip().lower() for t in args.tools.split(",")}
    factories: list[tuple[str, Callable[[Path], Tool]]] = [("kbsync", KbsyncTool)]
    if "steadlith" in wanted:
        factories.append(("steadlith", SteadlithTool))
    if "langchain" in wanted:
        factories.append(("langchain", LangChainTool))
        factories.append(("langchain-big-batch", LangChainBigBatchTool))
    if "llamaindex" in wanted:
        factories.append(("llamaindex", LlamaIndexTool))
    results: list[ToolResult] = []
    for label, factory in factories:
        tool_started = time.perf_counter()
        try:
            results.append(run_tool(factory, corpus, edits, args.noop_runs))
        except Exception as error:  # a peer that is missing or broken is reported, not fatal
            if label == "kbsync":
                raise
            message = " ".join(str(error).split())
            if len(message) > NOTE_CHARS:
                message = message[:NOTE_CHARS] + "…"
            notes.append(f"{label}: left out ({type(error).__name__}: {message})")
            continue
        console.print(f"  {label}: done in {time.perf_counter() - tool_started:.1f} s")

    print_results(results, files, len(edits))
    for note in notes:
        console.print(f"note: {note}")
    console.print(f"total benchmark time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
