"""LangChain: a text splitter with kbsync's content-defined chunking, and a retriever.

    from kbsync.adapters.langchain import KbsyncRetriever, KbsyncTextSplitter

    splitter = KbsyncTextSplitter(min_tokens=48, max_tokens=192)
    retriever = KbsyncRetriever(knowledge_base=KnowledgeBase.open("docs/"), k=4)

Needs the ``langchain`` extra (``langchain-core`` and ``langchain-text-splitters``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kbsync.adapters.arguments import (
    check_context_tokens,
    check_k,
    check_mode,
    check_score_threshold,
)
from kbsync.adapters.metadata import chunk_metadata, hit_metadata
from kbsync.app.knowledge_base import KnowledgeBase, SearchMode
from kbsync.core.chunking import TextChunker
from kbsync.errors import DependencyMissingError, ParameterError

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_text_splitters import TextSplitter
    from pydantic import ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyMissingError("the LangChain adapter", "langchain",
                                 exc.name or "langchain-core", exc) from exc

__all__ = ["SEARCH_TYPES", "KbsyncRetriever", "KbsyncTextSplitter"]

SEARCH_TYPES = ("similarity", "similarity_score_threshold")
"""The search types of LangChain's vector store retrievers that kbsync's search is: its
ranking, and that ranking with a relevance threshold. Maximal marginal relevance
(``"mmr"``) is not one: it needs the hits' vectors, which a search does not return."""

_ARGUMENTS = ("k", "filter", "score_threshold")


class KbsyncTextSplitter(TextSplitter):
    """Splits text into kbsync's content-defined chunks, so an edit moves nearby
    boundaries only and unchanged passages keep their chunks (and their vectors).

    The pieces are the chunks' canonical (normalized) text, exactly as
    :func:`kbsync.chunk_text` makes them. :meth:`create_documents` adds each
    chunk's ``start`` and ``end`` offsets in the original text, ``chunk_index``,
    ``chunk_identity``, ``token_count`` and ``boundary`` to the metadata (and
    ``start_index``, LangChain's name for the start).
    """

    def __init__(self, strategy: str = "tttd", **params: Any) -> None:
        """``strategy`` and ``params`` as for :func:`kbsync.chunk_text` (e.g. ``min_tokens``,
        ``max_tokens``, ``snap``); invalid parameters raise ``ParameterError`` here."""
        self._chunker = TextChunker(strategy, **params)
        # The base class sizes chunks in characters; kbsync sizes them itself, in tokens.
        super().__init__(chunk_size=max(1, int(params.get("max_tokens", 1))), chunk_overlap=0)

    @classmethod
    def from_knowledge_base(cls, kb: KnowledgeBase) -> KbsyncTextSplitter:
        """The splitter that chunks exactly like the knowledge base ``kb`` does."""
        return cls(kb.config.chunker.strategy, **kb.config.chunker.params)

    def split_text(self, text: str) -> list[str]:
        """The canonical texts of the chunks of ``text``."""
        return [chunk.text for chunk in self._chunker.chunk(text).chunks]

    def create_documents(self, texts: list[str],
                         metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """One ``Document`` per chunk of each text, with the text's metadata and the chunk's.

        ``split_documents`` (inherited) comes here too.
        """
        documents: list[Document] = []
        for i, text in enumerate(texts):
            base = metadatas[i] if metadatas else {}
            for chunk in self._chunker.chunk(text).chunks:
                metadata = {**copy.deepcopy(base), **chunk_metadata(chunk),
                            "start_index": chunk.start}
                documents.append(Document(page_content=chunk.text, metadata=metadata))
        return documents


class KbsyncRetriever(BaseRetriever):
    """Retrieves from a kbsync knowledge base in its search mode (or ``mode``: ``vector``,
    ``text``, ``hybrid``), each hit returned with its section neighbours up to
    ``context_tokens`` (embed small, return big).

    Documents come best first; ``page_content`` is the context window (the chunk
    alone when ``context_tokens`` is 0), and the metadata holds the document's own
    metadata and :func:`kbsync.adapters.metadata.hit_metadata`: ``score`` is the
    relevance from 0 to 1, ``raw_score`` the ranking's value.

    Filters as :meth:`kbsync.KnowledgeBase.search` takes them, in the vector stores'
    style: ``search_kwargs={"k": 4, "filter": {"lang": "en", "date": {"$gte":
    "2024-01-01"}}, "score_threshold": 0.5}`` (or the ``filter`` field, or
    ``invoke(query, filter=…)``); ``score_threshold`` (from 0 to 1) drops hits of a lower
    relevance. ``search_type`` is ``"similarity"`` or ``"similarity_score_threshold"``
    (which needs a ``score_threshold``), as LangChain's vector store retrievers name
    them; ``"mmr"``, an unknown field or search argument, a threshold outside [0, 1] or
    a ``k`` below 1 is refused here with ``ParameterError`` (an unknown field with
    pydantic's ``ValidationError``), not ignored.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    knowledge_base: KnowledgeBase
    k: int = 4
    mode: SearchMode | None = None
    """``None`` uses the knowledge base's mode (hybrid with a model)."""
    context_tokens: int | None = None
    """Tokens of context around each hit; ``None`` uses the knowledge base's setting."""
    filter: Mapping[str, Any] | None = None
    """Only documents meeting these (see :func:`kbsync.store.filters.filters_from`)."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``k``, ``filter`` and ``score_threshold``, as LangChain's vector store retrievers take
    them; one given here and as a field, with another value, is refused."""
    search_type: str = "similarity"
    """``"similarity"``, or ``"similarity_score_threshold"`` with a ``score_threshold``."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        owner = type(self).__name__
        if self.search_type not in SEARCH_TYPES:
            raise ParameterError(
                f"{owner}: search_type {self.search_type!r} is not supported (use "
                f"{' or '.join(SEARCH_TYPES)}): kbsync's hits do not carry the vectors that "
                "maximal marginal relevance needs" if self.search_type == "mmr" else
                f"{owner}: unknown search_type {self.search_type!r} (use "
                f"{' or '.join(SEARCH_TYPES)})")
        check_k(owner, self.k)
        check_mode(owner, self.mode)
        check_context_tokens(owner, self.context_tokens)
        for name in ("k", "filter"):  # which of two values was meant cannot be guessed
            if (name in self.model_fields_set and name in self.search_kwargs
                    and self.search_kwargs[name] != getattr(self, name)):
                raise ParameterError(
                    f"{owner}: {name} is given twice, {getattr(self, name)!r} and "
                    f"search_kwargs {{{name!r}: {self.search_kwargs[name]!r}}}: give one")
        self._arguments(self.search_kwargs)

    def _arguments(self, given: Mapping[str, Any]) -> tuple[int, float]:
        """The ``k`` and relevance threshold of these search arguments, checked."""
        owner = type(self).__name__
        unknown = set(given) - set(_ARGUMENTS)
        if unknown:
            raise ParameterError(f"{owner}: unknown search argument(s) "
                                 f"{', '.join(sorted(unknown))} ({', '.join(_ARGUMENTS)})")
        k = check_k(owner, given.get("k", self.k))
        threshold = given.get("score_threshold")
        if threshold is None and self.search_type == "similarity_score_threshold":
            raise ParameterError(f"{owner}: search_type 'similarity_score_threshold' needs "
                                 "search_kwargs={'score_threshold': a relevance from 0 to 1}")
        return k, 0.0 if threshold is None else check_score_threshold(owner, threshold)

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        given = {**self.search_kwargs, **kwargs}
        k, threshold = self._arguments(given)
        hits = self.knowledge_base.search(query, k=k, mode=self.mode,
                                          context_tokens=self.context_tokens,
                                          filters=given.get("filter", self.filter))
        return [Document(page_content=hit.context or hit.text, metadata=hit_metadata(hit))
                for hit in hits if hit.relevance >= threshold]
