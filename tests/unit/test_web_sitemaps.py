from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kbsync.sources.web.sitemaps import (
    Sitemap,
    SitemapEntry,
    SitemapError,
    SitemapKind,
    parse_sitemap,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "web"
CAP = 10_000_000


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_a_urlset_lists_its_locations_with_lastmod_hints() -> None:
    sitemap = parse_sitemap(_fixture("sitemap_urlset.xml"), CAP)
    assert sitemap == Sitemap(
        SitemapKind.URLSET,
        (
            SitemapEntry("https://example.com/docs/intro", "2024-05-01T10:00:00+00:00"),
            SitemapEntry("https://example.com/docs/install?lang=en&v=2", None),
        ),
    )


def test_a_sitemap_index_lists_further_sitemaps() -> None:
    sitemap = parse_sitemap(_fixture("sitemap_index.xml"), CAP)
    assert sitemap.kind is SitemapKind.INDEX
    assert [e.loc for e in sitemap.entries] == [
        "https://example.com/sitemap-docs.xml",
        "https://example.com/sitemap-blog.xml.gz",
    ]


def test_a_gzipped_sitemap_is_recognized_by_its_magic_number() -> None:
    data = gzip.compress(_fixture("sitemap_urlset.xml"))
    assert len(parse_sitemap(data, CAP).entries) == 2


def test_a_gzipped_sitemap_that_inflates_past_the_cap_is_refused() -> None:
    data = gzip.compress(b"<urlset>" + b" " * 2_000_000 + b"</urlset>")
    with pytest.raises(SitemapError, match="max_decompressed_bytes"):
        parse_sitemap(data, 1_000_000)


def test_a_text_sitemap_is_one_url_per_line() -> None:
    data = b"https://example.com/a\r\n\r\n  https://example.com/b  \n"
    assert [e.loc for e in parse_sitemap(data, CAP).entries] == [
        "https://example.com/a",
        "https://example.com/b",
    ]


@pytest.mark.parametrize("name", ["billion_laughs.xml", "external_entity.xml"])
def test_a_sitemap_with_a_doctype_is_refused_before_any_entity_is_expanded(name: str) -> None:
    with pytest.raises(SitemapError, match="DOCTYPE"):
        parse_sitemap(_fixture(name), CAP)


def test_a_doctype_in_utf16_is_refused_by_the_parser_itself() -> None:
    data = _fixture("billion_laughs.xml").decode("utf-8").replace('"?>', '" encoding="utf-16"?>')
    with pytest.raises(SitemapError, match="DOCTYPE"):
        parse_sitemap(data.encode("utf-16"), CAP)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"<html><body>not a sitemap</body></html>", "root element is <html>"),
        (b"<urlset><url><loc>x</loc></urlset>", "malformed XML"),
    ],
)
def test_what_is_not_a_sitemap_is_an_error(data: bytes, message: str) -> None:
    with pytest.raises(SitemapError, match=message):
        parse_sitemap(data, CAP)
