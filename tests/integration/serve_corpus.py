"""A small knowledge base with history for the dashboard tests: two syncs, one edit, one failure."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kbsync import KnowledgeBase
from tests.conftest import CORPUS

__all__ = ["ADDED", "KnowledgeBaseOnDisk", "changed_knowledge_base"]

ADDED = "A brand new paragraph about lighthouse keepers and their logbooks."


@dataclass(frozen=True)
class KnowledgeBaseOnDisk:
    folder: Path
    changed: str  # the key of the edited document
    failing: str  # the key of a file every sync fails on
    documents: int  # how many documents the store holds


def changed_knowledge_base(folder: Path) -> KnowledgeBaseOnDisk:
    """Sync four documents (and one binary file that fails), add a paragraph to one, sync again."""
    docs = folder / "docs"
    docs.mkdir(parents=True)
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:4]:
        shutil.copy(path, docs / path.name)
    (docs / "controls.txt").write_bytes(b"\x01\x02\x03\x04\x05\x06\x07\x08" * 4)
    changed = docs / "a-harbormaster-configuration.md"
    with KnowledgeBase.create(folder, ["docs"]) as kb:
        kb.sync()
        body = changed.read_text(encoding="utf-8")
        at = body.index("\n\n", len(body) // 2)
        changed.write_text(body[:at] + "\n\n" + ADDED + body[at:], encoding="utf-8")
        kb.sync()
    return KnowledgeBaseOnDisk(folder, changed.name, "controls.txt", 4)
