"""Chunker-change benchmark: what a sync embeds again after a chunker setting changed.

A chunk's identity commits to the chunker and its parameters, so after a change of,
say, ``max_tokens`` every chunk has a new identity, although most of them have the text
of a chunk that was embedded before. The embedding cache finds vectors by the text
(``kbsync.core.identity.embedding_text_key``), so only chunks whose text is new are embedded.

For each change, a copy of a knowledge base synced with the ``kbsync init`` defaults (the
documentation files of a real history in ``../shared/corpora``, its first snapshot, or
``examples/corpus`` without it; the offline hashing embedder) gets the new setting and
syncs again. The table prints the chunks that sync added (what a cache keyed by chunk
identity embeds), the embeddings it computed and reused, and the oracle: the current
chunk texts after the sync that were not current before (read from the store), which
is exactly what must be embedded. A row whose computed count differs from the oracle
fails the run.

Run it from the repository root::

    python benchmarks/chunker_change.py
    python benchmarks/chunker_change.py --history django-docs-history.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.engine import init_config

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPORA = REPO_ROOT.parent / "shared" / "corpora"
NO_SUCH_EMBEDDER = "no-such-embedder:1"
console = Console(width=140)

# (label, the [chunker] lines to replace, their replacement)
CHANGES: tuple[tuple[str, str, str], ...] = (
    ("max_tokens 192 -> 256", r"max_tokens = 192", "max_tokens = 256"),
    ("max_tokens 192 -> 160", r"max_tokens = 192", "max_tokens = 160"),
    ("min_tokens 48 -> 32", r"min_tokens = 48", "min_tokens = 32"),
    ("strategy sentences -> tttd", r'strategy = "sentences"', 'strategy = "tttd"'),
)


@dataclass(frozen=True)
class Row:
    label: str
    added: int
    computed: int
    reused: int
    oracle: int
    seconds: float


def documents(history: str) -> dict[str, str]:
    """The text files of the history's first snapshot (or the sample corpus)."""
    path = CORPORA / history
    if path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return dict(json.loads(next(lines))["files"])
    console.print(f"note: {path.name} not found: examples/corpus instead")
    corpus = REPO_ROOT / "examples" / "corpus"
    return {str(p.relative_to(corpus)): p.read_text(encoding="utf-8")
            for p in sorted(corpus.rglob("*")) if p.is_file()}


def current_texts(kb: KnowledgeBase) -> set[str]:
    """The texts of the current, indexed chunks (those no embedder has a vector for)."""
    return {text for source in kb.store.source_names()
            for text in kb.store.unembedded(source, NO_SUCH_EMBEDDER).values()}


def base_workspace(root: Path, files: dict[str, str]) -> Path:
    workspace = root / "base"
    for name, text in files.items():
        target = workspace / "docs" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    init_config(workspace, ["docs"], embedder={"kind": "hashing", "dimension": 256})
    with KnowledgeBase.open(workspace) as kb:
        report = kb.sync(yes=True)
        if report.failed:
            sys.exit(f"the first sync failed: {report.sources[0].failures[:3]}")
    return workspace


def changed(base: Path, root: Path, label: str, pattern: str, replacement: str) -> Row:
    workspace = root / re.sub(r"\W+", "-", label)
    shutil.copytree(base, workspace)
    config = workspace / "kbsync.toml"
    text, count = re.subn(pattern, replacement, config.read_text())
    if count != 1:
        sys.exit(f"{config}: expected one {pattern!r}")
    config.write_text(text)
    with KnowledgeBase.open(workspace) as kb:
        before = current_texts(kb)
        started = time.perf_counter()
        report = kb.sync(yes=True)
        seconds = time.perf_counter() - started
        after = current_texts(kb)
    tally = report.sources[0]
    return Row(label, tally.chunks["added"], tally.embeddings_computed, tally.embeddings_reused,
               len(after - before), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--history", default="fastapi-docs-history.jsonl.gz")
    args = parser.parse_args()
    files = documents(args.history)
    with tempfile.TemporaryDirectory(prefix="kbsync-chunker-change-") as folder:
        root = Path(folder)
        base = base_workspace(root, files)
        rows = [changed(base, root, *change) for change in CHANGES]
    table = Table(title=f"After a chunker change: {len(files):,} files of {args.history}")
    for column in ("change", "chunks added", "embedded", "reused", "oracle: new texts",
                   "embedded ÷ added", "sync s"):
        table.add_column(column, justify="left" if column == "change" else "right")
    for r in rows:
        table.add_row(r.label, f"{r.added:,}", f"{r.computed:,}", f"{r.reused:,}",
                      f"{r.oracle:,}", f"{r.computed / r.added:.2f}" if r.added else "-",
                      f"{r.seconds:.2f}")
    console.print(table)
    wrong = [r.label for r in rows if r.computed != r.oracle]
    if wrong:
        sys.exit(f"embedded counts differ from the oracle: {', '.join(wrong)}")
    console.print("every change embedded exactly the chunks whose text was new")


if __name__ == "__main__":
    main()
