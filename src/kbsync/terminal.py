"""Text from documents made harmless to show: on a terminal, in JSON, and to a reader.

A document (a crawled page above all) can hold control characters: ANSI and OSC
escape sequences that clear the screen, retitle the window or plant a hyperlink,
backspaces and carriage returns that overwrite what was printed, and bidi
overrides that make text read differently from what it is. Every string that
comes from a document goes through one of these functions before it is shown:

- :func:`printable` for people at a terminal: each such character becomes a
  visible escape (``\\x1b``, ``\\x08``, ``\\u202e``), one for one, so nothing is
  hidden, nothing acts, and the rest of the text is untouched;
- :func:`json_escaped` for ``--json``: the same characters as JSON ``\\u`` escapes,
  so the data is unchanged once parsed and the output is safe to view;
- :func:`strip_controls` for readers that want the words (the MCP server):
  escape sequences are removed whole, other control characters dropped.

Newlines and tabs stay, since layout needs them, except with ``one_line``.
Other formatting characters (zero-width joiners in emoji, soft hyphens) stay too.
"""

from __future__ import annotations

import re

__all__ = ["UNSAFE", "json_escaped", "printable", "strip_controls"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
"""A character that must not reach a terminal as it is: C0 controls but newline and tab,
DEL, C1 controls, and the bidi controls: embeddings, overrides, isolates and the three
invisible marks (LRM, RLM, ALM), which reorder neighbouring text as well."""
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")

# ECMA-48 sequences, 7-bit (ESC ...) and 8-bit (C1) forms: CSI; OSC, DCS, SOS, PM and APC
# strings up to their terminator (BEL or ST), or when unterminated up to the next ESC or
# line break (so a stray one cannot swallow the rest of a document); any other ESC with
# its intermediates and final byte.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character unsafe for a terminal shown as a visible escape.

    ``one_line`` escapes newlines and tabs too, for a key, heading or title shown
    in a line of its own (a newline there could forge another line of output).
    """
    pattern = _UNSAFE_ONE_LINE if one_line else UNSAFE
    return pattern.sub(_visible, text)


def json_escaped(dumped: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the unsafe characters it
    leaves raw (DEL, C1 controls, bidi controls) written as ``\\u`` escapes.

    These characters occur only inside strings, so the result parses to the same data.
    """
    return UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences and other control characters.

    Every word stays (the label of an OSC 8 hyperlink, the text after a colour
    code); newlines and tabs stay, carriage returns and the rest go.
    """
    return UNSAFE.sub("", _SEQUENCE.sub("", text))
