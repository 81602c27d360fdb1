from __future__ import annotations

from kbsync.sources.web.links import decode_text, parse_html, resolve_links
from kbsync.sources.web.soft404 import fingerprint

PAGE = """<!doctype html>
<html><head><title>Guide</title>
<base href="/docs/">
<script>var s = '<a href="/from-script">';</script>
<style>a { color: red }</style>
<link rel="stylesheet" href="/style.css">
</head><body>
<h1>Guide</h1>
<a href="intro.html#top">Intro</a>
<a href="intro.html">Intro again</a>
<a href="HTTP://Example.com/Other?utm_source=x">Other</a>
<a href="mailto:me@example.com">Mail</a>
<a href="javascript:void(0)">JS</a>
<a href="#local">Local</a>
<a>No href</a>
<img src="/pic.png"><area href="/map">
<p>Some &amp; text</p>
</body></html>"""


def test_links_come_from_a_href_only_resolved_against_the_base() -> None:
    page = parse_html(PAGE)
    assert resolve_links(page, "https://example.com/index.html") == [
        "https://example.com/docs/intro.html",
        "http://example.com/Other",
    ]


def test_the_visible_text_leaves_out_scripts_and_styles() -> None:
    text = parse_html(PAGE).text
    assert "Some & text" in text
    assert "Guide" in text
    assert "from-script" not in text
    assert "color" not in text


def test_text_is_decoded_with_the_declared_then_the_meta_charset_then_utf8() -> None:
    latin = "café".encode("latin-1")
    assert decode_text(latin, "iso-8859-1") == "café"
    assert decode_text(b'<meta charset="iso-8859-1">' + latin, None).endswith("café")
    assert decode_text("café".encode(), "no-such-charset") == "café"
    assert decode_text(b"caf\xff", None) == "caf\ufffd"


def test_broken_markup_never_raises() -> None:
    page = parse_html("<a href='/x'>unclosed <div <<< </script> <a href=")
    assert resolve_links(page, "http://example.com/") == ["http://example.com/x"]


def test_soft_404_fingerprints_match_on_equal_or_nearly_equal_words() -> None:
    probe = fingerprint(
        "Sorry, the page /kbsync-soft-404-check-1234 was not found on this site. "
        "Try the search box or go back to the home page of Example Corp."
    )
    same = fingerprint(
        "Sorry,  the page /old-page was not found on this site.\n"
        "Try the search box or go back to the home page of Example Corp."
    )
    real = fingerprint("Installing the tool: download it, unpack it and run the installer.")
    assert probe.matches(same)
    assert not probe.matches(real)
    assert fingerprint("a  b\n c").matches(fingerprint("a b c"))
