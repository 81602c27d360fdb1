from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbsync.core.identity import canonical_bytes, digest
from tests.golden.make_golden import CASES, golden

PINNED = json.loads((Path(__file__).parent / "identities.json").read_text())


@pytest.fixture(scope="module")
def fresh() -> dict[str, object]:
    return golden()


@pytest.mark.parametrize("case", sorted(CASES))
def test_chunk_identities_and_parameter_hashes_match_the_golden_vectors(
    fresh: dict[str, dict[str, object]], case: str
) -> None:
    assert fresh["cases"][case] == PINNED["cases"][case]  # type: ignore[index]


def test_document_hashes_and_the_canonical_encoding_match_the_golden_vectors(
    fresh: dict[str, object],
) -> None:
    for key in ("canonical_bytes", "source_bytes_hash", "normalized_text_hash",
                "embedding_text_key"):
        assert fresh[key] == PINNED[key]


@pytest.mark.parametrize("domain", sorted(PINNED["domains"]))
def test_every_other_persisted_hash_matches_its_golden_vector(
    fresh: dict[str, dict[str, object]], domain: str,
) -> None:
    assert fresh["domains"][domain] == PINNED["domains"][domain]


def test_the_persisted_hashes_of_the_sync_and_the_providers_are_the_pinned_ones() -> None:
    """The modules that persist a hash compute it with identity.py's function."""
    from kbsync.sync import Chunker
    from kbsync.sync.erasures import tombstone
    from kbsync.sync.observe import derivation

    chunker = Chunker("sentences", {"min_tokens": 48, "max_tokens": 192})
    assert derivation(chunker, "markdown-v1") == PINNED["domains"]["derivation"]
    assert tombstone("guide/secrets.md") == "blake2b:" + PINNED["domains"]["erased_key"]


def test_length_delimiting_keeps_different_field_sequences_apart() -> None:
    assert canonical_bytes("ab", "c") != canonical_bytes("a", "bc")
    assert canonical_bytes(1) != canonical_bytes("1") != canonical_bytes(b"1")
    assert digest("kbsync:a", "x") != digest("kbsync:b", "x")


def test_every_strategy_has_its_own_identities() -> None:
    seen: set[str] = set()
    for case in PINNED["cases"].values():
        assert seen.isdisjoint(case["chunks"])
        seen |= set(case["chunks"])
