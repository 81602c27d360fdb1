"""kbsync inside other RAG frameworks: LangChain and LlamaIndex.

Each adapter is a thin layer over :class:`kbsync.KnowledgeBase` and the pure
chunker, importable only with its extra installed (``kbsync[langchain]``,
``kbsync[llamaindex]``); importing it without raises ``DependencyMissingError``.
Nothing here is imported by the rest of kbsync.
"""

__all__: list[str] = []
