"""Office documents and books made by the tests: DOCX, PPTX and XLSX written by their
libraries, EPUB, ODT and RTF written by hand (the smallest valid files)."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from xml.sax.saxutils import escape

__all__ = ["FORMATS", "docx_bytes", "epub_bytes", "odt_bytes", "pptx_bytes", "rtf_bytes",
           "xlsx_bytes"]


def docx_bytes(title: str = "Field guide", words: str = "Herons wade in shallow water.") -> bytes:
    """A DOCX: a Title paragraph, two headings, a paragraph each and a table."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = "Ada Lovelace"
    document.core_properties.created = datetime(2024, 3, 1, 9, 30)
    document.core_properties.modified = datetime(2024, 3, 2, 10, 0)
    document.add_paragraph("Birds of the marsh", style="Title")
    document.add_paragraph("An introduction before any heading.")
    document.add_heading("Herons", level=1)
    document.add_paragraph(words)
    document.add_heading("Feeding", level=2)
    document.add_paragraph("They stand still and strike fast.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Bird", "Length"
    table.cell(1, 0).text, table.cell(1, 1).text = "Grey heron", "95 cm"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_bytes(notes: str = "Mention the ringing scheme.") -> bytes:
    """A PPTX: a title slide, a titled bullet slide with notes, a slide with a table."""
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    presentation.core_properties.title = "Migration talk"
    presentation.core_properties.author = "Grace Hopper"
    first = presentation.slides.add_slide(presentation.slide_layouts[0])
    first.shapes.title.text = "Bird migration"
    first.placeholders[1].text = "Spring 2024"
    second = presentation.slides.add_slide(presentation.slide_layouts[1])
    second.shapes.title.text = "Routes"
    body = second.placeholders[1].text_frame
    body.text = "Swallows fly to Africa."
    body.add_paragraph().text = "Geese follow the coast."
    second.notes_slide.notes_text_frame.text = notes
    third = presentation.slides.add_slide(presentation.slide_layouts[6])  # blank
    shape = third.shapes.add_table(2, 2, Inches(1), Inches(1), Inches(4), Inches(1))
    shape.table.cell(0, 0).text, shape.table.cell(0, 1).text = "Species", "Distance"
    shape.table.cell(1, 0).text, shape.table.cell(1, 1).text = "Arctic tern", "70000 km"
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def xlsx_bytes(count: int = 12) -> bytes:
    """An XLSX with two sheets: a table with a header row, and a sheet with a formula."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.properties.title = "Bird counts"
    workbook.properties.creator = "Rosalind Franklin"
    workbook.properties.created = datetime(2024, 5, 1, 12, 0)
    workbook.properties.modified = datetime(2024, 5, 6, 12, 0)
    sheet = workbook.active
    sheet.title = "Counts"
    sheet.append(["Species", "Count", "Seen on"])
    sheet.append(["Avocet", count, datetime(2024, 5, 4)])
    sheet.append(["Bittern", 2.0, None])
    sheet.append(["Curlew", 3, datetime(2024, 5, 5, 6, 30)])
    notes = workbook.create_sheet("Notes")
    notes["A1"] = "Counted at dawn"
    notes["C3"] = "=1+1"  # no cached value: openpyxl writes the formula only
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _zip(members: list[tuple[str, str | bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in members:
            method = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            archive.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)),
                             content, compress_type=method)
    return out.getvalue()


def epub_bytes(chapters: tuple[tuple[str, str], ...] = (
        ("Owls", "Owls hunt at night."), ("Kestrels", "Kestrels hover over fields.")),
        *, extra: list[tuple[str, str | bytes]] | None = None) -> bytes:
    """An EPUB 3: one XHTML file per (heading, paragraph) chapter, in the spine in order."""
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(len(chapters)))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>'
        '<dc:title>Raptors</dc:title><dc:creator>Jane Goodall</dc:creator>'
        '<dc:language>en</dc:language>'
        '<meta property="dcterms:modified">2024-02-03T04:05:06Z</meta>'
        '</metadata>'
        f'<manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
        f'properties="nav"/>{items}</manifest>'
        f'<spine>{spine}</spine></package>'
    )
    nav = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
           'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head><body>'
           '<nav epub:type="toc"><ol><li><a href="c0.xhtml">Contents entry</a></li></ol></nav>'
           '</body></html>')
    members: list[tuple[str, str | bytes]] = [
        ("mimetype", "application/epub+zip"),
        ("META-INF/container.xml",
         '<?xml version="1.0"?><container version="1.0" '
         'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
         '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
         '</rootfiles></container>'),
        ("OEBPS/content.opf", opf),
        ("OEBPS/nav.xhtml", nav),
    ]
    for i, (heading, paragraph) in enumerate(chapters):
        members.append((f"OEBPS/c{i}.xhtml", (
            '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html>'
            '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title>'
            '<style>p { color: red }</style></head>'
            f'<body><section><h1>{escape(heading)}</h1><p>{escape(paragraph)} '
            '<em>Really.</em></p></section></body></html>')))
    return _zip(members + (extra or []))


_ODT_MIMETYPE = "application/vnd.oasis.opendocument.text"


def odt_bytes(paragraph: str = "Puffins nest in burrows.", *,
              mimetype: str = _ODT_MIMETYPE, manifest_extra: str = "") -> bytes:
    """An ODT with meta.xml, two headings, paragraphs, a list and a table."""
    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"')
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns} '
        'office:version="1.2"><office:body><office:text>'
        '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion>'
        '<text:p>Deleted words.</text:p></text:deletion></text:changed-region>'
        '</text:tracked-changes>'
        '<text:p>Before the first heading.</text:p>'
        '<text:h text:outline-level="1">Seabirds</text:h>'
        f'<text:p>{escape(paragraph)}</text:p>'
        '<text:p>Sea<text:s/>birds<text:tab/>fly<text:line-break/>far '
        '<text:span>away<text:s text:c="3"/></text:span>home.</text:p>'
        '<text:list><text:list-item><text:p>Gannets dive.</text:p></text:list-item></text:list>'
        '<text:h text:outline-level="2">Colonies</text:h>'
        '<table:table table:name="T"><table:table-row>'
        '<table:table-cell><text:p>Isle</text:p></table:table-cell>'
        '<table:table-cell><text:p>Pairs</text:p></table:table-cell></table:table-row>'
        '<table:table-row><table:table-cell><text:p>Skomer</text:p></table:table-cell>'
        '<table:table-cell><text:p>25000</text:p></table:table-cell></table:table-row>'
        '</table:table></office:text></office:body></office:document-content>')
    meta = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-meta '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" office:version="1.2">'
        '<office:meta><dc:title>Seabird notes</dc:title>'
        '<meta:initial-creator>Rachel Carson</meta:initial-creator>'
        '<meta:creation-date>2023-06-01T08:00:00</meta:creation-date>'
        '<dc:date>2023-06-02T09:00:00</dc:date></office:meta></office:document-meta>')
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
        'manifest:version="1.2">'
        f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
        f'{manifest_extra}</manifest:file-entry>'
        '<manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>'
        '</manifest:manifest>')
    return _zip([("mimetype", mimetype), ("content.xml", content), ("meta.xml", meta),
                 ("META-INF/manifest.xml", manifest)])


def rtf_bytes(words: str = "Wrens sing loudly for their size.") -> bytes:
    """An RTF with an info group (title, author, creation time) and two paragraphs."""
    return (
        "{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Times;}}"
        "{\\info{\\title Small birds}{\\author Gilbert White}"
        "{\\creatim\\yr2022\\mo7\\dy9\\hr14\\min5}}"
        "\\f0\\fs24 Songbirds\\par "
        f"{words} Caf\\'e9 na\\u239?ve.\\par "
        "}"
    ).encode("ascii")


FORMATS = {
    "guide.docx": docx_bytes,
    "talk.pptx": pptx_bytes,
    "counts.xlsx": xlsx_bytes,
    "book.epub": epub_bytes,
    "notes.odt": odt_bytes,
    "wrens.rtf": rtf_bytes,
}
"""A file name of each format and the function that makes it."""
