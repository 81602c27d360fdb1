"""Regenerate tests/golden/identities.json (only when a version number changed on purpose)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbsync import chunk_text
from kbsync.identity import (
    canonical_bytes,
    embedding_text_key,
    normalized_text_hash,
    source_bytes_hash,
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
    }


if __name__ == "__main__":
    (HERE / "identities.json").write_text(json.dumps(golden(), indent=2) + "\n")
