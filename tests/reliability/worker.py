"""A process doing random kbsync operations on one knowledge base (the concurrency test).

Usage: ``python -m tests.reliability.worker ROOT SEED COUNT``.
"""

from __future__ import annotations

import contextlib
import random
import sys
from pathlib import Path

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.errors import ParameterError
from tests.reliability.harness import WORDS


def main(root: Path, seed: int, count: int) -> None:
    rng = random.Random(seed)
    docs = root / "docs"
    for n in range(count):
        operation = rng.choice(["sync", "sync", "erase", "search", "search"])
        if operation == "sync":
            # Change a document first, saved as editors do (new file, renamed over).
            path = docs / f"doc-{rng.randrange(40):03d}.txt"
            temp = docs / f".{seed}-{n}.tmp"
            temp.write_text(" ".join(rng.choice(WORDS) for _ in range(150)) + ".\n",
                            encoding="utf-8")
            temp.replace(path)
            with KnowledgeBase.open(root) as kb:
                kb.sync(allow_mass_delete=True)
        elif operation == "erase":
            with KnowledgeBase.open(root) as kb, contextlib.suppress(ParameterError):
                # Before the first sync has indexed it, no document has the key: refused.
                kb.erase(f"doc-{rng.randrange(40):03d}.txt")
        else:
            with KnowledgeBase.open(root) as kb:
                kb.search(" ".join(rng.sample(WORDS, 2)), k=3)
        print(operation, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
