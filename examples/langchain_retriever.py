"""kbsync inside LangChain: a text splitter with stable boundaries, and a retriever.

    pip install 'kbsync[langchain]'
    python examples/langchain_retriever.py [FOLDER OF DOCUMENTS]

The knowledge base lives in a temporary folder and uses the offline hashing embedder.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from langchain_core.documents import Document

from kbsync import KnowledgeBase
from kbsync.adapters.langchain import KbsyncRetriever, KbsyncTextSplitter

docs = (Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus").resolve()

# 1. The splitter: content-defined chunks, so an edit moves only nearby boundaries.
splitter = KbsyncTextSplitter(min_tokens=48, max_tokens=192)
page = sorted(docs.glob("*.md"))[0]
pieces = splitter.split_documents([Document(page_content=page.read_text(encoding="utf-8"),
                                            metadata={"path": page.name})])
print(f"{page.name}: {len(pieces)} chunks")
for piece in pieces[:3]:
    m = piece.metadata
    print(f"  [{m['start']}:{m['end']}] {m['token_count']} tokens, {m['chunk_identity'][:12]}")

# 2. The retriever: hybrid search over a synced knowledge base, small chunks, big context.
with tempfile.TemporaryDirectory() as home, \
        KnowledgeBase.create(home, sources=[docs], embedder={"kind": "hashing"}) as kb:
    kb.sync()
    retriever = KbsyncRetriever(knowledge_base=kb, k=3, context_tokens=256)
    for doc in retriever.invoke("how do retries and backoff work"):
        m = doc.metadata
        print(f"  {m['score']:.4f}  {m['key']}  > {m['heading']}  ({len(doc.page_content)} chars)")
