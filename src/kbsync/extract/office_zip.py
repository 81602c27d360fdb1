"""The ZIP container of DOCX, PPTX, XLSX, EPUB and ODT, checked before a parser opens it.

A few kilobytes of ZIP can declare gigabytes of XML (a decompression bomb), a
password-protected Office file is not a ZIP at all but an OLE compound file,
and a truncated download has lost the central directory at its end. Each of
these is found from the ZIP directory alone, before any member is inflated, so
the document fails with a message saying which, and the parser never sees it.

The declared sizes are enough: Python's :mod:`zipfile` never returns more bytes
of a member than its directory entry declares (a member that inflates to more
fails its CRC check), so a lying directory cannot get past the budget either.

Then the prolog of every XML member (up to its first element) is read for entity
declarations: a few lines of nested entities expand to gigabytes ("billion
laughs"), and some parsers of these formats recover from libxml2's refusal
silently (ebooklib), failing later with an error that names nothing. No format
here needs entities (OOXML packages may not have a DTD at all), so a member that
declares one is refused by name, before any parser expands anything.
"""

from __future__ import annotations

import io
import zipfile
from xml.parsers import expat

from kbsync.errors import ExtractionError

__all__ = ["ENTRIES_MAX", "UNCOMPRESSED_MAX_BYTES", "XML_MEMBERS", "check_zip", "describe"]

UNCOMPRESSED_MAX_BYTES = 100 * 1024 * 1024
"""The members of one document may declare at most this many bytes in all, uncompressed.

Parsers hold a member's whole XML tree in memory, several times its size; real
documents declare a few megabytes (a 300-page book, a 50,000-row sheet)."""

ENTRIES_MAX = 10_000
"""At most this many members in one document's ZIP directory."""

XML_MEMBERS = (".xml", ".rels", ".opf", ".ncx")
"""Endings of the members parsed as XML (an EPUB's XHTML is read by an HTML parser,
which expands no declared entity)."""

_PROLOG_READ = 65_536

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""An OLE compound file: an encrypted Office document, or a legacy .doc/.ppt/.xls."""


def check_zip(data: bytes, locator: str, kind: str) -> zipfile.ZipFile:
    """``data`` opened as a ZIP archive whose directory is within the limits, else ExtractionError.

    ``kind`` names the format in messages (``"DOCX"``). Encrypted members are
    refused: no parser here can read them.
    """
    if data.startswith(_OLE_MAGIC):
        raise ExtractionError(
            locator,
            f"is not a {kind} ZIP package but an OLE compound file: a password-protected "
            "(encrypted) Office document or a legacy binary .doc/.ppt/.xls; not extracted",
        )
    if not data.startswith(b"PK"):
        raise ExtractionError(locator,
                              f"is not a ZIP archive, so not {_article(kind)} {kind} file")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # BadZipFile, NotImplementedError (an unknown version), OSError...
        raise ExtractionError(
            locator,
            f"is a truncated or damaged {kind} file: its ZIP directory cannot be read "
            f"({describe(exc)})",
        ) from None
    members = archive.infolist()
    if len(members) > ENTRIES_MAX:
        raise ExtractionError(
            locator, f"declares {len(members):,} ZIP members, over the limit of {ENTRIES_MAX:,}; "
            "not extracted",
        )
    declared = sum(member.file_size for member in members)
    if declared > UNCOMPRESSED_MAX_BYTES:
        raise ExtractionError(
            locator,
            f"declares {declared:,} bytes uncompressed in {len(data):,} bytes of {kind}, over "
            f"the limit of {UNCOMPRESSED_MAX_BYTES:,} (a decompression bomb?); not extracted",
        )
    encrypted = next((m.filename for m in members if m.flag_bits & 0x1), None)
    if encrypted is not None:
        raise ExtractionError(
            locator, f"is an encrypted {kind} file (its member {encrypted!r} needs a password); "
            "not extracted",
        )
    for member in members:
        if member.filename.lower().endswith(XML_MEMBERS):
            entity = _declared_entity(archive, member)
            if entity is not None:
                raise ExtractionError(
                    locator, f"its member {member.filename!r} declares the XML entity "
                    f"{entity!r}: entities are refused, since expanding them can take "
                    "gigabytes (an entity expansion bomb, 'billion laughs'); not extracted",
                )
    return archive


class _Found(Exception):  # noqa: N818 - a signal to stop parsing, not an error
    """Raised from expat's handlers: the entity declared, or None at the first element."""

    def __init__(self, entity: str | None) -> None:
        super().__init__(entity)
        self.entity = entity


def _declared_entity(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> str | None:
    """The first entity the prolog of the XML ``member`` declares, or None.

    Parsing stops at the first element (declarations must come before it), so only
    the prolog is read. A member that is not well-formed XML, or cannot be read, is
    left to the format's parser, which says what is wrong with it.
    """

    def declared(name: str, *_: object) -> None:
        raise _Found(name)

    def started(*_: object) -> None:
        raise _Found(None)

    parser = expat.ParserCreate()
    parser.EntityDeclHandler = declared
    parser.StartElementHandler = started
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(_PROLOG_READ):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except _Found as found:
        return found.entity
    except Exception:  # not XML, or damaged: the parser reports it
        return None
    return None


def describe(exc: BaseException) -> str:
    """An exception as ``Type: message`` for an error message, on one line (openpyxl's
    messages run over three)."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _article(kind: str) -> str:
    """The article of a format's name, spelt out letter by letter: a DOCX, an XLSX."""
    return "an" if kind[:1] in "AEFHILMNORSX" else "a"
