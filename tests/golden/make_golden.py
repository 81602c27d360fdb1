"""Regenerate tests/golden/identities.json (only when a version number changed on purpose)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbsync import chunk_text
from kbsync.core.identity import (
    canonical_bytes,
    derivation_hash,
    embedder_params_hash,
    embedding_text_key,
    erased_key_hash,
    normalized_text_hash,
    object_signature,
    page_digest,
    payload_signature,
    source_bytes_hash,
    tokenizer_hash,
    vector_id,
    weights_hash,
)

HERE = Path(__file__).resolve().parent
CASES: dict[str, dict[str, Any]] = {
    "tttd-default": {"strategy": "tttd"},
    "tttd-small": {"strategy": "tttd", "min_tokens": 8, "max_tokens": 40, "primary_bits": 4,
                   "backup_bits": 2},
    "tttd-small-snap": {"strategy": "tttd", "min_tokens": 8, "max_tokens": 40,
                        "primary_bits": 4, "backup_bits": 2, "snap": True},
    "local-small": {"strategy": "local", "min_tokens": 8, "max_tokens": 40},
    "sentences-default": {"strategy": "sentences"},
    "sentences-small": {"strategy": "sentences", "min_tokens": 8, "max_tokens": 40},
    "sentences-small-tail": {"strategy": "sentences", "min_tokens": 8, "max_tokens": 40,
                             "tail_above": 16},
    "bytes-small": {"strategy": "bytes", "min_size": 64, "avg_size": 128, "max_size": 512},
}


def golden() -> dict[str, Any]:
    text = (HERE / "sample.txt").read_text(encoding="utf-8")
    cases = {}
    for name, params in CASES.items():
        result = chunk_text(text, **params)
        cases[name] = {
            "params": params,
            "params_hash": result.diagnostics.params_hash,
            "chunks": [c.identity for c in result.chunks],
        }
    return {
        "canonical_bytes": canonical_bytes("ab", "c", 1, True, None, b"\x00").hex(),
        "source_bytes_hash": source_bytes_hash(text.encode("utf-8")),
        "normalized_text_hash": normalized_text_hash(text, 1, "markdown-v1"),
        "embedding_text_key": embedding_text_key("Ünïcode text, with a [/usr/bin] path.").hex(),
        "cases": cases,
        "domains": domains(),
    }


def domains() -> dict[str, Any]:
    """Every other persisted hash, each of fixed inputs: a change to any is a migration."""
    return {
        "derivation": derivation_hash(1, "884ede193ccad7ee633171752ec74b6cb5237fd74e91bcd02c"
                                         "62b9cff6e4e991", "markdown-v1"),
        "erased_key": erased_key_hash("guide/secrets.md"),
        "embedder_params": embedder_params_hash("openai-embeddings", "normalize", True,
                                                "extra_body", "{}"),
        "object_signature": object_signature("etag-1", "v2", "2024"),
        "vector_id": vector_id("docs", "guide/a.md", "ab" * 32, 1),
        "weights": weights_hash([b"weights-block-1", b"weights-block-2"]),
        "tokenizer": tokenizer_hash(b'{"model": 1}'),
        "page": page_digest(b"<p>page</p>"),
        "payload_signature": payload_signature("sha1:XDQ7IHKDAMJFU6WNBH3RNMGFXBMEEUDM"),
    }


if __name__ == "__main__":
    (HERE / "identities.json").write_text(json.dumps(golden(), indent=2) + "\n")
