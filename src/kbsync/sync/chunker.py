"""The chunking settings of a knowledge base, as the sync and its derivations see them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kbsync.errors import ConfigError

if TYPE_CHECKING:  # the chunking core is imported when a chunker is built, not to configure one
    from kbsync.core.chunking import TextChunker
    from kbsync.model import Chunk

__all__ = ["EMBEDDER_COUNTER", "Chunker"]


EMBEDDER_COUNTER = "embedder"
"""``[chunker] token_counter`` value that counts in the embedder's own tokens."""


@dataclass(frozen=True)
class Chunker:
    """The chunking settings of a knowledge base: a strategy and its parameters.

    ``embedder_counter`` is what ``token_counter = "embedder"`` stands for (the
    counter of the configured embedder, e.g. ``"tokenizer:<path>"``); the knowledge
    base sets it when it builds its embedder.
    """

    strategy: str = "tttd"
    params: Mapping[str, Any] = field(default_factory=dict)
    embedder_counter: str = ""

    @property
    def counts_in_embedder_tokens(self) -> bool:
        return self.params.get("token_counter") == EMBEDDER_COUNTER

    def validate(self) -> None:
        """Check the settings; before the embedder is known, the estimate stands in for it."""
        stand_in = self.embedder_counter or "estimate"
        replace(self, embedder_counter=stand_in).text_chunker()

    def settings(self) -> dict[str, Any]:
        """The chunker's parameters with ``token_counter = "embedder"`` resolved."""
        params = dict(self.params)
        if self.counts_in_embedder_tokens:
            if not self.embedder_counter:
                raise ConfigError('[chunker] token_counter = "embedder" needs the embedder: '
                                  "build the chunker through the knowledge base")
            params["token_counter"] = self.embedder_counter
        return params

    def text_chunker(self) -> TextChunker:
        """The validated chunker (built once per settings)."""
        return _text_chunker(self.strategy, json.dumps(self.settings(), sort_keys=True))

    @property
    def fingerprint(self) -> str:
        """What a document's derivation commits to besides its extractor."""
        return self.text_chunker().params_hash

    def chunks(self, text: str) -> tuple[Chunk, ...]:
        return tuple(self.text_chunker().chunks([text]))


@lru_cache(maxsize=16)
def _text_chunker(strategy: str, params: str) -> TextChunker:
    from kbsync.core.chunking import TextChunker
    from kbsync.embed.tokenizer import counter_for

    settings = json.loads(params)
    counter = counter_for(str(settings.get("token_counter", "")))
    return TextChunker(strategy, counter=counter, **settings)
