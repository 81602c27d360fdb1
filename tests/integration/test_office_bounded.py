"""Hostile office files and books, synced in a measured child process: each fails alone (or
is indexed without expanding anything), in bounded memory, beside two good documents.

The same harness and rules as ``test_hostile_inputs_bounded`` (``measured_sync``): the
extra resident memory of a case's sync stays under ``EXTRA_MEMORY_MAX``; wall time is
recorded by the harness, never asserted.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbsync.engine import init_config
from kbsync.extract.office_zip import UNCOMPRESSED_MAX_BYTES
from tests.integration.measured_sync import measure_in_child
from tests.integration.test_bad_inputs import GOOD, _assert_readable
from tests.office_files import docx_bytes, epub_bytes, odt_bytes, pptx_bytes, xlsx_bytes

for _module in ("docx", "pptx", "openpyxl", "ebooklib", "lxml", "striprtf"):
    pytest.importorskip(_module)

EXTRA_MEMORY_MAX = 256 * 1024 * 1024
LAUGHS = '<!ENTITY lol0 "lol">' + "".join(
    f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10))
"""An internal DTD subset whose last entity, ``&lol9;``, expands to 10**9 copies of "lol"."""


def _replace_member(data: bytes, name: str, change: Callable[[bytes], bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in source.infolist():
            content = source.read(member)
            archive.writestr(member.filename, change(content) if member.filename == name
                             else content)
    return out.getvalue()


def _laughs(text: bytes, root: bytes) -> Callable[[bytes], bytes]:
    """Declare the entity bomb before ``root`` and use it just before ``text``."""
    def change(content: bytes) -> bytes:
        at = content.index(b"?>") + 2 if content.startswith(b"<?xml") else 0
        declared = content[:at] + f"<!DOCTYPE {root.decode()} [{LAUGHS}]>".encode() + content[at:]
        return declared.replace(text, b"&lol9; " + text, 1)
    return change


def _zip_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = bytes(1 << 20)
            for _ in range(UNCOMPRESSED_MAX_BYTES // len(block) + 1):
                member.write(block)
    return out.getvalue()


def _sparse_sheet() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    for row in range(1, 700):  # 699 rows padded to column XFD: 11 million cells
        workbook.active.cell(row=row, column=16_384, value="far")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


# name -> (file name, how to make its bytes, expectation, words): as in test_hostile_inputs_bounded
CASES: dict[str, tuple[str, Callable[[], bytes], str, tuple[str, ...]]] = {
    "docx-zip-bomb": ("bomb.docx", _zip_bomb, "failed", ("decompression bomb",)),
    "xlsx-sparse-sheet": ("far.xlsx", _sparse_sheet, "failed", ("sparse-sheet bomb",)),
    "docx-encrypted": ("locked.docx", lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4096),
                       "failed", ("password-protected",)),
    "epub-truncated": ("cut.epub", lambda: epub_bytes()[:700], "failed", ("truncated",)),
    # Refused from the member's prolog, before a parser expands (or, as ebooklib does,
    # silently recovers from libxml2's own refusal and fails later naming nothing).
    "docx-billion-laughs": ("laughs.docx", lambda: _replace_member(
        docx_bytes(), "word/document.xml", _laughs(b"They stand still", b"w:document")),
        "failed", ("entities are refused",)),
    "odt-billion-laughs": ("laughs.odt", lambda: _replace_member(
        odt_bytes(), "content.xml", _laughs(b"Puffins nest", b"office:document-content")),
        "failed", ("entities are refused",)),
    "epub-billion-laughs": ("laughs.epub", lambda: _replace_member(
        epub_bytes(), "OEBPS/content.opf", _laughs(b"Raptors", b"package")),
        "failed", ("OEBPS/content.opf' declares the XML entity",)),
    "odt-laughs-in-meta": ("meta.odt", lambda: _replace_member(
        odt_bytes(), "meta.xml", _laughs(b"Seabird notes", b"office:document-meta")),
        "failed", ("entities are refused",)),
    "xlsx-billion-laughs": ("laughs.xlsx", lambda: _replace_member(
        xlsx_bytes(), "xl/worksheets/sheet1.xml", _laughs(b"<sheetData>", b"worksheet")),
        "failed", ("entities are refused",)),
    "pptx-billion-laughs": ("laughs.pptx", lambda: _replace_member(
        pptx_bytes(), "ppt/slides/slide2.xml", _laughs(b"Swallows fly", b"p:sld")),
        "failed", ("entities are refused",)),
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Build every case's knowledge base, sync them all in one measured child process."""
    base = tmp_path_factory.mktemp("office-bounded")
    kbs: list[Path] = []
    warmup = ("warm.docx", docx_bytes, "indexed", ())
    for name, (file_name, make, _, _) in {"warmup": warmup, **CASES}.items():
        kb = base / name
        docs = kb / "docs"
        docs.mkdir(parents=True)
        for good, text in GOOD.items():
            (docs / good).write_text(text, encoding="utf-8")
        (docs / file_name).write_bytes(make())
        init_config(kb, ["docs"])
        kbs.append(kb)
    return dict(zip(CASES, measure_in_child(kbs[0], kbs[1:]), strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_office_file_fails_alone_or_is_indexed_within_bounded_memory(
        measured: dict[str, dict[str, Any]], case: str) -> None:
    file_name, _, expected, words = CASES[case]
    result = measured[case]
    assert not result["hung"], f"{case}: the sync hung"
    assert result["verify"] == []
    assert result["extra_rss_bytes"] < EXTRA_MEMORY_MAX, result["extra_rss_bytes"]
    for good in GOOD:
        assert good in result["keys"]
    if expected == "failed":
        assert set(result["failures"]) == {file_name}, result["failures"]
        message = result["failures"][file_name]
        _assert_readable(message)
        assert any(w.lower() in message.lower() for w in words), message
        assert file_name not in result["keys"]
    else:
        assert result["failures"] == {}, result["failures"]
        text = result["texts"][file_name]
        for word in words:
            assert word in text, text[:300]
        assert "lollollol" not in text  # no entity was expanded
