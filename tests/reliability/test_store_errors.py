"""Driver errors reach the caller as one-line StoreErrors, from every public store method."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbsync.errors import StoreError
from kbsync.store.sqlite import SqliteStore
from kbsync.sync.scratch import Scratch

CALLS: dict[str, Callable[[Any], object]] = {
    "status": lambda s: s.status(),
    "runs": lambda s: s.runs(),
    "source_names": lambda s: s.source_names(),
    "manifest": lambda s: s.manifest("docs"),
    "search_text": lambda s: s.search_text("bell", 3),
    "document": lambda s: s.document("a.txt"),
    "chunk_digests (a generator)": lambda s: list(s.chunk_digests("docs")),
    "indexed_chunks (a generator)": lambda s: list(s.indexed_chunks()),
    "set_meta": lambda s: s.set_meta("x", "1"),
    "gc": lambda s: s.gc(),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_driver_error_in_any_store_method_is_one_line_naming_the_store(
        tmp_path: Path, call: Callable[[Any], object]) -> None:
    store = SqliteStore(tmp_path / "kb.db")
    store._db.close()  # every later use of the connection is a sqlite3 error
    with pytest.raises(StoreError) as caught:
        call(store)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'kb.db'}: ")
    assert isinstance(caught.value.__cause__, Exception)


def test_a_driver_error_in_the_scratch_file_is_one_line_naming_it(tmp_path: Path) -> None:
    scratch = Scratch(tmp_path)
    scratch._db.close()
    with pytest.raises(StoreError, match=r"kbsync-scratch-….db \(the sync's scratch file\)"):
        list(scratch.listing())
    with pytest.raises(StoreError, match="scratch file"):
        scratch.listed_count()
