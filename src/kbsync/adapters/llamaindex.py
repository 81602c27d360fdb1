"""LlamaIndex: a node parser with kbsync's content-defined chunking, and a retriever.

    from kbsync.adapters.llamaindex import KbsyncNodeParser, KbsyncRetriever

    nodes = KbsyncNodeParser(params={"max_tokens": 192}).get_nodes_from_documents(docs)
    retriever = KbsyncRetriever(KnowledgeBase.open("docs/"), k=4)

Needs the ``llamaindex`` extra (``llama-index-core``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kbsync.adapters.arguments import check_context_tokens, check_k, check_mode
from kbsync.adapters.metadata import CHUNK_KEYS, HIT_KEYS, chunk_metadata, hit_metadata
from kbsync.app.knowledge_base import KnowledgeBase, SearchMode
from kbsync.core.chunking import TextChunker
from kbsync.errors import DependencyMissingError, ParameterError
from kbsync.store.filters import filters_from

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.node_parser.node_utils import build_nodes_from_splits
    from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.types import MetadataFilters
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyMissingError("the LlamaIndex adapter", "llamaindex",
                                 exc.name or "llama-index-core", exc) from exc

__all__ = ["KbsyncNodeParser", "KbsyncRetriever", "metadata_filters"]


class KbsyncNodeParser(NodeParser):
    """Parses documents into nodes along kbsync's content-defined chunk boundaries, so an
    edit changes the nodes near it only.

    Each node's text is a chunk's canonical text, exactly as :func:`kbsync.chunk_text`
    makes it; ``start_char_idx``/``end_char_idx`` locate it in the document, and the
    metadata adds ``chunk_index``, ``chunk_identity``, ``token_count`` and ``boundary``
    (kept out of the text that is embedded or shown to the model).
    """

    strategy: str = Field(default="tttd", description="tttd, local or bytes.")
    params: dict[str, Any] = Field(default_factory=dict, description=(
        "Chunker parameters, as for kbsync.chunk_text (min_tokens, max_tokens...)."))

    @classmethod
    def from_knowledge_base(cls, kb: KnowledgeBase) -> KbsyncNodeParser:
        """The parser that chunks exactly like the knowledge base ``kb`` does."""
        return cls(strategy=kb.config.chunker.strategy, params=dict(kb.config.chunker.params))

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False,
                     **kwargs: Any) -> list[BaseNode]:
        chunker = TextChunker(self.strategy, **self.params)
        parsed: list[BaseNode] = []
        for node in nodes:
            chunks = chunker.chunk(node.get_content()).chunks
            built = build_nodes_from_splits([c.text for c in chunks], node, id_func=self.id_func)
            for chunk, text_node in zip(chunks, built, strict=True):
                text_node.start_char_idx, text_node.end_char_idx = chunk.start, chunk.end
                text_node.metadata.update(chunk_metadata(chunk))
                _exclude(text_node, CHUNK_KEYS)
                parsed.append(text_node)
        return parsed


class KbsyncRetriever(BaseRetriever):
    """Retrieves ``NodeWithScore`` from a kbsync knowledge base, best first.

    The knowledge base's search mode by default (``mode``: ``vector``, ``text``,
    ``hybrid``); each node's text is the hit's context window of up to
    ``context_tokens`` (``None``: the knowledge base's setting; 0: the chunk alone).
    Its score is the hit's relevance from 0 to 1 (so ``SimilarityPostprocessor``'s
    cut-offs read it), its metadata the document's own and
    :func:`kbsync.adapters.metadata.hit_metadata` (kbsync's bookkeeping is kept out of
    what is embedded and shown to the model).

    ``filters``: LlamaIndex's ``MetadataFilters`` (``==``, ``!=``, ``<``, ``<=``, ``>``,
    ``>=``, ``in``, ``nin``, ``contains`` and ``any`` on a list; AND, and OR of one key's
    values), or a mapping as :meth:`kbsync.KnowledgeBase.search` takes it.

    A ``k`` below 1, an unknown ``mode``, a negative ``context_tokens`` or a filter kbsync
    cannot apply is refused here with ``ParameterError``; so is any other argument (such
    as a vector store retriever's ``vector_store_query_mode``), with ``TypeError``. A
    relevance cut-off is LlamaIndex's ``SimilarityPostprocessor``.
    """

    def __init__(self, knowledge_base: KnowledgeBase, *, k: int = 4,
                 mode: SearchMode | None = None, context_tokens: int | None = None,
                 filters: MetadataFilters | Mapping[str, Any] | None = None,
                 callback_manager: CallbackManager | None = None) -> None:
        owner = type(self).__name__
        self.knowledge_base = knowledge_base
        self.k = check_k(owner, k)
        check_mode(owner, mode)
        check_context_tokens(owner, context_tokens)
        self.mode: SearchMode | None = mode
        self.context_tokens = context_tokens
        self.filters = filters_from(metadata_filters(filters)
                                    if isinstance(filters, MetadataFilters) else filters)
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.knowledge_base.search(query_bundle.query_str, k=self.k, mode=self.mode,
                                          context_tokens=self.context_tokens,
                                          filters=self.filters)
        results: list[NodeWithScore] = []
        for hit in hits:
            node = TextNode(id_=f"{hit.source}:{hit.key}#{hit.index}",
                            text=hit.context or hit.text, metadata=hit_metadata(hit))
            _exclude(node, HIT_KEYS)
            results.append(NodeWithScore(node=node, score=hit.relevance))
        return results


# LlamaIndex's operators as kbsync's filters name them; "contains" and "any" ask whether a
# list holds a value (or one of several), which is what kbsync's equality does on lists.
_OPERATORS = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
              "in": "in", "nin": "nin", "contains": "=", "any": "in"}


def metadata_filters(filters: MetadataFilters) -> dict[str, Any]:
    """LlamaIndex's ``MetadataFilters`` as the mapping :func:`kbsync.store.filters.filters_from`
    takes; ParameterError naming what kbsync cannot filter by (``all``, text matches,
    ``is_empty``, NOT, OR across keys or operators)."""
    condition = str(getattr(filters.condition, "value", filters.condition) or "and").lower()
    parts: list[dict[str, Any]] = []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            parts.append(metadata_filters(item))
            continue
        operator = str(getattr(item.operator, "value", item.operator))
        if operator not in _OPERATORS:
            raise ParameterError(f"MetadataFilter on {item.key!r}: kbsync cannot filter by "
                                 f"{operator!r} (it takes {', '.join(_OPERATORS)})")
        parts.append({item.key: {_OPERATORS[operator]: item.value}})
    if condition == "and":
        return {"$and": parts}
    if condition == "or":
        # One key's values, any of which may match: what kbsync's alternatives are.
        keys = {key for part in parts for key in part}
        ops = {op for part in parts for test in part.values() if isinstance(test, dict)
               for op in test}
        if len(keys) == 1 and ops <= {"=", "in"}:
            key = keys.pop()
            values: list[Any] = []
            for part in parts:
                for value in part[key].values():
                    values += list(value) if isinstance(value, (list, tuple)) else [value]
            return {key: {"in": values}}
        raise ParameterError("MetadataFilters with condition OR: kbsync takes OR between the "
                             "values of one key only (==, in, contains, any)")
    raise ParameterError(f"MetadataFilters with condition {condition.upper()}: kbsync takes "
                         "AND, and OR between the values of one key")


def _exclude(node: TextNode, keys: Sequence[str]) -> None:
    """Keep kbsync's bookkeeping out of the text LlamaIndex embeds or shows the model.

    The title and heading stay: they are words that help both.
    """
    bookkeeping = [k for k in keys if k not in ("title", "heading")]
    node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, *bookkeeping]
    node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, *bookkeeping]
