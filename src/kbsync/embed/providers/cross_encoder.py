"""A cross-encoder reranker: a sequence classifier that reads a query and a passage
together and scores how well the passage answers it (``[search] rerank``).

The model is a Hugging Face folder of a sequence classifier (``config.json``, weights,
``tokenizer.json``), such as ``cross-encoder/ms-marco-MiniLM-L6-v2`` downloaded once
(``huggingface-cli download cross-encoder/ms-marco-MiniLM-L6-v2 --local-dir …``) or any
name in the offline Hugging Face cache; nothing is downloaded at run time. Its weights
are exported once to fp32 ONNX (:func:`~kbsync.embed.providers.onnx_int8.cached_model`,
the same per-user cache as the query encoder) and run by ONNX Runtime, so a search that
reranks never imports torch once the export is cached. A score is the classifier's
logit (its last one when it has several labels); its sigmoid is the relevance.

A folder of any other model (a sentence-embedding model's, a bare encoder's) is refused
by its ``config.json`` before anything is loaded, and a classifier whose weights lack
its head by the export: the library would give either a randomly initialised head, and
its scores would rank the hits by chance while looking like a reranking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kbsync.core.identity import weights_hash
from kbsync.embed.providers.file_digests import remembered
from kbsync.embed.providers.onnx_int8 import cache_folder, cached_model
from kbsync.errors import DependencyMissingError, EmbeddingError

__all__ = ["CrossEncoderReranker"]

_FEATURE = "the cross-encoder reranker"


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a cross-encoder on ONNX Runtime.

    ``model`` is a folder (or a name in the offline Hugging Face cache); ``max_length``
    the word pieces of a pair it reads (longer passages are cut at their end);
    ``cache_dir`` where the export is kept (else the user's cache folder).
    """

    def __init__(self, model: str, *, max_length: int = 512, batch_size: int = 16,
                 cache_dir: str | None = None) -> None:
        self.model_name = model
        self.max_length = max_length
        self.batch_size = batch_size
        self._path = _model_path(model)
        self._folder = Path(cache_dir).expanduser() if cache_dir else cache_folder()
        files = sorted(self._path.glob("*.safetensors")) + sorted(self._path.glob("*.bin"))
        if not files:
            raise EmbeddingError(f"{_FEATURE}: no weights (*.safetensors, *.bin) in {self._path}")
        if not (self._path / "tokenizer.json").is_file():
            raise EmbeddingError(f"{_FEATURE}: no tokenizer.json in {self._path}")
        _check_classifier(model, self._path)

        def blocks() -> Any:
            for weights in files:
                with weights.open("rb") as f:
                    yield from iter(lambda: f.read(1 << 20), b"")

        self._weights = remembered("weights", files, lambda: weights_hash(blocks()),
                                   self._folder)
        self._session: Any = None
        self._inputs: list[str] = []
        self._tokenizer: Any = None

    @property
    def identity(self) -> str:
        return f"cross-encoder:{self.model_name}@{self._weights}:{self.max_length}"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, higher for a better answer to ``query``."""
        if not passages:
            return []
        session = self._loaded()
        scores: list[float] = []
        for start in range(0, len(passages), self.batch_size):
            batch = [(query, p) for p in passages[start : start + self.batch_size]]
            encoded = self._tokenizer.encode_batch(batch)
            feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encoded],
                                               dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
            logits = np.asarray(session.run(None, {n: feed[n] for n in self._inputs})[0],
                                dtype=np.float32)
            scores += [float(v) for v in logits.reshape(len(batch), -1)[:, -1]]
        return scores

    def _loaded(self) -> Any:
        if self._session is not None:
            return self._session
        try:
            import onnxruntime  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise DependencyMissingError(_FEATURE, "local", exc.name or "onnxruntime",
                                         exc) from exc
        for attempt in (1, 2):
            file = cached_model(self._path, self._weights, self._folder, classifier=True)
            try:
                session = onnxruntime.InferenceSession(str(file),
                                                       providers=["CPUExecutionProvider"])
                break
            except Exception as exc:  # a file ONNX Runtime cannot run: build it once more
                file.unlink(missing_ok=True)
                if attempt == 2:
                    raise EmbeddingError(f"{_FEATURE} cannot run {file}: {exc}") from exc
        try:
            tokenizer = Tokenizer.from_file(str(self._path / "tokenizer.json"))
        except Exception as exc:  # the library's own error type for a bad file
            raise EmbeddingError(f"{_FEATURE} cannot read {self._path / 'tokenizer.json'}: "
                                 f"{exc}") from exc
        # The passage gives way first: a query is short, and its words must all be read.
        tokenizer.enable_truncation(max_length=self.max_length, strategy="only_second")
        padding = tokenizer.padding or {}
        tokenizer.enable_padding(pad_id=padding.get("pad_id", 0),
                                 pad_token=padding.get("pad_token", "[PAD]"))
        self._tokenizer = tokenizer
        self._inputs = [i.name for i in session.get_inputs()]
        self._session = session
        return session


def _check_classifier(model: str, path: Path) -> None:
    """Refuse a model whose ``config.json`` names no sequence classifier: loaded as one, it
    would score with a randomly initialised head."""
    file = path / "config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"[search] rerank_model = {model!r}: cannot read {file}: "
                             f"{exc}") from exc
    names = config.get("architectures") if isinstance(config, dict) else None
    names = [str(n) for n in names] if isinstance(names, list) else []
    if not any(n.endswith("ForSequenceClassification") for n in names):
        raise EmbeddingError(
            f"[search] rerank_model = {model!r} is not a cross-encoder: its config.json names "
            f"{', '.join(names) or 'no architecture'}, not a sequence classifier, so its "
            "scores would come from a randomly initialised head; name a cross-encoder's "
            "folder (such as cross-encoder/ms-marco-MiniLM-L6-v2)")


def _model_path(model: str) -> Path:
    """The model's folder: a path, or the offline Hugging Face cache's copy of a name."""
    candidate = Path(model).expanduser()
    if candidate.is_dir():
        return candidate
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise EmbeddingError(f"{_FEATURE}: no folder {model!r}, and no Hugging Face cache to "
                             "look the name up in") from exc
    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:
        raise EmbeddingError(
            f"{_FEATURE}: the model {model!r} is neither a folder nor in the offline Hugging "
            f"Face cache; download it once and name its folder in [search] rerank_model"
        ) from exc
