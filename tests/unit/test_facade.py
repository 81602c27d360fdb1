from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import types
import typing

import kbsync

PUBLIC = [
    "SourceResult",
    "RunSummary",
    "Reconciliation",
    "Rebuilt",
    "EmbeddingCost",
    "FieldChange",
    "SyncTime",
    "DocumentChange",
    "ChangedRegion",
    "BillBound",
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
    "SearchResults",
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


def _kbsync_types(annotation: object) -> set[type]:
    """The classes of kbsync that a type annotation mentions, at any depth."""
    found: set[type] = set()
    for arg in typing.get_args(annotation):
        found |= _kbsync_types(arg)
    if isinstance(annotation, type) and annotation.__module__.startswith("kbsync."):
        found.add(annotation)
    return found


def _reachable(start: set[type]) -> set[type]:
    """``start`` and the kbsync classes their dataclass fields hold, transitively."""
    seen: set[type] = set()
    todo = list(start)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if dataclasses.is_dataclass(cls):
            hints = typing.get_type_hints(cls)
            for field in dataclasses.fields(cls):
                todo.extend(_kbsync_types(hints[field.name]) - seen)
    return seen


def test_the_facade_exports_every_type_the_knowledge_base_returns() -> None:
    """What a method of KnowledgeBase returns, and what those values hold, is importable
    from ``kbsync`` (httpx's exported-members rule: the public face is complete)."""
    returned: set[type] = set()
    for name, method in inspect.getmembers(kbsync.KnowledgeBase, inspect.isfunction):
        if not name.startswith("_"):
            returned |= _kbsync_types(typing.get_type_hints(method).get("return"))
    missing = {cls.__name__ for cls in _reachable(returned)
               if not issubclass(cls, enum_types()) and cls.__name__ not in kbsync.__all__}
    assert not missing, f"returned by KnowledgeBase but not exported: {sorted(missing)}"


def enum_types() -> tuple[type, ...]:
    """Enumerations travel as their values' names: exporting them is not required."""
    import enum

    return (enum.Enum,)


def test_importing_the_sync_or_the_facade_loads_no_extractor_or_http_library() -> None:
    """The facade imports its names when first used, and the sync sees adapters through
    their protocols only: neither pulls in markdown-it, httpx or a concrete store."""
    code = ("import sys, kbsync, kbsync.sync; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('markdown_it', 'httpx', 'charset_normalizer', 'trafilatura', 'psycopg') "
            "or m.startswith(('kbsync.extract.', 'kbsync.store.sqlite', "
            "'kbsync.store.postgres', 'kbsync.sources.')))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == []


def test_a_name_outside_the_facade_is_an_attribute_error() -> None:
    assert isinstance(kbsync, types.ModuleType)
    try:
        kbsync.SqliteStore  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the facade promised a concrete store")
