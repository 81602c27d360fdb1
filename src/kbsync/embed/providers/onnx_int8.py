"""The local model on ONNX Runtime with int8 weights (``backend = "onnx-int8"``, extra ``onnx``).

The model's own offline weights are exported to ONNX once (``torch.onnx.export``) and
the weight matrices of its MatMuls are quantized to int8, one scale per output
channel (``onnxruntime.quantization.quantize_dynamic``): the issue's measurements found
default dynamic int8 drifting (mean cosine 0.941 to the torch vectors) and this recipe
close (0.991). The result is cached in a per-user folder, keyed by the weights' hash
and :data:`RECIPE`; texts are tokenized with the model's ``tokenizer.json`` and pooled
and normalized as its ``modules.json`` says. Vectors differ slightly from the torch
backend's, so the embedder's identity names the backend and the recipe.

The same export without the quantization (:data:`FP32_RECIPE`) is the torch backend's
query encoder: its vectors equal the torch ones within :data:`FP32_TOLERANCE`, so a
search embeds its query on ONNX Runtime against vectors torch stored, and never
imports torch (seconds) once the export is cached.

Nothing here imports onnxruntime, onnx or torch until a text is embedded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from kbsync.embed import Vectors
from kbsync.embed.providers.file_digests import remembered
from kbsync.errors import DependencyMissingError, EmbeddingError, KbsyncError

__all__ = ["CLASSIFIER_RECIPE", "FP32_RECIPE", "FP32_TOLERANCE", "RECIPE", "OnnxInt8Model",
           "Pooling", "cache_folder", "cached_file", "cached_model", "pooling_of"]

# The export recipe: bump it whenever the exported or quantized graph may change
# (opset, exporter, quantization options); it keys the cache and the identity.
RECIPE = "int8mm-pc-v1"
FP32_RECIPE = "fp32-v1"
"""The unquantized export: the torch backend's query encoder (same identity as torch)."""
CLASSIFIER_RECIPE = "cls-fp32-v1"
"""The unquantized export of a sequence classifier's scores (a reranker's cross-encoder)."""
FP32_TOLERANCE = 1e-5
"""How far an fp32 ONNX vector may be from the torch one of the same text, in any of its
components (unit vectors): the two run the same float32 arithmetic in another order.
Measured on the default model: at most 2e-7 (``tests/integration/test_embed_onnx.py``)."""
_OPSET = 17
_FEATURE = "the local embedder's onnx-int8 backend"
_STALE_SECONDS = 3600.0  # an export folder this old was left by a process that died


@dataclass(frozen=True, slots=True)
class Pooling:
    """How token vectors become one vector: a sentence-transformers Pooling mode."""

    mode: str  # "mean", "cls" or "max"
    normalize: bool  # a Normalize module follows


def pooling_of(path: Path) -> Pooling:
    """The pooling a sentence-transformers folder describes (Transformer, Pooling with
    one mode, optional Normalize); other layouts need the torch backend."""
    modes = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls",
             "pooling_mode_max_tokens": "max"}
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in modules]
        pooling = next(m for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((path / str(pooling.get("path", "")) / "config.json")
                            .read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise EmbeddingError(f"{_FEATURE} cannot read the model's pooling in {path}: "
                             f"{exc!r}") from exc
    chosen = [name for key, name in modes.items() if config.get(key)]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and v
              and k not in modes]
    if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"} \
            or len(chosen) != 1 or others:
        raise EmbeddingError(
            f"{_FEATURE} runs a Transformer, one mean, CLS or max Pooling and an optional "
            f"Normalize; the model in {path} has {kinds} (use backend = \"torch\")")
    return Pooling(chosen[0], "Normalize" in kinds)


def cache_folder() -> Path:
    """The per-user folder of exported models: ``$KBSYNC_CACHE_DIR/onnx``, else
    ``$XDG_CACHE_HOME/kbsync/onnx`` (``~/.cache/kbsync/onnx``; on Windows
    ``%LOCALAPPDATA%\\kbsync\\onnx``)."""
    own = os.environ.get("KBSYNC_CACHE_DIR")
    if own:
        return Path(own).expanduser() / "onnx"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "kbsync" / "onnx"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "kbsync" / "onnx"


def _digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_model(model: Path, weights: str, folder: Path, *, quantized: bool = True,
                 classifier: bool = False) -> Path:
    """The int8 ONNX file of these weights (``quantized``; else the fp32 one; with
    ``classifier`` the fp32 one of a sequence classifier's scores), exported and quantized
    now unless cached.

    A cached file is named ``<weights>-<recipe>.<digest of its bytes>.onnx`` and used
    only when its bytes still have that digest; anything else under the key (a file
    cut short, overwritten, damaged) is removed and built again. It is built in a
    private folder beside it and renamed into place, so another process sees the
    whole file or none.
    """
    quantized = quantized and not classifier
    found = cached_file(weights, folder, quantized=quantized, classifier=classifier)
    if found is not None:
        return found
    key = _key(weights, quantized, classifier)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_exports(folder)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".export-") as work:
            fp32, int8 = Path(work) / "model.onnx", Path(work) / "int8.onnx"
            _export(model, fp32, classifier=classifier)
            if quantized:
                _quantize(fp32, int8)
            built = int8 if quantized else fp32
            with built.open("rb") as f:
                os.fsync(f.fileno())
            final = folder / f"{key}.{_digest(built)}.onnx"
            os.replace(built, final)
    except OSError as exc:
        raise EmbeddingError(f"{_FEATURE} cannot write its exported model to {folder}: "
                             f"{exc}") from exc
    except KbsyncError:
        raise
    except Exception as exc:  # the exporter's and the quantizer's own errors
        raise EmbeddingError(f"{_FEATURE} cannot export the model in {model}: "
                             f"{type(exc).__name__}: {exc}") from exc
    return final


def _key(weights: str, quantized: bool, classifier: bool = False) -> str:
    recipe = CLASSIFIER_RECIPE if classifier else RECIPE if quantized else FP32_RECIPE
    return f"{weights}-{recipe}"


def cached_file(weights: str, folder: Path, *, quantized: bool = True,
                classifier: bool = False) -> Path | None:
    """The cached export of these weights whose bytes still have the digest in its name;
    anything else under the key (cut short, overwritten, damaged) is removed."""
    key = _key(weights, quantized and not classifier, classifier)
    for candidate in sorted(folder.glob(f"{key}.*.onnx")):
        digest = remembered("onnx", [candidate], partial(_digest, candidate), folder)
        if candidate.name == f"{key}.{digest}.onnx":
            return candidate
        candidate.unlink(missing_ok=True)  # not what was written: built again when needed
    return None


def _remove_stale_exports(folder: Path) -> None:
    """Export folders that a killed process left behind (live ones are minutes old)."""
    for stale in folder.glob(".export-*"):
        try:
            if time.time() - stale.stat().st_mtime > _STALE_SECONDS:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass


def _export(model: Path, target: Path, *, classifier: bool = False) -> None:
    """The model's Transformer (token vectors out; with ``classifier``, a sequence
    classifier's scores) as an fp32 ONNX graph with dynamic batch and length, by the
    TorchScript exporter (seconds; the dynamo one takes ~5x)."""
    try:
        import torch
        from transformers import AutoModel, AutoModelForSequenceClassification
    except ImportError as exc:
        raise DependencyMissingError(_FEATURE, "onnx", "torch", exc) from exc
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # a bar per load
    try:
        kind = AutoModelForSequenceClassification if classifier else AutoModel
        network, loading = kind.from_pretrained(str(model), output_loading_info=True)
        network = network.eval()
    except Exception as exc:  # the library raises many kinds for an unreadable folder
        raise EmbeddingError(f"{_FEATURE} cannot load the weights in {model}: {exc}") from exc
    missing = sorted(loading.get("missing_keys") or ())
    if classifier and missing:  # the library fills them in at random, and says nothing
        raise EmbeddingError(
            f"[search] rerank_model: the weights in {model} lack the sequence classifier's "
            f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}; its scores would "
            "come from a randomly initialised head")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    uses_types = "token_type_ids" in _forward_parameters(network)
    inputs = names if uses_types else names[:2]

    class TokenVectors(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *features: Any) -> Any:
            out = self.inner(**dict(zip(inputs, features, strict=True)))
            return out.logits if classifier else out.last_hidden_state

    sample = torch.ones((2, 8), dtype=torch.long)
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's notes on traced shape checks
        torch.onnx.export(
            TokenVectors(network), tuple(sample if n != "token_type_ids" else sample * 0
                                         for n in inputs),
            str(target), dynamo=False, opset_version=_OPSET, input_names=inputs,
            output_names=["token_vectors"],
            dynamic_axes={**{n: {0: "batch", 1: "length"} for n in inputs},
                          "token_vectors": {0: "batch"} if classifier
                          else {0: "batch", 1: "length"}})


def _forward_parameters(network: Any) -> set[str]:
    import inspect

    return set(inspect.signature(network.forward).parameters)


def _quantize(fp32: Path, int8: Path) -> None:
    """Per-output-channel int8 of the weight matrices of the MatMuls only (activations
    are quantized per batch at run time); embeddings, norms and attention stay fp32."""
    try:
        from onnxruntime.quantization import (  # type: ignore[import-untyped]
            QuantType,
            quantize_dynamic,
        )
    except ImportError as exc:
        raise DependencyMissingError(_FEATURE, "onnx", "onnxruntime", exc) from exc
    import logging

    quiet = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process, every time
    try:
        quantize_dynamic(str(fp32), str(int8), per_channel=True, op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8, extra_options={"MatMulConstBOnly": True})
    finally:
        logging.getLogger().setLevel(quiet)


class OnnxInt8Model:
    """The exported model's ONNX Runtime inference session and tokenizer, made when needed
    (int8 weights, or with ``quantized=False`` the fp32 export)."""

    def __init__(self, model: Path, weights: str, *, window: int, pooling: Pooling,
                 normalize: bool, device: str, cache_dir: Path | None,
                 quantized: bool = True) -> None:
        self.model = model
        self.weights = weights
        self.window = window
        self.pooling = pooling
        self.normalize = normalize
        self.device = device
        self.folder = cache_dir if cache_dir is not None else cache_folder()
        self.quantized = quantized
        self.file: Path | None = None
        self._session: Any = None
        self._inputs: list[str] = []
        self._feeder: Any = None
        self._counter: Any = None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text with the special tokens, untruncated."""
        if self._counter is None:
            self._counter = self._tokenizer()
            self._counter.no_truncation()
            self._counter.no_padding()
        return [len(e.ids) for e in self._counter.encode_batch(list(texts))]

    def embed(self, texts: Sequence[str], batch_size: int) -> Vectors:
        """The texts' vectors, ``batch_size`` at a time in the order given, each batch
        padded to its longest text and truncated to the window."""
        session = self._loaded()
        out: Vectors | None = None
        for start in range(0, len(texts), batch_size):
            encoded = self._feeder.encode_batch(list(texts[start : start + batch_size]))
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                    "attention_mask": mask,
                    "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
            tokens = session.run(None, {n: feed[n] for n in self._inputs})[0]
            vectors = self._pool(np.asarray(tokens, dtype=np.float32), mask)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[start : start + len(encoded)] = vectors
        assert out is not None, "the caller embeds at least one text"
        return out

    def _pool(self, tokens: Vectors, mask: Any) -> Vectors:
        """Token vectors to one per text, as sentence-transformers' Pooling does."""
        weights = mask[:, :, None].astype(np.float32)
        if self.pooling.mode == "mean":
            pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        elif self.pooling.mode == "cls":
            pooled = tokens[:, 0]
        else:
            pooled = np.where(weights > 0, tokens, np.float32(-1e9)).max(axis=1)
        if self.pooling.normalize or self.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
        return np.asarray(pooled, dtype=np.float32)

    def _tokenizer(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise DependencyMissingError(_FEATURE, "onnx", "tokenizers", exc) from exc
        path = self.model / "tokenizer.json"
        try:
            return Tokenizer.from_file(str(path))
        except Exception as exc:  # the library's own error type for a bad file
            raise EmbeddingError(f"{_FEATURE} cannot read {path}: {exc}") from exc

    def _loaded(self) -> Any:
        if self._session is not None:
            return self._session
        try:
            import onnxruntime  # type: ignore[import-untyped]
        except ImportError as exc:
            raise DependencyMissingError(_FEATURE, "onnx", "onnxruntime", exc) from exc
        providers = self._providers(onnxruntime.get_available_providers())
        for attempt in (1, 2):
            self.file = cached_model(self.model, self.weights, self.folder,
                                     quantized=self.quantized)
            try:
                session = onnxruntime.InferenceSession(str(self.file), providers=providers)
                break
            except Exception as exc:  # a file ONNX Runtime cannot run: build it once more
                self.file.unlink(missing_ok=True)
                if attempt == 2:
                    raise EmbeddingError(f"{_FEATURE} cannot run {self.file}: {exc}") from exc
        feeder = self._tokenizer()
        feeder.enable_truncation(max_length=self.window)
        pad = (feeder.padding or {}).get("pad_id", 0)
        pad_token = (feeder.padding or {}).get("pad_token", "[PAD]")
        feeder.enable_padding(pad_id=pad, pad_token=pad_token)  # to each batch's longest
        self._feeder = feeder
        self._inputs = [i.name for i in session.get_inputs()]
        self._session = session
        return session

    def _providers(self, available: Sequence[str]) -> list[Any]:
        """CUDA first when asked for (or, with ``auto``, when ONNX Runtime has it)."""
        cuda = "CUDAExecutionProvider" in available
        if self.device.startswith("cuda") and not cuda:
            raise EmbeddingError(
                f"{_FEATURE}: device {self.device!r} asked for, but this ONNX Runtime has no "
                f"CUDA provider (it has {', '.join(available)}); install onnxruntime-gpu")
        if self.device.startswith("cuda") or (self.device == "auto" and cuda):
            index = self.device.partition(":")[2] or "0"  # "cuda:1": the second GPU
            return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        return ["CPUExecutionProvider"]
