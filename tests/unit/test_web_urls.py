from __future__ import annotations

import pytest

from kbsync.sources.web.urls import Scope, UrlError, canonicalize, origin_of, parse_ipv4

CANONICAL = [
    # scheme and host lower-cased, default port and fragment dropped, empty path is "/"
    ("HTTP://Example.COM", "http://example.com/"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    ("http://example.com/a#section", "http://example.com/a"),
    ("http://example.com./a", "http://example.com/a"),
    ("http://user:secret@example.com/a", "http://example.com/a"),
    # path: case and trailing slash kept, dot segments removed
    ("http://example.com/A/B/", "http://example.com/A/B/"),
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/../a", "http://example.com/a"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    # percent-encoding: unreserved decoded, others upper-cased, unsafe escaped
    ("http://example.com/%7euser/%61", "http://example.com/~user/a"),
    ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/café", "http://example.com/caf%C3%A9"),
    ("http://example.com/100%", "http://example.com/100%25"),
    # query: sorted by name (stable), tracking parameters dropped, empty dropped
    ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
    ("http://example.com/?a=2&a=1", "http://example.com/?a=2&a=1"),
    ("http://example.com/?utm_source=x&id=3&UTM_Medium=y", "http://example.com/?id=3"),
    ("http://example.com/?gclid=1&fbclid=2&msclkid=3", "http://example.com/"),
    ("http://example.com/?", "http://example.com/"),
    ("http://example.com/?q=a+b&x=%7e", "http://example.com/?q=a+b&x=~"),
    ("http://example.com/?flag", "http://example.com/?flag"),
    # hosts: IDNA, numeric IPv4 spellings, IPv6 compression
    ("http://bücher.example/", "http://xn--bcher-kva.example/"),
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://%31%32%37.0.0.1/", "http://127.0.0.1/"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/"),
    ("http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
    # whitespace and control characters browsers strip
    ("  http://example.com/a\n\tb  ", "http://example.com/ab"),
]


@pytest.mark.parametrize(("raw", "canonical"), CANONICAL)
def test_urls_canonicalize_to_one_spelling(raw: str, canonical: str) -> None:
    assert canonicalize(raw) == canonical


@pytest.mark.parametrize(("raw", "canonical"), CANONICAL)
def test_canonicalization_is_idempotent(raw: str, canonical: str) -> None:
    assert canonicalize(canonical) == canonical


def test_relative_links_resolve_against_the_page() -> None:
    base = "http://example.com/docs/a/page.html"
    assert canonicalize("other.html", base=base) == "http://example.com/docs/a/other.html"
    assert canonicalize("../b/", base=base) == "http://example.com/docs/b/"
    assert canonicalize("/root", base=base) == "http://example.com/root"
    assert canonicalize("//other.org/x", base=base) == "http://other.org/x"
    assert canonicalize("?page=2", base=base) == "http://example.com/docs/a/page.html?page=2"


@pytest.mark.parametrize(
    "bad",
    [
        "ftp://example.com/",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "http:///nohost",
        "http://example.com:99999/",
        "http://exa mple.com/",
        "http://1.2.3.256/",
        "http://1.2.3.4.5/",
        "http://0x100000000/",
        "http://[fe80::1%25eth0]/",
        "not a url",
    ],
)
def test_what_is_not_a_fetchable_http_url_is_refused(bad: str) -> None:
    with pytest.raises(UrlError):
        canonicalize(bad)


def test_the_ipv4_parser_accepts_every_inet_aton_form_and_leaves_names_alone() -> None:
    assert str(parse_ipv4("2130706433")) == "127.0.0.1"
    assert str(parse_ipv4("0x7f000001")) == "127.0.0.1"
    assert str(parse_ipv4("10.1")) == "10.0.0.1"
    assert str(parse_ipv4("192.168.257")) == "192.168.1.1"
    assert parse_ipv4("example.com") is None
    assert parse_ipv4("1.2.3.example") is None


def test_the_scope_checks_host_and_path_prefix() -> None:
    scope = Scope.build(["Example.com", "*.docs.example.org"], ["/guide/"])
    assert scope.contains("http://example.com/guide/intro")
    assert scope.contains("https://example.com:8443/guide/")
    assert not scope.contains("http://example.com/blog/")
    assert not scope.contains("http://other.com/guide/")
    assert scope.contains("http://a.docs.example.org/guide/x")
    assert not scope.contains("http://docs.example.org/guide/x")


def test_a_path_prefix_must_be_absolute() -> None:
    with pytest.raises(UrlError):
        Scope.build(["example.com"], ["guide/"])


def test_the_origin_keeps_scheme_host_and_port() -> None:
    assert origin_of("https://example.com:8443/a?b") == "https://example.com:8443"
    assert origin_of("http://example.com/") == "http://example.com"
