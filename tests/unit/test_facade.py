from __future__ import annotations

import kbsync

PUBLIC = [
    "Boundary",
    "ByteChunk",
    "ByteParams",
    "ChangeKind",
    "ChangeReport",
    "Chunk",
    "ChunkingDiagnostics",
    "ChunkingResult",
    "Collected",
    "DocumentDiff",
    "DocumentRef",
    "DocumentText",
    "Erased",
    "Erasure",
    "HistoryEntry",
    "Hit",
    "IDENTITY_SCHEMA_VERSION",
    "KbsyncError",
    "KnowledgeBase",
    "LocalParams",
    "NORMALIZER_VERSION",
    "NormalizedText",
    "ParameterError",
    "Region",
    "RunRecord",
    "SearchMode",
    "Status",
    "SyncResult",
    "TTTDParams",
    "Verdict",
    "Verification",
    "__version__",
    "byte_chunks",
    "chunk_stream",
    "chunk_text",
    "compare",
    "normalize",
]


def test_the_facade_exports_exactly_the_promised_names() -> None:
    assert sorted(kbsync.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(kbsync, name) is not None


def test_results_are_frozen_values() -> None:
    chunk = kbsync.chunk_text("a few words").chunks[0]
    try:
        chunk.text = "changed"  # type: ignore[misc]
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a chunk could be modified")


def test_every_error_derives_from_the_one_root() -> None:
    assert issubclass(kbsync.ParameterError, kbsync.KbsyncError)
