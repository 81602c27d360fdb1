"""RTF with striprtf: the text as one section, title and author from the ``\\info`` group.

RTF has no structural headings (a heading is a paragraph with a font size or a
style sheet entry), so the document is one section. RTF is 7-bit text with
escapes for everything else, so its bytes are read as Latin-1 (one character per
byte, never a decoding error); striprtf turns ``\\'xx`` escapes from the code page
and ``\\uN`` escapes into their characters.

A file that does not start with ``{\\rtf`` is not RTF; one whose braces never
close again was cut short (truncated); both fail as this document's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kbsync.errors import DependencyMissingError, ExtractionError
from kbsync.extract.office_zip import describe
from kbsync.extract.text import TITLE_MAX_CHARS
from kbsync.model import Record, Section

__all__ = ["RtfExtractor"]

_INFO_FIELDS = {"title": "title", "subject": "description", "author": "author",
                "keywords": "keywords"}
_FIELD = re.compile(r"\{\\(title|subject|author|keywords)\s+((?:[^{}\\]|\\.)*)\}")
_DATE = re.compile(r"\{\\(creatim|revtim)((?:\\[a-z]+-?\d+\s*)+)\}")
_DATE_PART = re.compile(r"\\(yr|mo|dy|hr|min)(-?\d+)")
_BRACES = re.compile(r"\\[\\{}]|[{}]")
_SPACES = re.compile(r"\s+")


class RtfExtractor:
    """Rich Text Format documents: the text, and the ``\\info`` group's title and author."""

    @property
    def identity(self) -> str:
        """Name, library and version."""
        return "rtf-striprtf-v1"

    def extract(self, data: bytes, *, locator: str, media_type: str = "") -> Record:
        """The document's text; a file that is not RTF or was cut short is an ExtractionError."""
        try:
            from striprtf.striprtf import rtf_to_text as untyped
        except ImportError as exc:
            raise DependencyMissingError("RTF extraction", "office", "striprtf", exc) from exc
        rtf_to_text: Callable[..., str] = untyped  # striprtf's function has no annotations
        source = data.decode("latin-1")
        if not source.lstrip("\ufeff \t\r\n").startswith("{\\rtf"):
            raise ExtractionError(locator, "is not an RTF file: it does not start with {\\rtf")
        if _unclosed(source):
            raise ExtractionError(
                locator, "is a truncated RTF file: its groups are not closed; not extracted")
        try:
            text = rtf_to_text(source, errors="replace")
            info = {_INFO_FIELDS[name]: _collapse(rtf_to_text("{\\rtf1 " + value + "}",
                                                              errors="replace"))
                    for name, value in reversed(_FIELD.findall(source))}
        except Exception as exc:  # striprtf raises on some malformed control words
            raise ExtractionError(locator, f"is a damaged RTF file ({describe(exc)})") from exc
        for name, value in _DATE.findall(source):
            iso = _iso(value)
            if iso:
                info.setdefault("created" if name == "creatim" else "modified", iso)
        title = info.pop("title", None) or None
        description = info.pop("description", None) or None
        return Record(
            title=title[:TITLE_MAX_CHARS] if title else None,
            description=description,
            sections=(Section(heading=None, text=text.strip()),),
            metadata=tuple(sorted((k, v) for k, v in info.items() if v)),
        )


def _unclosed(source: str) -> bool:
    """Whether the groups opened are not all closed (escaped braces do not count)."""
    depth = 0
    for token in _BRACES.findall(source):
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
    return depth > 0


def _iso(value: str) -> str | None:
    """An RTF ``\\yrN\\moN\\dyN\\hrN\\minN`` time as ISO 8601, to the precision given."""
    parts = dict(_DATE_PART.findall(value))
    year = parts.get("yr")
    if not year:
        return None
    text = f"{int(year):04d}"
    if "mo" in parts:
        text += f"-{int(parts['mo']):02d}"
        if "dy" in parts:
            text += f"-{int(parts['dy']):02d}"
            if "hr" in parts:
                text += f"T{int(parts['hr']):02d}:{int(parts.get('min', 0)):02d}:00"
    return text


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, ends stripped."""
    return _SPACES.sub(" ", text).strip()
