"""The Python API in one page: create a knowledge base, sync it, search it, edit, see the diff.

    python examples/api_quickstart.py [FOLDER OF DOCUMENTS]

The documents (the sample corpus by default) are copied into a temporary
knowledge base first, so the edit below never touches your files. The offline
hashing embedder is used: nothing is downloaded.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from kbsync import KnowledgeBase

docs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus"

with tempfile.TemporaryDirectory() as home:
    shutil.copytree(docs, Path(home) / "docs")
    with KnowledgeBase.create(home, sources=["docs"], embedder={"kind": "hashing"}) as kb:
        print("plan:", dict(kb.plan().documents))  # what a sync would do; writes nothing
        result = kb.sync()
        print(f"synced: {result.total('new')} new documents, "
              f"{sum(s.embeddings_computed for s in result.sources)} chunks embedded")

        for hit in kb.search("how do retries and backoff work", k=3):
            print(f"  {hit.score:.4f}  {hit.key}  > {hit.heading}")

        # Edit one document: only the chunks near the edit are embedded again.
        page = sorted((Path(home) / "docs").glob("*.md"))[0]
        page.write_text(page.read_text(encoding="utf-8")
                        + "\n\nA new closing paragraph about lighthouse keepers.\n",
                        encoding="utf-8")
        again = kb.sync()
        print(f"re-synced: {again.total('modified')} modified, "
              f"{sum(s.embeddings_computed for s in again.sources)} chunks embedded")

        change = kb.diff(page.name)
        print(f"diff {change.key}: {change.verdict}, similarity {change.similarity:.3f}")
        for region in change.regions:
            print(f"  changed at {region.offset}: ...{region.text.strip()[-60:]!r}")

        status = kb.status()
        print(f"status: {status.documents} documents, {status.chunks} chunks")
        checked = kb.verify()
        print("verify:", "ok" if checked.ok else "\n".join(checked.problems))
