from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from kbsync.errors import DependencyMissingError, DocumentError, ExtractionError
from kbsync.extract import Extractor
from kbsync.extract.html import HtmlExtractor
from kbsync.extract.markdown import MarkdownExtractor
from kbsync.extract.pdf import PdfExtractor
from kbsync.extract.registry import SUPPORTED_MEDIA_TYPES, extractor_for, media_type_for
from kbsync.extract.text import TextExtractor, decode_text
from kbsync.model import Record, Section

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "extract"


def text_of(data: bytes, locator: str = "notes/a.txt") -> Record:
    return TextExtractor().extract(data, locator=locator)


# --- plain text and decoding -------------------------------------------------------------------


def test_utf8_text_is_one_section_titled_by_its_first_line() -> None:
    record = text_of("\n  Grüße aus Köln  \nZweite Zeile.\n".encode())
    assert record.title == "Grüße aus Köln"
    assert record.description is None
    assert record.sections == (Section(heading=None, text="\n  Grüße aus Köln  \nZweite Zeile.\n"),)


def test_utf16_with_a_byte_order_mark_is_decoded() -> None:
    data = "Title ✓\nbody 日本語".encode("utf-16")  # writes a BOM
    assert data[:2] in (b"\xff\xfe", b"\xfe\xff")
    assert text_of(data).text == "Title ✓\nbody 日本語"


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16-be", "utf-32"])
def test_other_byte_order_marks_are_honoured_and_dropped(encoding: str) -> None:
    data = "Héllo".encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    assert decode_text(data, "x.txt") == "Héllo"


def test_utf16_without_a_byte_order_mark_is_text_not_binary() -> None:
    assert text_of("Plain words\n".encode("utf-16-le")).title == "Plain words"


def test_latin1_text_is_detected() -> None:
    original = "Café crème, naïve façade, déjà vu. Voilà: Größe und Maße der Straße!\n"
    assert text_of(original.encode("latin-1")).text == original


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Le café est très bon, où nous buvons du thé et mangeons des crêpes à Noël.", "cp1252"),
        ("El niño comió piña el año pasado; ¿qué más? ¡Olé!", "latin-1"),
        ("He said “hello” — and then… left. It’s 5 €.", "cp1252"),
        ("Привет мир, как дела? Сегодня хорошая погода, и мы идём гулять в парк.", "cp1251"),
        ("你好世界，今天天气很好，我们去公园散步吧。", "gbk"),
    ],
)
def test_legacy_encodings_are_detected(text: str, encoding: str) -> None:
    assert decode_text(text.encode(encoding), "legacy.txt") == text


def test_declared_encoding_is_used_when_the_bytes_are_not_utf8() -> None:
    data = "Привет, мир! Как дела?".encode("koi8-r")
    assert decode_text(data, "x.html", declared_encoding="KOI8-R") == "Привет, мир! Как дела?"


def test_valid_utf8_wins_over_a_wrong_declared_encoding() -> None:
    assert decode_text("déjà".encode(), "x.html", declared_encoding="iso-8859-1") == "déjà"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(bytes(range(256)) * 8, id="nul-bytes"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", id="png-magic"),
        pytest.param(b"ab\x01\x02\x03\x04\x05\x06cd" * 20, id="control-characters"),
    ],
)
def test_a_binary_file_posing_as_text_is_rejected(data: bytes) -> None:
    with pytest.raises(ExtractionError, match="looks binary") as caught:
        text_of(data, locator="photos/holiday.txt")
    assert caught.value.locator == "photos/holiday.txt"
    assert isinstance(caught.value, DocumentError)  # per document: the run goes on


def test_undecodable_bytes_are_rejected_naming_the_locator() -> None:
    data = b"Report: " + bytes(range(0x80, 0x100)) + b" end\n"
    with pytest.raises(ExtractionError) as caught:
        text_of(data, locator="reports/q3.txt")
    message = str(caught.value)
    assert message.startswith("reports/q3.txt: ")
    assert "cannot be decoded" in message
    assert "offset 8" in message


def test_utf8_mixed_with_other_bytes_is_rejected_with_the_offset_when_strict() -> None:
    data = "Größe café naïve ".encode() + b"\xe9t\xe9"
    with pytest.raises(ExtractionError, match=r"mixes UTF-8 .* at offset 21"):
        TextExtractor(strict_decoding=True).extract(data, locator="notes/a.txt")
    with pytest.raises(ExtractionError, match=r"mixes UTF-8 .* at offset 21"):
        decode_text(data, "notes/a.txt")  # the strict form


@pytest.mark.parametrize("extractor", [TextExtractor(), MarkdownExtractor(), HtmlExtractor()],
                         ids=lambda e: e.identity)
def test_a_few_invalid_utf8_bytes_become_replacement_characters_with_a_warning(
        extractor: Extractor) -> None:
    data = ("# Größe\n\nThe café on the quay opens early. ".encode() + b"\x80\x81\x82"
            + b" The rest is plain ASCII about harbours and lights.\n")
    record = extractor.extract(data, locator="notes/a.txt")
    assert "The café on the quay opens early. \ufffd\ufffd\ufffd The rest" in record.text
    assert record.warnings == (
        "3 bytes that are not UTF-8 replaced by U+FFFD (strict_decoding = true refuses "
        "such files)",)
    assert text_of(b"plain ascii").warnings == ()
    one = text_of("Straße, café and the quay. ".encode() * 8 + b"\x80 and the rest.")
    assert one.warnings[0].startswith("1 byte that is not UTF-8 replaced by U+FFFD")


def test_an_invalid_document_after_a_utf16_byte_order_mark_is_rejected() -> None:
    with pytest.raises(ExtractionError, match="UTF-16-LE byte order mark but is not valid"):
        text_of(b"\xff\xfeA\x00B")


def test_a_long_first_line_is_cut_to_200_characters_for_the_title() -> None:
    title = text_of(("word " * 100).encode()).title
    assert title is not None
    assert len(title) <= 200
    assert title.startswith("word word")


def test_an_empty_or_blank_text_has_no_title_and_no_sections() -> None:
    assert text_of(b"") == Record(title=None, description=None, sections=())
    assert text_of(b" \n\t\n") == Record(title=None, description=None, sections=())


# --- Markdown ----------------------------------------------------------------------------------

MARKDOWN = b"""\
Some words before any heading.

# Sourdough *starters*

A living culture with a [recipe](https://bakery.example/recipe).

```sh
# feeding log, not a heading
echo fed
```

Feeding
-------

Twice a day.

> # A heading in a quote does not split

### Ratios
#### Empty section
"""


def test_markdown_headings_become_sections() -> None:
    record = MarkdownExtractor().extract(MARKDOWN, locator="guide.md")
    assert [(s.heading, s.level) for s in record.sections] == [
        (None, 0),
        ("Sourdough starters", 1),
        ("Feeding", 2),
        ("Ratios", 3),
        ("Empty section", 4),
    ]
    assert record.sections[0].text == "Some words before any heading."
    assert record.sections[1].text == (
        "A living culture with a [recipe](https://bakery.example/recipe).\n\n"
        "```sh\n# feeding log, not a heading\necho fed\n```"
    )
    assert record.sections[2].text == "Twice a day.\n\n> # A heading in a quote does not split"
    assert record.sections[3].text == record.sections[4].text == ""
    assert record.title == "Sourdough starters"  # the first level-1 heading


def test_markdown_heading_attribute_lists_are_markup_not_heading_text() -> None:
    data = (b"# Tutorial { #tutorial }\n\nIntro.\n\n## CORS { #cors }\n\nBody.\n\n"
            b"## Setup {#setup .wide}\n\n### Paths {: #paths }\n\n"
            b"### Query { .note data-x=\"1 2\" }\n\n## Path parameters {item_id}\n\n"
            b"## Braces { not an attribute list }\n")
    record = MarkdownExtractor().extract(data, locator="tutorial.md")
    assert [s.heading for s in record.sections] == [
        "Tutorial", "CORS", "Setup", "Paths", "Query", "Path parameters {item_id}",
        "Braces { not an attribute list }"]
    assert record.title == "Tutorial"
    assert "#cors" not in record.text


def test_markdown_front_matter_becomes_metadata_and_its_title_wins() -> None:
    data = b"""\
---
title: "Caring for starters"
description: >
  Feeding, storing
  and reviving.
author: Ada Baker
tags:
  - bread
  - 'fermentation'
nested:
  key: skipped
---
# A different heading

Body.
"""
    record = MarkdownExtractor().extract(data, locator="guide.md")
    assert record.title == "Caring for starters"
    assert record.description == "Feeding, storing and reviving."
    assert record.metadata == (("author", "Ada Baker"),
                               ("description", "Feeding, storing and reviving."),
                               ("tags", ("bread", "fermentation")))
    assert record.sections == (Section(heading="A different heading", text="Body.", level=1),)
    assert record.warnings == ()


def test_markdown_front_matter_values_keep_their_types() -> None:
    data = b"""\
---
title: 2024
tags: [intro, install]
date: 2024-05-01
updated: 2024-05-01 10:30:00
version: 3
weight: 1.5
draft: false
empty:
ratio: .nan
nested: {a: 1}
lists: [[1, 2], 3]
---
Body.
"""
    record = MarkdownExtractor().extract(data, locator="guide.md")
    assert record.title == "2024"
    assert dict(record.metadata) == {
        "tags": ("intro", "install"), "date": "2024-05-01", "updated": "2024-05-01T10:30:00",
        "version": 3, "weight": 1.5, "draft": False, "ratio": "nan", "lists": (3,)}


def test_front_matter_that_is_not_yaml_is_read_as_pairs_with_a_warning_naming_the_line() -> None:
    data = b"---\ntitle: Colons: everywhere\ntags: [open\n---\nBody.\n"
    record = MarkdownExtractor().extract(data, locator="guide.md")
    assert record.title == "Colons: everywhere"
    assert dict(record.metadata) == {"tags": "[open"}
    (warning,) = record.warnings
    assert warning.startswith("front matter is not YAML (line 2): ")


def test_markdown_link_definitions_comments_and_reference_link_labels_are_not_text() -> None:
    data = b"""\
# Trait objects

A [trait object][trait-objects] points to an instance; see [the book][] and [Rust].
<!-- TODO: rewrite this paragraph -->
Text with <!-- an inline note --> a comment, `[kept][trait-objects]` and [undefined][nope].

<!--
a comment block
-->

```markdown
[kept]: https://example.org
<!-- kept in code -->
```

- an item with ![a picture][rust]

[trait-objects]: https://doc.rust-lang.org/book/ch18-02-trait-objects.html
[the book]: https://doc.rust-lang.org/book/
[Rust]: https://www.rust-lang.org "Rust"
"""
    text = MarkdownExtractor().extract(data, locator="traits.md").text
    for noise in ("https://doc.rust-lang.org", "https://www.rust-lang.org", "TODO",
                  "an inline note", "a comment block", "][trait-objects]", "[the book]",
                  "[Rust]", "![a picture]"):
        assert noise not in text.replace("`[kept][trait-objects]`", ""), noise
    for kept in ("A trait object points to an instance; see the book and Rust.",
                 "`[kept][trait-objects]`", "[undefined][nope]", "[kept]: https://example.org",
                 "<!-- kept in code -->", "- an item with a picture"):
        assert kept in text, kept


def test_markdown_without_headings_or_h1_has_no_title() -> None:
    record = MarkdownExtractor().extract(
        b"Just a note.\r\nOn two lines.\r\n\r\n## Minor\n", locator="n.md"
    )
    assert record.title is None
    assert record.sections == (
        Section(heading=None, text="Just a note.\nOn two lines."),
        Section(heading="Minor", text="", level=2),
    )


def test_markdown_with_an_unclosed_front_matter_block_keeps_it_as_text() -> None:
    record = MarkdownExtractor().extract(b"---\ntitle: no\n", locator="n.md")
    assert record.title is None
    assert record.metadata == ()
    assert "title: no" in record.text


def test_markdown_that_is_binary_is_rejected() -> None:
    with pytest.raises(ExtractionError, match="looks binary"):
        MarkdownExtractor().extract(b"# Title\x00\x00\x00\x01binary", locator="fake.md")


# --- HTML --------------------------------------------------------------------------------------


def test_html_main_content_with_title_description_and_headings() -> None:
    data = (FIXTURES / "article.html").read_bytes()
    record = HtmlExtractor().extract(data, locator="notes/sourdough.html")
    assert record.title == "Caring for Sourdough Starters"
    assert record.description == "How to feed, store and revive a sourdough starter."
    assert [(s.heading, s.level) for s in record.sections] == [
        ("Caring for Sourdough Starters", 1),
        ("Feeding schedule", 2),
        ("Ratios by weight", 3),
        ("Storing and reviving", 2),
    ]
    assert record.sections[0].text.startswith("A sourdough starter is a living culture")
    assert "Use unbleached flour" in record.sections[1].text
    # a code line starting with "#" is text of its section, not a heading
    assert "# feeding log" in record.sections[2].text
    metadata = dict(record.metadata)
    assert metadata["author"] == "Ada Baker"
    assert metadata["date"] == "2024-03-05"
    assert metadata["url"] == "https://bakery.example/notes/sourdough-starters"
    assert "filedate" not in metadata


def test_html_boilerplate_is_left_out_of_the_text() -> None:
    text = HtmlExtractor().extract((FIXTURES / "article.html").read_bytes(), locator="a.html").text
    for boilerplate in ("Shop our flour", "Popular notes", "All rights reserved", "analytics"):
        assert boilerplate not in text


def test_html_extraction_is_deterministic() -> None:
    data = (FIXTURES / "article.html").read_bytes()
    extractor = HtmlExtractor()
    assert extractor.extract(data, locator="a.html") == extractor.extract(data, locator="a.html")


def test_an_html_page_without_main_content_falls_back_to_its_body_text() -> None:
    data = (FIXTURES / "no_main_content.html").read_bytes()
    record = HtmlExtractor().extract(data, locator="hours.html")
    assert record.title == "Opening hours"
    assert record.description == "When the shop is open."
    body = "Open Monday to Friday, 9:00 to 17:00.\nClosed on public holidays."
    assert record.sections == (Section(heading=None, text=body),)
    assert "opened" not in record.text  # scripts are not text


def test_an_empty_html_page_has_no_sections() -> None:
    record = HtmlExtractor().extract(
        b"<html><head><title>Blank</title></head></html>", locator="b.html"
    )
    assert record.title == "Blank"
    assert record.sections == ()


def test_html_meta_charset_is_honoured() -> None:
    page = (
        "<html><head><meta http-equiv='Content-Type' content='text/html; charset=windows-1251'>"
        "<title>Привет</title></head><body><article><p>Это длинный абзац текста на русском "
        "языке, достаточно длинный, чтобы считаться основным содержанием.</p></article>"
        "</body></html>"
    )
    record = HtmlExtractor().extract(page.encode("cp1251"), locator="ru.html")
    assert record.title == "Привет"
    assert "русском языке" in record.text


def test_html_without_trafilatura_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # makes `import trafilatura` fail
    with pytest.raises(DependencyMissingError, match=r"kbsync\[html\]"):
        HtmlExtractor().extract(b"<p>hi</p>", locator="a.html")


# --- PDF ---------------------------------------------------------------------------------------


def minimal_pdf(pages: list[list[str]], info: dict[str, str] | None = None) -> bytes:
    """A small valid PDF written by hand: each page shows its lines in Helvetica."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    font = 3 + 2 * len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>",
    ]
    for i, lines in enumerate(pages):
        shown = " ".join(f"({escape(line)}) '" for line in lines)
        content = f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET"
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {4 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    trailer = "/Root 1 0 R"
    if info:
        objects.append("<< " + " ".join(f"/{k} ({escape(v)})" for k, v in info.items()) + " >>")
        trailer += f" /Info {len(objects)} 0 R"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} {trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PDF_INFO = {
    "Title": "Starter Handbook",
    "Author": "Ada Baker",
    "Subject": "Feeding and storing",
    "CreationDate": "D:20240305120000Z",
}


def test_pdf_pages_become_sections_in_order_with_the_metadata_title() -> None:
    pages = [["Feeding twice a day.", "Equal weights."], [], ["Storing cold."]]
    data = minimal_pdf(pages, PDF_INFO)
    record = PdfExtractor().extract(data, locator="handbook.pdf")
    assert record.title == "Starter Handbook"
    assert record.description == "Feeding and storing"
    assert record.sections == (
        Section(heading=None, text="Feeding twice a day.\nEqual weights."),
        Section(heading=None, text=""),  # an empty page keeps its place
        Section(heading=None, text="Storing cold."),
    )
    assert record.metadata == (
        ("author", "Ada Baker"),
        ("created", "2024-03-05T12:00:00"),
        ("pages", "3"),
    )


def test_a_pdf_without_metadata_has_no_title() -> None:
    record = PdfExtractor().extract(minimal_pdf([["Only text."]]), locator="plain.pdf")
    assert record.title is None
    assert record.text == "Only text."


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(minimal_pdf([["Cut short."]])[:150], id="truncated"),
        pytest.param(b"%PDF-1.7\n" + b"\x8f\x01 not objects at all " * 40, id="garbage"),
    ],
)
def test_a_corrupt_pdf_is_rejected(data: bytes) -> None:
    with pytest.raises(ExtractionError, match="damaged or unreadable PDF") as caught:
        PdfExtractor().extract(data, locator="broken.pdf")
    assert caught.value.locator == "broken.pdf"


def test_a_file_that_is_not_a_pdf_is_rejected() -> None:
    with pytest.raises(ExtractionError, match="is not a PDF"):
        PdfExtractor().extract(b"just some text", locator="fake.pdf")


def test_an_encrypted_pdf_is_rejected_and_an_owner_only_one_is_read() -> None:
    from pypdf import PdfReader, PdfWriter

    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(minimal_pdf([["Secret."]]))))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
        buffer = io.BytesIO()
        writer.write(buffer)
        return buffer.getvalue()

    with pytest.raises(ExtractionError, match="encrypted PDF that needs a password"):
        PdfExtractor().extract(encrypted("secret"), locator="locked.pdf")
    assert PdfExtractor().extract(encrypted(""), locator="open.pdf").text == "Secret."


def test_pdf_without_pypdf_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)
    with pytest.raises(DependencyMissingError, match=r"kbsync\[pdf\]"):
        PdfExtractor().extract(minimal_pdf([["x"]]), locator="a.pdf")


# --- registry ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "media_type"),
    [
        ("notes/a.txt", "text/plain"),
        ("README.TEXT", "text/plain"),
        ("docs/index.rst", "text/plain"),
        ("server.log", "text/plain"),
        ("guide.md", "text/markdown"),
        ("Guide.Markdown", "text/markdown"),
        ("site/index.html", "text/html"),
        ("old/page.HTM", "text/html"),
        ("papers/x.pdf", "application/pdf"),
        ("photo.jpeg", "application/octet-stream"),
        ("Makefile", "application/octet-stream"),
        ("archive.tar.gz", "application/octet-stream"),
    ],
)
def test_media_type_is_chosen_by_extension(path: str, media_type: str) -> None:
    assert media_type_for(path) == media_type


def test_every_supported_media_type_has_an_extractor_with_its_own_identity() -> None:
    assert set(SUPPORTED_MEDIA_TYPES) == {
        "text/plain",
        "text/markdown",
        "text/html",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/epub+zip",
        "application/vnd.oasis.opendocument.text",
        "application/rtf",
    }
    extractors = [extractor_for(media_type) for media_type in SUPPORTED_MEDIA_TYPES]
    assert all(isinstance(e, Extractor) for e in extractors)
    identities = {e.identity for e in extractors if e is not None}
    assert identities == {"text-v3", "markdown-v4", "html-trafilatura-v2", "pdf-pypdf-v1",
                          "docx-python-docx-v1", "pptx-python-pptx-v1", "xlsx-openpyxl-v2",
                          "epub-ebooklib-v1", "odt-lxml-v1", "rtf-striprtf-v1"}


def test_extractor_lookup_ignores_parameters_and_case_and_knows_no_others() -> None:
    assert isinstance(extractor_for("Text/HTML; charset=UTF-8"), HtmlExtractor)
    assert isinstance(extractor_for("application/xhtml+xml"), HtmlExtractor)
    assert isinstance(extractor_for("text/x-markdown"), MarkdownExtractor)
    assert extractor_for("application/octet-stream") is None
    assert extractor_for("image/png") is None


def test_a_restructuredtext_page_is_titled_by_its_title_not_its_markup() -> None:
    page = (".. _using-csrf:\n\n:orphan:\n\n===================================\n"
            "How to use Django's CSRF protection\n===================================\n\n"
            "To take advantage of CSRF protection in your views, follow these steps.\n")
    assert text_of(page.encode()).title == "How to use Django's CSRF protection"
    assert text_of(b"... and then it rained.\n").title == "... and then it rained."
    assert text_of(b"----\n\n:-) a smile first\n").title == ":-) a smile first"
    assert text_of(b"=====\n-----\n").title is None
