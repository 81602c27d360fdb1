"""DOCX, PPTX, XLSX, EPUB, ODT and RTF: sections, titles, metadata, and bad input.

Every document is made here (tests/office_files.py); nothing binary is committed.
"""

from __future__ import annotations

import io
import random
import re
import sys
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract import office as office_module
from kbsync.extract.epub import EpubExtractor
from kbsync.extract.odt import OdtExtractor
from kbsync.extract.office import DocxExtractor, PptxExtractor, XlsxExtractor
from kbsync.extract.office_zip import UNCOMPRESSED_MAX_BYTES
from kbsync.extract.registry import extractor_for, media_type_for
from kbsync.extract.rtf import RtfExtractor
from kbsync.model import Record, Section
from tests.office_files import (
    FORMATS,
    docx_bytes,
    epub_bytes,
    odt_bytes,
    pptx_bytes,
    rtf_bytes,
    xlsx_bytes,
)

pytest.importorskip("docx")
pytest.importorskip("pptx")
pytest.importorskip("openpyxl")
pytest.importorskip("ebooklib")
pytest.importorskip("striprtf")

ZIPPED = ["guide.docx", "talk.pptx", "counts.xlsx", "book.epub", "notes.odt"]


@cache
def made(name: str) -> bytes:
    return FORMATS[name]()


def extract(name: str, data: bytes | None = None) -> Record:
    extractor = extractor_for(media_type_for(name))
    assert extractor is not None
    return extractor.extract(made(name) if data is None else data, locator=f"docs/{name}")


# --- what each format becomes ------------------------------------------------------------------


def test_each_extension_has_its_media_type_and_extractor() -> None:
    expected = {"guide.docx": DocxExtractor, "talk.pptx": PptxExtractor,
                "counts.xlsx": XlsxExtractor, "book.epub": EpubExtractor,
                "notes.odt": OdtExtractor, "wrens.rtf": RtfExtractor}
    for name, kind in expected.items():
        assert isinstance(extractor_for(media_type_for(name.upper())), kind)
    assert isinstance(extractor_for("text/rtf"), RtfExtractor)


def test_word_heading_styles_become_sections_and_core_properties_the_metadata() -> None:
    record = extract("guide.docx")
    assert record.title == "Field guide"
    assert record.sections == (
        Section(heading="Birds of the marsh", text="An introduction before any heading.",
                level=1),
        Section(heading="Herons", text="Herons wade in shallow water.", level=1),
        Section(heading="Feeding", level=2,
                text="They stand still and strike fast.\n\nBird | Length\n\nGrey heron | 95 cm"),
    )
    assert dict(record.metadata) == {"author": "Ada Lovelace",
                                     "created": "2024-03-01T09:30:00+00:00",
                                     "modified": "2024-03-02T10:00:00+00:00"}


def test_a_paragraph_style_based_on_a_heading_style_is_a_heading_of_its_level() -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    chapter = document.styles.add_style("Chapter", WD_STYLE_TYPE.PARAGRAPH)
    chapter.base_style = document.styles["Heading 2"]
    document.add_paragraph("Waders", style="Chapter")
    document.add_paragraph("Long legs.")
    out = io.BytesIO()
    document.save(out)
    record = extract("guide.docx", out.getvalue())
    assert record.sections == (Section(heading="Waders", text="Long legs.", level=2),)


def test_paragraphs_inside_a_content_control_are_kept_in_order() -> None:
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    document.add_paragraph("Before.")
    cover = document.add_paragraph("Inside the control.")
    document.add_paragraph("After.")
    control = parse_xml(f"<w:sdt {nsdecls('w')}><w:sdtPr/><w:sdtContent/></w:sdt>")
    cover._p.addprevious(control)
    control[1].append(cover._p)  # the paragraph moves into the content control
    out = io.BytesIO()
    document.save(out)
    record = extract("guide.docx", out.getvalue())
    assert record.sections == (
        Section(heading=None, text="Before.\n\nInside the control.\n\nAfter."),)


def test_tracked_insertions_are_read_and_tracked_deletions_are_not() -> None:
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    paragraph = document.add_paragraph("Kept ")
    for change in (
            f'<w:ins {nsdecls("w")} w:id="1" w:author="a"><w:r><w:t>inserted</w:t></w:r></w:ins>',
            f'<w:del {nsdecls("w")} w:id="2" w:author="a"><w:r><w:delText>removed</w:delText>'
            "</w:r></w:del>"):
        paragraph._p.append(parse_xml(change))
    out = io.BytesIO()
    document.save(out)
    record = extract("guide.docx", out.getvalue())
    assert record.sections == (Section(heading=None, text="Kept inserted"),)


def test_a_docx_without_core_properties_has_no_invented_author_or_dates() -> None:
    source = zipfile.ZipFile(io.BytesIO(made("guide.docx")))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in source.infolist():
            if member.filename == "docProps/core.xml":
                continue
            content = source.read(member)
            if member.filename == "_rels/.rels":
                content = re.sub(rb"<Relationship [^>]*core-properties[^>]*/>", b"", content)
            if member.filename == "[Content_Types].xml":
                content = re.sub(rb'<Override PartName="/docProps/core.xml"[^>]*/>', b"",
                                 content)
            archive.writestr(member, content)
    record = extract("guide.docx", out.getvalue())
    assert record.title == "Birds of the marsh"  # the first heading
    assert dict(record.metadata) == {}


def test_each_slide_is_a_section_headed_by_its_title_with_its_notes() -> None:
    record = extract("talk.pptx")
    assert record.title == "Migration talk"
    assert record.sections == (
        Section(heading="Bird migration", text="Spring 2024", level=1),
        Section(heading="Routes", level=1, text="Swallows fly to Africa.\n"
                "Geese follow the coast.\n\nMention the ringing scheme."),
        Section(heading=None, text="Species | Distance\n\nArctic tern | 70000 km"),
    )
    assert dict(record.metadata)["author"] == "Grace Hopper"
    assert dict(record.metadata)["slides"] == "3"


def test_each_sheet_is_a_section_of_text_table_rows() -> None:
    record = extract("counts.xlsx")
    assert record.title == "Bird counts"
    assert record.sections == (
        Section(heading="Counts", level=1, text="Species | Count | Seen on\n\n"
                "Avocet | 12 | 2024-05-04\n\nBittern | 2\n\nCurlew | 3 | 2024-05-05T06:30:00"),
        Section(heading="Notes", text="Counted at dawn", level=1),
    )
    assert dict(record.metadata)["author"] == "Rosalind Franklin"
    assert dict(record.metadata)["created"] == "2024-05-01T12:00:00"


def test_formulas_saved_without_their_values_are_counted_in_a_warning() -> None:
    import openpyxl

    assert extract("counts.xlsx").warnings == (
        "formula cells without a saved value, left empty: 1 (the workbook was written without "
        "computing them; saving it from a spreadsheet application stores the values)",)
    workbook = openpyxl.Workbook()
    workbook.active["A1"] = 2
    workbook.active["B1"] = "a formula-looking <f> string, but text"
    out = io.BytesIO()
    workbook.save(out)
    assert XlsxExtractor().extract(out.getvalue(), locator="plain.xlsx").warnings == ()


def test_a_sparse_sheet_that_would_expand_past_the_cell_budget_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    for row in range(1, 40):
        workbook.active.cell(row=row, column=16_000, value="far")  # pads 16,000 cells a row
    out = io.BytesIO()
    workbook.save(out)
    monkeypatch.setattr(office_module, "XLSX_CELLS_MAX", 500_000)
    with pytest.raises(ExtractionError, match=r"docs/far\.xlsx: .*past 500,000 cells"):
        XlsxExtractor().extract(out.getvalue(), locator="docs/far.xlsx")


def test_an_epub_is_read_in_spine_order_without_its_navigation_or_styles() -> None:
    record = extract("book.epub")
    assert record.title == "Raptors"
    assert record.sections == (
        Section(heading="Owls", text="Owls hunt at night. Really.", level=1),
        Section(heading="Kestrels", text="Kestrels hover over fields. Really.", level=1),
    )
    assert dict(record.metadata) == {"author": "Jane Goodall", "language": "en",
                                     "modified": "2024-02-03T04:05:06Z"}


def test_odt_headings_lists_and_tables_and_its_own_metadata() -> None:
    record = extract("notes.odt")
    assert record.title == "Seabird notes"
    assert record.sections == (
        Section(heading=None, text="Before the first heading."),
        # text:s is a space, text:tab a tab, text:line-break a line break, spans their text.
        Section(heading="Seabirds", level=1, text="Puffins nest in burrows.\n\n"
                "Sea birds fly far away home.\n\nGannets dive."),
        Section(heading="Colonies", text="Isle | Pairs\n\nSkomer | 25000", level=2),
    )
    assert dict(record.metadata) == {"author": "Rachel Carson",
                                     "created": "2023-06-01T08:00:00",
                                     "modified": "2023-06-02T09:00:00"}


def test_rtf_text_with_its_escapes_and_the_info_group() -> None:
    record = extract("wrens.rtf")
    assert record.title == "Small birds"
    assert record.sections == (
        Section(heading=None, text="Songbirds\nWrens sing loudly for their size. Café naïve."),)
    assert dict(record.metadata) == {"author": "Gilbert White", "created": "2022-07-09T14:05:00"}


# --- bad input: a per-document error naming the file -------------------------------------------


@cache
def zip_bomb() -> bytes:
    """A valid ZIP of a few hundred kilobytes declaring more than the uncompressed limit."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"\0" * (1 << 20)
            for _ in range(UNCOMPRESSED_MAX_BYTES // len(block) + 1):
                member.write(block)
    return out.getvalue()


@pytest.mark.parametrize("name", ZIPPED)
def test_a_zip_bomb_fails_from_its_directory_without_inflating(name: str) -> None:
    data = zip_bomb()
    assert len(data) < UNCOMPRESSED_MAX_BYTES // 100
    with pytest.raises(ExtractionError, match=rf"docs/{name}: declares [\d,]+ bytes "
                       r"uncompressed .*decompression bomb"):
        extract(name, data)


@pytest.mark.parametrize("name", ["guide.docx", "talk.pptx", "counts.xlsx"])
def test_a_password_protected_office_file_fails_as_encrypted(name: str) -> None:
    # Office encrypts a package into an OLE compound file: this header, then sectors.
    data = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 4096
    with pytest.raises(ExtractionError, match=rf"docs/{name}: .*password-protected"):
        extract(name, data)


@pytest.mark.parametrize("name", ZIPPED)
def test_a_zip_with_an_encrypted_member_fails_as_encrypted(name: str) -> None:
    source = zipfile.ZipFile(io.BytesIO(made(name)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in source.infolist():
            archive.writestr(member, source.read(member))
    data = bytearray(out.getvalue())
    # Set the "encrypted" flag of every entry in the central directory.
    at = data.find(b"PK\x01\x02")
    while at != -1:
        data[at + 8] |= 0x1
        at = data.find(b"PK\x01\x02", at + 4)
    with pytest.raises(ExtractionError, match=rf"docs/{name}: is an encrypted"):
        extract(name, bytes(data))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_truncated_file_fails_naming_it(name: str) -> None:
    data = made(name)
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: .*truncated"):
        extract(name, data[: len(data) // 2])


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_text_named_as_a_document_fails_naming_it(name: str) -> None:
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: is not an? "):
        extract(name, b"just some words, not a document\n")


@pytest.mark.parametrize(("name", "other"), [
    ("guide.docx", "counts.xlsx"), ("talk.pptx", "guide.docx"), ("counts.xlsx", "talk.pptx"),
    ("book.epub", "guide.docx"), ("notes.odt", "book.epub"),
])
def test_one_zip_format_named_as_another_fails_naming_it(name: str, other: str) -> None:
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: "):
        extract(name, made(other))


@pytest.mark.parametrize("name", ZIPPED)
def test_a_damaged_member_fails_naming_the_file(name: str) -> None:
    source = zipfile.ZipFile(io.BytesIO(made(name)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in source.infolist():
            archive.writestr(member, source.read(member), compress_type=zipfile.ZIP_STORED)
    data = out.getvalue()
    # Every member's bytes are stored as they are: garble the main part's XML in place.
    main = {"guide.docx": b"<w:body>", "talk.pptx": b"<p:sldIdLst>",
            "counts.xlsx": b"<sheets>", "book.epub": b"<spine>",
            "notes.odt": b"<office:body>"}[name]
    at = data.index(main)
    damaged = data[:at] + b"<<<" + data[at + 3:]
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: "):
        extract(name, damaged)


XML_MEMBERS = {  # a member holding a known text, for each zipped format
    "guide.docx": ("word/document.xml", b"Herons wade"),
    "talk.pptx": ("ppt/slides/slide2.xml", b"Swallows fly"),
    "counts.xlsx": ("xl/worksheets/sheet1.xml", b"Avocet"),  # inline strings, no shared ones
    "book.epub": ("OEBPS/c0.xhtml", b"Owls hunt"),
    "notes.odt": ("content.xml", b"Puffins nest"),
}


@pytest.mark.parametrize("name", ZIPPED)
def test_an_external_xml_entity_never_brings_a_local_file_into_the_text(
        name: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-password")
    member, text = XML_MEMBERS[name]
    source = zipfile.ZipFile(io.BytesIO(made(name)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == member:
                assert text in content
                declaration = f'<!DOCTYPE x [<!ENTITY e SYSTEM "{secret.as_uri()}">]>'.encode()
                content = re.sub(rb"<!DOCTYPE[^>]*>", b"", content)
                end = content.index(b"?>") + 2 if content.startswith(b"<?xml") else 0
                content = (content[:end] + declaration + content[end:]).replace(text,
                                                                               b"&e; " + text)
            archive.writestr(info, content)
    try:
        record = extract(name, out.getvalue())
    except ExtractionError:
        return  # refusing the document is as good
    assert "hunter2" not in record.text


LAUGHS = '<!ENTITY lol0 "lol">' + "".join(
    f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10))
PACKAGE_MEMBERS = {  # a member each format's own parser reads as XML
    **XML_MEMBERS,
    "book.epub": ("OEBPS/content.opf", b"<manifest>"),  # read by ebooklib, recovering
}


@pytest.mark.parametrize("name", ZIPPED)
def test_an_entity_bomb_fails_in_one_line_naming_the_file_its_member_and_the_entities(
        name: str) -> None:
    member, text = PACKAGE_MEMBERS[name]
    source = zipfile.ZipFile(io.BytesIO(made(name)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == member:
                end = content.index(b"?>") + 2 if content.startswith(b"<?xml") else 0
                content = (content[:end] + f"<!DOCTYPE x [{LAUGHS}]>".encode()
                           + content[end:]).replace(text, b"&lol9;" + text, 1)
            archive.writestr(info, content)
    with pytest.raises(ExtractionError) as caught:
        extract(name, out.getvalue())
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"docs/{name}: its member {member!r} declares the XML entity ")
    assert "entities are refused" in message
    assert "TypeError" not in message


def _rezipped(data: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for member in source.infolist():
            z.writestr(member.filename, source.read(member))
    return out.getvalue()


@pytest.mark.parametrize("name", ZIPPED)
def test_a_zip_directory_of_an_unknown_version_fails_naming_the_file(name: str) -> None:
    data = bytearray(made(name))
    at = data.find(b"PK\x01\x02")  # the first central directory entry
    data[at + 6:at + 8] = (99).to_bytes(2, "little")  # "version needed to extract": 9.9
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: is a truncated or damaged"):
        extract(name, bytes(data))


@pytest.mark.parametrize("name", ["guide.docx", "talk.pptx", "counts.xlsx"])
def test_a_relationships_part_that_does_not_inflate_fails_naming_the_file_or_is_left_out(
        name: str) -> None:
    data = bytearray(_rezipped(made(name)))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("_rels/.rels")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start:start + info.compress_size] = b"\xff" * info.compress_size  # not deflate data
    if name == "counts.xlsx":  # openpyxl finds the workbook without the package's relationships
        record = extract(name, bytes(data))
        assert record.sections[0].heading == "Counts"
        assert "author" not in dict(record.metadata)  # the core properties are not reachable
        return
    with pytest.raises(ExtractionError, match=rf"^docs/{name}: "):
        extract(name, bytes(data))


def test_a_damaged_odt_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    # odfpy prints a part that fails to parse, whole, to standard output.
    source = zipfile.ZipFile(io.BytesIO(odt_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in source.infolist():
            content = source.read(member)
            archive.writestr(member, content.replace(b"<dc:title>", b"<dc:tit<e>"))
    data = out.getvalue()
    with pytest.raises(ExtractionError, match=r"^docs/notes\.odt: is a damaged"):
        extract("notes.odt", data)
    assert capfd.readouterr() == ("", "")


def test_a_drm_encrypted_epub_fails_but_obfuscated_fonts_do_not() -> None:
    def encryption(algorithm: str) -> list[tuple[str, str | bytes]]:
        return [("META-INF/encryption.xml",
                 '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                 'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
                 f'<enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData>'
                 '<enc:CipherReference URI="OEBPS/c0.xhtml"/></enc:CipherData>'
                 '</enc:EncryptedData></encryption>')]

    drm = epub_bytes(extra=encryption("http://www.w3.org/2001/04/xmlenc#aes128-cbc"))
    with pytest.raises(ExtractionError, match=r"docs/book\.epub: is an encrypted .*aes128"):
        extract("book.epub", drm)
    fonts = epub_bytes(extra=encryption("http://www.idpf.org/2008/embedding"))
    assert extract("book.epub", fonts).title == "Raptors"


def test_a_password_protected_odt_and_an_ods_fail_naming_them() -> None:
    encrypted = odt_bytes(manifest_extra='<manifest:encryption-data manifest:checksum="x"/>')
    with pytest.raises(ExtractionError, match=r"docs/notes\.odt: .*encrypted"):
        extract("notes.odt", encrypted)
    sheet = odt_bytes(mimetype="application/vnd.oasis.opendocument.spreadsheet")
    with pytest.raises(ExtractionError, match=r"docs/notes\.odt: is not an OpenDocument text"):
        extract("notes.odt", sheet)


def test_rtf_without_its_closing_braces_is_truncated_but_escaped_braces_are_text() -> None:
    with pytest.raises(ExtractionError, match=r"docs/wrens\.rtf: is a truncated RTF"):
        extract("wrens.rtf", rtf_bytes()[:-1])
    record = extract("wrens.rtf", rtf_bytes("Braces \\{ and \\} stay."))
    assert "Braces { and } stay." in record.text


# --- the extra ---------------------------------------------------------------------------------

MODULES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "guide.docx": ("docx", docx_bytes), "talk.pptx": ("pptx", pptx_bytes),
    "counts.xlsx": ("openpyxl", xlsx_bytes), "book.epub": ("ebooklib", epub_bytes),
    "notes.odt": ("lxml", odt_bytes), "wrens.rtf": ("striprtf", rtf_bytes),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_missing_library_names_the_office_extra_and_the_import_error(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, make = MODULES[name]
    data = make()
    for loaded in [n for n in sys.modules if n == module or n.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, loaded, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(DependencyMissingError) as caught:
        extract(name, data)
    assert "kbsync[office]" in str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)
    assert module in str(caught.value)


# --- mutated documents -------------------------------------------------------------------------


def _mutated(data: bytes, rng: random.Random) -> bytes:
    """``data`` with bytes overwritten, cut short, or with XML characters planted in members."""
    kind = rng.choice(["bytes", "cut", "members"])
    if kind == "cut":
        return data[: rng.randrange(len(data))]
    if kind == "bytes" or not data.startswith(b"PK"):
        changed = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        return bytes(changed)
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in source.infolist():
            content = bytearray(source.read(member))
            if content and rng.random() < 0.5:
                for _ in range(rng.randint(1, 5)):
                    content[rng.randrange(len(content))] = rng.choice(b"<>&\"'/ \x00\xff")
            archive.writestr(member.filename, bytes(content))
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_mutated_document_is_extracted_or_fails_as_an_extraction_error(name: str) -> None:
    rng = random.Random(f"office:{name}")  # the same mutations on every run
    for _ in range(25):
        data = _mutated(made(name), rng)
        try:
            record = extract(name, data)
        except ExtractionError:
            continue
        assert all(isinstance(s.text, str) for s in record.sections)
