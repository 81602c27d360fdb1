"""kbsync inside LlamaIndex: a node parser with stable boundaries, and a retriever.

    pip install 'kbsync[llamaindex]'
    python examples/llamaindex_retriever.py [FOLDER OF DOCUMENTS]

The knowledge base lives in a temporary folder and uses the offline hashing embedder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core import Document

from kbsync import KnowledgeBase
from kbsync.adapters.llamaindex import KbsyncNodeParser, KbsyncRetriever

docs = (Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus").resolve()

# 1. The node parser: content-defined chunks, so an edit changes only the nodes near it.
parser = KbsyncNodeParser(params={"min_tokens": 48, "max_tokens": 192})
page = sorted(docs.glob("*.md"))[0]
nodes = parser.get_nodes_from_documents([Document(text=page.read_text(encoding="utf-8"),
                                                  metadata={"path": page.name})])
print(f"{page.name}: {len(nodes)} nodes")
for node in nodes[:3]:
    print(f"  [{node.start_char_idx}:{node.end_char_idx}] {node.metadata['chunk_identity'][:12]}")

# 2. The retriever: NodeWithScore from hybrid search over a synced knowledge base.
with tempfile.TemporaryDirectory() as home, \
        KnowledgeBase.create(home, sources=[docs], embedder={"kind": "hashing"}) as kb:
    kb.sync()
    retriever = KbsyncRetriever(kb, k=3, context_tokens=256)
    for result in retriever.retrieve("how do retries and backoff work"):
        m = result.node.metadata
        print(f"  {result.score:.4f}  {m['key']}  > {m['heading']}")
