"""The settings of the local model: the ``[embedder]`` table of ``kind = "local"``.

Apart from the model's code, so that reading ``kbsync.toml`` (a status, a plan's
configuration) checks the table without importing NumPy or the model's libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from msgspec import Meta

__all__ = ["DEFAULT_MODEL", "LocalSettings"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True, slots=True)
class LocalSettings:
    """A sentence-transformers model on this machine (see
    :class:`~kbsync.embed.providers.local.LocalEmbedder`)."""

    model: str = DEFAULT_MODEL
    batch_size: Annotated[int, Meta(ge=1)] = 16
    normalize: bool = True
    device: str = "cpu"
    backend: Literal["torch", "onnx-int8"] = "torch"
    cache_dir: str | None = None
