"""Fuzz targets: one function per parser of untrusted input, each asserting its invariants.

Every target takes the fuzzer's bytes and either returns or raises
``AssertionError`` (an invariant broken) or an exception outside kbsync's error
tree (a crash). An error of the tree (:class:`~kbsync.errors.KbsyncError`) is
the documented way to refuse bad input and is accepted. The same functions run
under atheris (``scripts/fuzz.py``) and in CI over the saved corpus
(``test_fuzz_corpus.py``), which needs no atheris.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kbsync.core.normalize import normalize
from kbsync.errors import KbsyncError
from kbsync.extract.html import HtmlExtractor
from kbsync.extract.markdown import MarkdownExtractor
from kbsync.extract.pdf import PdfExtractor
from kbsync.extract.text import TextExtractor
from kbsync.model import Record
from kbsync.sources.web.addresses import AddressPolicy
from kbsync.sources.web.robots import MAX_CRAWL_DELAY, RobotsPolicy
from kbsync.sources.web.sitemaps import MAX_ENTRIES, parse_sitemap
from kbsync.sources.web.urls import canonicalize, host_of, origin_of

__all__ = ["TARGETS"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_SITEMAP_CAP = 1_000_000
_BASE = "https://docs.example.org/guide/intro.html?lang=en"


def _text(data: bytes) -> str:
    """Text for the text-level targets, lone surrogates included when the bytes encode them."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def fuzz_normalize(data: bytes) -> None:
    """normalize never fails, is idempotent, keeps no surrogate or NUL; its words are its text."""
    text = _text(data)
    once = normalize(text)
    assert normalize(once.text).text == once.text, "normalize is not idempotent"
    assert not _SURROGATE.search(once.text), "a surrogate survived normalization"
    assert "\x00" not in once.text
    assert once.text.split() == once.words


def _check_record(record: Record) -> None:
    assert isinstance(record, Record)
    for section in record.sections:
        assert isinstance(section.text, str)
        assert not _SURROGATE.search(section.text), "a surrogate in extracted text"
        if section.heading is not None:
            assert isinstance(section.heading, str)
        normalize(section.text)
    if record.title is not None:
        assert isinstance(record.title, str)


def _extractor_target(
    extract: Callable[..., Record], media_type: str
) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        try:
            first = extract(data, locator="fuzz-input", media_type=media_type)
        except KbsyncError as exc:
            message = str(exc)
        else:
            message = None
        if message is not None:
            assert message.startswith("fuzz-input: "), f"the message does not name it: {message}"
            return
        _check_record(first)
        assert extract(data, locator="fuzz-input", media_type=media_type) == first, (
            "extracting the same bytes twice gave different records")

    target.__doc__ = f"The {media_type} extractor returns a sane Record or a DocumentError."
    return target


fuzz_extract_text = _extractor_target(TextExtractor().extract, "text/plain")
fuzz_extract_markdown = _extractor_target(MarkdownExtractor().extract, "text/markdown")
fuzz_extract_html = _extractor_target(HtmlExtractor().extract, "text/html")
fuzz_extract_pdf = _extractor_target(PdfExtractor().extract, "application/pdf")


def fuzz_urls(data: bytes) -> None:
    """canonicalize is idempotent, alone and against a base, and its result has a checkable host."""
    text = _text(data)
    policy = AddressPolicy()
    for base in (None, _BASE):
        try:
            url = canonicalize(text, base)
        except KbsyncError:
            continue
        assert canonicalize(url) == url, f"not idempotent: {text!r} -> {url!r}"
        assert url.startswith(("http://", "https://"))
        host = host_of(url)
        assert host, url
        assert origin_of(url) in url
        policy.host_refusal(host)


def fuzz_robots(data: bytes) -> None:
    """Any robots.txt parses; answers are booleans, delays are capped, sitemaps are strings."""
    policy = RobotsPolicy.from_response(200, data)
    for url in ("https://docs.example.org/", "https://docs.example.org/private/a?b=c",
                "https://docs.example.org/%E2%82%AC/x"):
        for agent in ("kbsync", "*", "Googlebot"):
            assert isinstance(policy.allows(url, agent), bool)
    delay = policy.crawl_delay("kbsync")
    assert delay is None or 0.0 <= delay <= MAX_CRAWL_DELAY, delay
    assert all(isinstance(s, str) for s in policy.sitemaps)


def fuzz_sitemaps(data: bytes) -> None:
    """A sitemap parses or is a SitemapError; never more than MAX_ENTRIES entries."""
    try:
        sitemap = parse_sitemap(data, _SITEMAP_CAP)
    except KbsyncError:
        return
    assert len(sitemap.entries) <= MAX_ENTRIES
    for entry in sitemap.entries:
        assert isinstance(entry.loc, str)
        assert entry.loc


TARGETS: dict[str, Callable[[bytes], None]] = {
    "normalize": fuzz_normalize,
    "extract_text": fuzz_extract_text,
    "extract_markdown": fuzz_extract_markdown,
    "extract_html": fuzz_extract_html,
    "extract_pdf": fuzz_extract_pdf,
    "urls": fuzz_urls,
    "robots": fuzz_robots,
    "sitemaps": fuzz_sitemaps,
}
