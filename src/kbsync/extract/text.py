"""Plain text: bytes -> str with BOM, UTF-8 and charset detection; binary posing as text rejected.

:func:`decode_text` is shared by every text-based extractor (Markdown, HTML), so
they agree on what a document's characters are and on what counts as binary.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes

from kbsync.errors import ExtractionError
from kbsync.extract.rest import rest_sections
from kbsync.model import Record, Section

__all__ = [
    "TITLE_MAX_CHARS",
    "Decoded",
    "TextExtractor",
    "charset_of",
    "decode",
    "decode_text",
    "first_line_title",
    "replacement_warnings",
]

TITLE_MAX_CHARS = 200
"""A title taken from a document's first line is cut to this many characters."""

CONTROL_SHARE_MAX = 0.05
"""More than this share of control characters (tab, line breaks, form feed and ESC
excepted) and the document is taken for binary."""

_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32 first: its little-endian BOM begins with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or an Office document)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
)

# Codecs charset detection may not pick: without a BOM, UTF-16/32 shows as NUL bytes (handled
# before detection), and EBCDIC or UTF-7 readings of stray bytes are never what a user meant.
_DETECTION_EXCLUDED = [
    "utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le", "utf_7",
    "cp037", "cp273", "cp424", "cp500", "cp875", "cp1026", "cp1140",
]  # fmt: skip

# C0 controls except \t \n \v \f \r and ESC (coloured logs), DEL, and C1 controls.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f-\x9f]")

# WHATWG: labels for Latin-1 and ASCII mean windows-1252, which browsers decode them as.
_WINDOWS_1252_ALIASES = frozenset({"iso8859-1", "ascii"})


@dataclass(frozen=True, slots=True)
class Decoded:
    """A document's text, and how many of its bytes were not UTF-8 and became U+FFFD."""

    text: str
    replaced: int = 0


def decode_text(data: bytes, locator: str, *, declared_encoding: str | None = None) -> str:
    """Decode a document's bytes to text, or raise ExtractionError saying why it is not text.

    Strict: a UTF-8 document with invalid bytes in it is an error (see :func:`decode`).
    """
    return decode(data, locator, declared_encoding=declared_encoding, strict=True).text


def replacement_warnings(decoded: Decoded) -> tuple[str, ...]:
    """The warning a document with replaced bytes is indexed with (none when it had none)."""
    if not decoded.replaced:
        return ()
    bytes_are = "byte that is" if decoded.replaced == 1 else "bytes that are"
    return (f"{decoded.replaced} {bytes_are} not UTF-8 replaced by U+FFFD "
            "(strict_decoding = true refuses such files)",)


def decode(data: bytes, locator: str, *, declared_encoding: str | None = None,
           strict: bool = False) -> Decoded:
    """Decode a document's bytes to text, or raise ExtractionError saying why it is not text.

    Order: a byte order mark (UTF-8/16/32); NUL bytes mean BOM-less UTF-16/32 or
    binary; strict UTF-8; ``declared_encoding`` (an HTML ``<meta charset>``);
    charset detection. Strict UTF-8 comes before the declaration because a
    mislabelled UTF-8 page is common and valid UTF-8 is almost never an accident.
    A UTF-8 document with a few invalid bytes (a damaged copy, a stray byte) is
    decoded as UTF-8 with each invalid byte replaced by U+FFFD and counted in
    ``replaced``, or with ``strict`` rejected; never guessed as another encoding,
    so its text never turns silently into mojibake.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise ExtractionError(
                    locator,
                    f"starts with a {encoding.upper()} byte order mark but is not valid "
                    f"{encoding.upper()} ({exc.reason} at byte {exc.start + len(bom)})",
                ) from None
            return Decoded(_check_not_binary(text, locator))

    for magic, what in _MAGIC:
        if data.startswith(magic):
            raise ExtractionError(locator, f"looks binary: it is {what}, not text")

    if b"\x00" in data:
        text_or_none = _bomless_utf16_or_32(data)
        if text_or_none is None:
            raise ExtractionError(
                locator, "looks binary: it contains NUL bytes and is not UTF-16 or UTF-32 text"
            )
        return Decoded(_check_not_binary(text_or_none, locator))

    try:
        return Decoded(_check_not_binary(data.decode("utf-8"), locator))
    except UnicodeDecodeError as exc:
        utf8_error = exc

    repaired = _utf8_with_surrogates(data)
    if repaired is not None:
        return Decoded(_check_not_binary(repaired, locator))

    if declared_encoding is not None:
        declared = _codec_name(declared_encoding)
        if declared is not None:
            try:
                return Decoded(_check_not_binary(data.decode(declared), locator))
            except (UnicodeError, LookupError):
                pass  # the declaration lies; detect instead

    invalid_at = utf8_error.start
    if _mixes_utf8(data):
        if strict:
            raise ExtractionError(
                locator,
                "mixes UTF-8 with bytes that are not UTF-8 (first invalid byte "
                f"0x{data[invalid_at]:02x} at offset {invalid_at}); save it in one encoding",
            )
        replaced = data.decode("utf-8", errors="surrogateescape")
        invalid = len(_ESCAPED.findall(replaced))
        return Decoded(_check_not_binary(data.decode("utf-8", errors="replace"), locator),
                       replaced=invalid)

    detected = _detect(data)
    if detected is None:
        raise ExtractionError(
            locator,
            "cannot be decoded: it is not UTF-8 (invalid byte "
            f"0x{data[invalid_at]:02x} at offset {invalid_at}) and no known character "
            "encoding fits it",
        )
    return Decoded(_check_not_binary(detected, locator))


# Lines that are markup around a title, not the title: a section adornment (a run of
# one punctuation character, as reStructuredText and setext headings underline and
# overline titles), reST explicit markup (`.. _label:`, comments, directives) and a
# docinfo field such as `:orphan:`.
_NOT_A_TITLE = re.compile(r"([!-/:-@\[-`{-~])\1{2,}|\.\.(\s.*)?|:[\w-]+:(\s.*)?")


def first_line_title(text: str) -> str | None:
    """The first line with words in it, stripped and cut to TITLE_MAX_CHARS, or None.

    Markup before the title (see ``_NOT_A_TITLE``) is passed over, so a
    reStructuredText page is titled by its title, not by its overline or label.
    """
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not _NOT_A_TITLE.fullmatch(stripped):
            return stripped[:TITLE_MAX_CHARS].rstrip()
    return None


class TextExtractor:
    """Plain text: one section, or one per reStructuredText title (:mod:`kbsync.extract.rest`);
    the first line is the title.

    ``strict_decoding`` refuses a UTF-8 file with invalid bytes instead of indexing it
    with U+FFFD in their place (and a warning).
    """

    def __init__(self, *, strict_decoding: bool = False) -> None:
        self.strict_decoding = strict_decoding

    @property
    def identity(self) -> str:
        """Name and version; it has no settings."""
        return "text-v3"  # v3: sections at reST titles

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """Decode the bytes; an empty or blank document has no sections."""
        decoded = decode(data, locator, declared_encoding=charset_of(media_type),
                         strict=self.strict_decoding)
        text = decoded.text
        sections = rest_sections(text) or (
            (Section(heading=None, text=text),) if text.strip() else ())
        return Record(title=first_line_title(text), description=None, sections=sections,
                      warnings=replacement_warnings(decoded))


def _check_not_binary(text: str, locator: str) -> str:
    """Return the text, or raise when control characters make it look binary."""
    if not text:
        return text
    controls = len(_CONTROLS.findall(text))
    if controls / len(text) > CONTROL_SHARE_MAX:
        raise ExtractionError(
            locator,
            f"looks binary: {controls} of its {len(text)} characters are control characters",
        )
    return text


def _bomless_utf16_or_32(data: bytes) -> str | None:
    """Decode text that has NUL bytes as BOM-less UTF-32 or UTF-16, or None if it is neither.

    Text in those encodings puts its NUL bytes in a regular place (the high bytes of
    each code unit); binary data does not, or decodes to NUL characters.
    """
    candidates: list[str] = []
    if len(data) % 4 == 0:
        candidates += ["utf-32-le", "utf-32-be"]
    nuls = data.count(0)
    # Text in UTF-16 has a NUL in most code units (Latin scripts) or none at all; a few
    # stray NULs in ASCII are not UTF-16.
    if len(data) % 2 == 0 and nuls >= len(data) // 8:
        odd = data[1::2].count(0)
        if odd >= 0.95 * nuls:
            candidates.append("utf-16-le")
        elif nuls - odd >= 0.95 * nuls:
            candidates.append("utf-16-be")
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text
    return None


def _codec_name(label: str) -> str | None:
    """The Python codec for an encoding label, or None if unknown or not a byte encoding."""
    try:
        info = codecs.lookup(label.strip())
    except LookupError:
        return None
    # rot13, hex, base64, zlib… are codecs too, but not text encodings of bytes.
    if not getattr(info, "_is_text_encoding", True) or info.name == "undefined":
        return None
    name = info.name
    if name in _WINDOWS_1252_ALIASES:
        return "cp1252"
    if name.startswith(("utf-16", "utf-32")):
        return None  # WHATWG: a meta tag cannot declare these; the bytes would show NULs
    return name


def _utf8_with_surrogates(data: bytes) -> str | None:
    """UTF-8 whose only fault is UTF-16 surrogates encoded as UTF-8, repaired; else None.

    Such files come from CESU-8 writers (a pair per character outside the BMP)
    and from programs that wrote a lone surrogate. A pair is joined into its
    character; a lone surrogate becomes U+FFFD, so the text never holds one.
    """
    if _ENCODED_SURROGATE.search(data) is None:
        return None
    try:
        text = data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        return None
    return text.encode("utf-16-le", errors="surrogatepass").decode("utf-16-le", errors="replace")


def _mixes_utf8(data: bytes) -> bool:
    """Whether invalid UTF-8 sits beside valid multi-byte UTF-8 sequences, as damage would.

    Text in a legacy encoding forms valid multi-byte UTF-8 sequences only by
    chance, and has invalid bytes at most of its non-ASCII letters. So UTF-8 it
    is when the valid sequences are at least as many as the invalid bytes, or
    when a few invalid bytes (up to ``_FEW_INVALID_BYTES``) sit in no more runs
    than there are valid sequences: one spot of three stray bytes beside one
    accented letter is a damaged UTF-8 file, not a CJK code page.
    """
    valid = len(_UTF8_MULTIBYTE.findall(data))
    if valid == 0:
        return False
    escaped = data.decode("utf-8", errors="surrogateescape")
    invalid = len(_ESCAPED.findall(escaped))
    runs = len(_ESCAPED_RUN.findall(escaped))
    return valid >= invalid or (invalid <= _FEW_INVALID_BYTES and valid >= runs)


_FEW_INVALID_BYTES = 8


# Well-formed multi-byte sequences only (RFC 3629): no overlong forms, no encoded
# surrogates (ED A0..BF), nothing above U+10FFFF.
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]"
    rb"|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
    rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")
# What errors="surrogateescape" makes of each byte that is not UTF-8.
_ESCAPED = re.compile("[\udc80-\udcff]")
_ESCAPED_RUN = re.compile("[\udc80-\udcff]+")


def _detect(data: bytes) -> str | None:
    """Charset detection, with windows-1252 preferred when it reads about as well as the best.

    On short text several single-byte encodings score alike (Baltic or Central
    European readings of French often score a little better); Western text is
    the likeliest, and windows-1252 is what browsers assume. The margins are
    small, so Cyrillic, Greek and East Asian text keep their own encodings.
    """
    matches = from_bytes(data, cp_exclusion=_DETECTION_EXCLUDED)
    best = matches.best()
    if best is None:
        return None
    for match in matches:
        if (
            "cp1252" in match.could_be_from_charset
            and match.chaos <= best.chaos + _WESTERN_CHAOS_MARGIN
            and match.coherence >= best.coherence - _WESTERN_COHERENCE_MARGIN
        ):
            return data.decode("cp1252")
    return str(best)


_WESTERN_CHAOS_MARGIN = 0.1
_WESTERN_COHERENCE_MARGIN = 0.05


def charset_of(media_type: str) -> str | None:
    """The ``charset`` parameter of a media type such as ``text/html; charset=ISO-8859-1``."""
    for parameter in media_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None
