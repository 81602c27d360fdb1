"""Embedders: text -> vectors. An embedder owns its identity (model, parameters, dimension)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from kbsync.model import ANY_NORM, VectorNorm

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors: TypeAlias = npt.NDArray[np.float32]

__all__ = ["Embedder", "LexicalEmbedder", "QueryEmbedder", "Reranker", "Vectors", "norm_of"]


def __getattr__(name: str) -> Any:
    """``Vectors``, the type of a batch of vectors: NumPy is imported by what computes or
    reads vectors, not by what only names an embedder's kind (a status, a configuration)."""
    if name == "Vectors":
        import numpy as np
        import numpy.typing as npt

        return npt.NDArray[np.float32]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@runtime_checkable
class Embedder(Protocol):
    """Embeds batches of texts; the embedding cache is keyed by chunk identity + ``identity``.

    A sync embeds in a thread of its own while it writes other batches to the store.
    An embedder whose work holds the interpreter lock (pure Python or NumPy on small
    arrays) may say so with a class attribute ``holds_gil = True``; it then embeds in
    turn with the writes, which is faster than both contending for the lock.

    An embedder should say what norm its vectors have, as an attribute ``norm`` (a
    :class:`~kbsync.model.VectorNorm`; see :func:`norm_of`): ``verify`` then takes a
    stored vector of another norm for damage, and search leaves it out. One that does
    not say is held to finite vectors only.

    An embedder that loads a model on first use may say how long that took, as an
    attribute ``load_seconds`` (None until loaded): a sync's report keeps the load it
    saw, and a plan counts it in the time its sync takes.
    """

    @property
    def identity(self) -> str:
        """Model id, a hash of its parameters and the dimension, e.g. ``"hashing-v1:…:256"``."""
        ...

    @property
    def dimension(self) -> int:
        ...

    @property
    def max_input_tokens(self) -> int | None:
        """The longest input the model reads, in its own tokens; ``None`` when unlimited.

        Longer input is silently truncated by most models, so kbsync checks chunk
        sizes against it and counts the chunks that would be cut.
        """
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the model's own tokens."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalized row per text, in order."""
        ...


def norm_of(embedder: object) -> VectorNorm:
    """The norm of ``embedder``'s vectors: its ``norm`` attribute, else only "finite"."""
    norm = getattr(embedder, "norm", None)
    return norm if isinstance(norm, VectorNorm) else ANY_NORM


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder with a faster way to embed search queries than :meth:`Embedder.embed`
    (the local model's fp32 ONNX export, where ``embed`` runs torch): the same vectors
    within the tolerance it states, so they compare with the stored ones."""

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalized row per query, in order."""
        ...


@runtime_checkable
class LexicalEmbedder(Protocol):
    """An embedder whose vectors are its texts' words and nothing else (hashed counts): a
    likeness between a query and a text that share no word is hash collisions, not
    meaning, and a search leaves such a text out as it leaves out one of no likeness."""

    def share_terms(self, query: str, texts: Sequence[str]) -> list[bool]:
        """Whether each of ``texts`` holds a term (a word or a pair) of ``query``."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores passages for a query by reading both together (a cross-encoder): a second
    ranking of a search's best candidates."""

    @property
    def identity(self) -> str:
        """The model and its parameters."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, higher for a better answer (a logit: its sigmoid is the
        passage's relevance)."""
        ...
