"""Office formats: kbsync's extractors against other converters, per document, on files made here.

Each format gets one generated document of a realistic size (a 40-section report,
a 30-slide deck, a 3-sheet workbook of 2,000 rows each, a 40-chapter book, a
40-section ODT, a 400-paragraph RTF). Printed per format and converter: the
median time of ``--repeat`` extractions, the characters of text out, and how
many of the document's headings come out as headings (a section heading for
kbsync, a Markdown ``#`` line for markitdown; mammoth's raw text has none).
Converters that are not installed are left out of the table.

    python benchmarks/office_formats.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import escape

from kbsync.extract.registry import extractor_for, media_type_for

SECTIONS = 40
WORDS = ("the heron waits in the shallow water of the marsh while the tide turns and the "
         "light changes over the reeds").split()


def sentence(i: int, n: int = 40) -> str:
    """A deterministic paragraph of ``n`` words."""
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(n)).capitalize() + "."


def make_docx() -> tuple[bytes, int]:
    import docx

    document = docx.Document()
    document.core_properties.title = "Report"
    for s in range(SECTIONS):
        document.add_heading(f"Section {s}", level=1 + s % 2)
        for p in range(5):
            document.add_paragraph(sentence(s * 5 + p))
        if s % 10 == 0:
            table = document.add_table(rows=5, cols=3)
            for r in range(5):
                for c in range(3):
                    table.cell(r, c).text = f"r{r}c{c}"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue(), SECTIONS


def make_pptx() -> tuple[bytes, int]:
    import pptx

    presentation = pptx.Presentation()
    for s in range(30):
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = f"Slide {s}"
        frame = slide.placeholders[1].text_frame
        frame.text = sentence(s, 12)
        for p in range(4):
            frame.add_paragraph().text = sentence(s + p, 10)
        slide.notes_slide.notes_text_frame.text = sentence(s, 20)
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue(), 30


def make_xlsx() -> tuple[bytes, int]:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for s in range(3):
        sheet = workbook.create_sheet(f"Sheet {s}")
        sheet.append(["id", "name", "count", "ratio", "note", "flag"])
        for r in range(2000):
            sheet.append([r, f"item {r}", r * 3, r / 7, WORDS[r % len(WORDS)], r % 2 == 0])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue(), 3


def _zip(members: list[tuple[str, str]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members:
            archive.writestr(name, content, compress_type=zipfile.ZIP_STORED
                             if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return out.getvalue()


def make_epub() -> tuple[bytes, int]:
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(SECTIONS))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(SECTIONS))
    members = [
        ("mimetype", "application/epub+zip"),
        ("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns='
         '"urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path='
         '"content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>'),
        ("content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
         'version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/'
         '1.1/"><dc:identifier id="id">b</dc:identifier><dc:title>Book</dc:title>'
         f'<dc:language>en</dc:language></metadata><manifest>{items}</manifest>'
         f'<spine>{spine}</spine></package>'),
    ]
    for i in range(SECTIONS):
        body = "".join(f"<p>{escape(sentence(i * 8 + p))}</p>" for p in range(8))
        members.append((f"c{i}.xhtml", '<?xml version="1.0"?><html xmlns="http://www.w3.org/'
                        f'1999/xhtml"><head><title>c</title></head><body><h1>Chapter {i}</h1>'
                        f'{body}</body></html>'))
    return _zip(members), SECTIONS


def make_odt() -> tuple[bytes, int]:
    body = "".join(
        f'<text:h text:outline-level="1">Section {s}</text:h>'
        + "".join(f"<text:p>{escape(sentence(s * 5 + p))}</text:p>" for p in range(5))
        for s in range(SECTIONS))
    content = ('<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:'
               'opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:'
               f'text:1.0"><office:body><office:text>{body}</office:text></office:body>'
               '</office:document-content>')
    manifest = ('<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                'opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" '
                'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
                '<manifest:file-entry manifest:full-path="content.xml" '
                'manifest:media-type="text/xml"/></manifest:manifest>')
    return _zip([("mimetype", "application/vnd.oasis.opendocument.text"),
                 ("content.xml", content), ("META-INF/manifest.xml", manifest)]), SECTIONS


def make_rtf() -> tuple[bytes, int]:
    paragraphs = "".join(f"{sentence(p)}\\par " for p in range(400))
    return ("{\\rtf1\\ansi{\\info{\\title Notes}}" + paragraphs + "}").encode("ascii"), 0


MAKERS: dict[str, Callable[[], tuple[bytes, int]]] = {
    "docx": make_docx, "pptx": make_pptx, "xlsx": make_xlsx,
    "epub": make_epub, "odt": make_odt, "rtf": make_rtf,
}


def kbsync_converter(extension: str) -> Callable[[bytes, Path], tuple[str, int]]:
    extractor = extractor_for(media_type_for(f"a.{extension}"))
    assert extractor is not None

    def run(data: bytes, path: Path) -> tuple[str, int]:
        record = extractor.extract(data, locator=path.name)
        return record.text, sum(1 for s in record.sections if s.heading)

    return run


def markitdown_converter() -> Callable[[bytes, Path], tuple[str, int]] | None:
    try:
        from markitdown import MarkItDown
    except ImportError:
        return None
    converter = MarkItDown(enable_plugins=False)

    def run(data: bytes, path: Path) -> tuple[str, int]:
        text = converter.convert(str(path)).text_content
        return text, len(re.findall(r"^#{1,6} ", text, re.MULTILINE))

    return run


def mammoth_converter() -> Callable[[bytes, Path], tuple[str, int]] | None:
    try:
        import mammoth
    except ImportError:
        return None

    def run(data: bytes, path: Path) -> tuple[str, int]:
        return mammoth.extract_raw_text(io.BytesIO(data)).value, 0

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    markitdown = markitdown_converter()
    mammoth = mammoth_converter()
    print(f"{'format':<6} {'bytes':>8} {'converter':<11} {'ms/doc':>8} {'chars':>8} headings")
    with tempfile.TemporaryDirectory() as folder:
        for extension, make in MAKERS.items():
            data, headings = make()
            path = Path(folder) / f"doc.{extension}"
            path.write_bytes(data)
            converters: dict[str, Callable[[bytes, Path], tuple[str, int]]] = {
                "kbsync": kbsync_converter(extension)}
            if markitdown is not None:
                converters["markitdown"] = markitdown
            if mammoth is not None and extension == "docx":
                converters["mammoth"] = mammoth
            for name, convert in converters.items():
                times = []
                try:
                    for _ in range(args.repeat):
                        began = time.perf_counter()
                        text, found = convert(data, path)
                        times.append(time.perf_counter() - began)
                except Exception as exc:  # a converter that does not read this format
                    print(f"{extension:<6} {len(data):>8} {name:<11} {'-':>8} {'-':>8} "
                          f"fails: {type(exc).__name__}")
                    continue
                print(f"{extension:<6} {len(data):>8} {name:<11} "
                      f"{1000 * statistics.median(times):>8.1f} {len(text):>8} "
                      f"{found}/{headings}")


if __name__ == "__main__":
    main()
