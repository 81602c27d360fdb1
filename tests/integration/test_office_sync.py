"""A folder of office documents and books, synced, searched, edited and damaged, end to end."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kbsync import KnowledgeBase
from tests.office_files import FORMATS, docx_bytes

LIBRARIES = ("docx", "pptx", "openpyxl", "ebooklib", "lxml", "striprtf")
WORDS = {"guide.docx": "heron", "talk.pptx": "swallows", "counts.xlsx": "avocet",
         "book.epub": "kestrels", "notes.odt": "puffins", "wrens.rtf": "wrens"}


def _write(path: Path, data: bytes, later: int = 0) -> None:
    path.write_bytes(data)
    if later:  # a new mtime whatever the clock's resolution, so the stat gate sees the edit
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + later * 1_000_000_000))


def test_every_format_syncs_and_an_edit_or_a_damaged_file_touches_only_that_file(
        tmp_path: Path) -> None:
    for module in LIBRARIES:
        pytest.importorskip(module)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, make in FORMATS.items():
        _write(docs / name, make())
    with KnowledgeBase.create(tmp_path, sources=["docs"],
                              embedder={"kind": "hashing", "dimension": 256}) as kb:
        first = kb.sync()
        assert not first.failed, first.sources[0].failures
        assert first.total("new") == len(FORMATS)
        for name, word in WORDS.items():
            hits = kb.search(word, k=1, mode="text")
            assert [h.key for h in hits] == [name], word
        assert kb.search("avocet", k=1, mode="text")[0].heading == "Counts"

        _write(docs / "guide.docx", docx_bytes(words="Egrets are smaller than herons."), later=5)
        edited = kb.sync()
        assert not edited.failed
        assert edited.total("modified") == 1
        assert edited.total("unchanged") == len(FORMATS) - 1
        assert [(c.key, c.action) for c in edited.sources[0].changes] == [
            ("guide.docx", "modified")]
        assert [h.key for h in kb.search("egrets", k=1, mode="text")] == ["guide.docx"]

        damaged = (docs / "talk.pptx").read_bytes()
        _write(docs / "talk.pptx", damaged[: len(damaged) // 3], later=10)
        broken = kb.sync()
        assert broken.failed
        [(key, message)] = broken.sources[0].failures
        assert key == "talk.pptx"
        assert "truncated" in message
        assert broken.total("deleted") == 0
        assert broken.total("unchanged") == len(FORMATS) - 1
        # The indexed version of the damaged file stays searchable; nothing was lost.
        assert len(kb.documents()) == len(FORMATS)
        assert [h.key for h in kb.search("swallows", k=1, mode="text")] == ["talk.pptx"]


def test_without_the_extra_an_office_file_fails_with_the_install_hint_and_the_rest_is_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    # Bytes that need no library to make: the import fails before they are parsed.
    (docs / "guide.docx").write_bytes(b"PK\x03\x04 not really a package")
    (docs / "notes.md").write_text("# Notes\n\nThe bittern booms at dusk.\n")
    for module in LIBRARIES:
        monkeypatch.setitem(sys.modules, module, None)  # importing it now fails
    with KnowledgeBase.create(tmp_path, sources=["docs"],
                              embedder={"kind": "hashing", "dimension": 256}) as kb:
        result = kb.sync()
        [(key, message)] = result.sources[0].failures
        assert key == "guide.docx"
        assert "pip install 'kbsync[office]'" in message
        assert [h.key for h in kb.search("bittern", k=1, mode="text")] == ["notes.md"]
