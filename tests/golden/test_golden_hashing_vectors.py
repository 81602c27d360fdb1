"""The hashing embedder's vectors are pinned: its cached vectors stay valid whatever the
implementation (the hashes were taken from the first, row-by-row one)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from kbsync.embed.hashing import HashingEmbedder

TEXTS = [*(Path(__file__).parent / "sample.txt").read_text(encoding="utf-8").split("\n\n"),
         "", "The and of", "Ünïcode wörds, retries retried"]
PINNED = {
    8: "ab4788a30ba60f6ca6045de0e53dfe5874f3518da39816ab25692ddbdd0bac6a",
    64: "19645d102ea6f2aa7d9f393245e751db6ced31c75a6c54a9a57c678435053fc3",
    1024: "2cd759a15d415a9d9b01bc080ef7125df23706de7af02653207ca1d436ede977",
}


@pytest.mark.parametrize("dimension", sorted(PINNED))
def test_the_hashing_embedder_gives_its_pinned_vectors_bit_for_bit(dimension: int) -> None:
    vectors = HashingEmbedder(dimension).embed(TEXTS)
    assert hashlib.sha256(vectors.tobytes()).hexdigest() == PINNED[dimension]


def test_a_text_gets_the_same_vector_alone_or_in_any_batch() -> None:
    embedder = HashingEmbedder(64)
    batch = embedder.embed(TEXTS[::-1])
    alone = np.stack([embedder.embed([t])[0] for t in TEXTS[::-1]])
    assert batch.tobytes() == alone.tobytes()
