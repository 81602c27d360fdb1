from __future__ import annotations

import pytest

from kbsync.sources.web.robots import (
    MAX_CRAWL_DELAY,
    RobotsCache,
    RobotsPolicy,
    RobotsState,
    product_token,
)

RULES = b"""\
User-agent: kbsync
Disallow: /private/
Crawl-delay: 0.5

User-agent: *
Disallow: /

Sitemap: https://example.com/sitemap.xml
"""


def test_rules_for_kbsync_s_product_token_apply() -> None:
    policy = RobotsPolicy.from_response(200, RULES)
    assert policy.state is RobotsState.RULES
    assert policy.allows("https://example.com/docs/a", "kbsync")
    assert not policy.allows("https://example.com/private/x", "kbsync")
    assert not policy.allows("https://example.com/docs/a", "otherbot")
    assert policy.crawl_delay("kbsync") == 0.5
    assert policy.sitemaps == ("https://example.com/sitemap.xml",)


def test_the_product_token_is_the_first_word_of_the_user_agent() -> None:
    assert product_token("kbsync/0.1 (+https://github.com/kbsync)") == "kbsync"
    assert product_token("MyBot") == "MyBot"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_a_4xx_robots_txt_means_everything_is_allowed(status: int) -> None:
    policy = RobotsPolicy.from_response(status, b"User-agent: *\nDisallow: /\n")
    assert policy.state is RobotsState.ALLOW_ALL
    assert policy.allows("https://example.com/anything", "kbsync")


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_5xx_or_429_robots_txt_means_nothing_is_fetched(status: int) -> None:
    policy = RobotsPolicy.from_response(status, b"")
    assert policy.state is RobotsState.UNREACHABLE
    assert not policy.allows("https://example.com/", "kbsync")
    assert f"HTTP {status}" in policy.reason


def test_a_huge_crawl_delay_is_capped() -> None:
    policy = RobotsPolicy.from_response(200, b"User-agent: *\nCrawl-delay: 86400\n")
    assert policy.crawl_delay("kbsync") == MAX_CRAWL_DELAY


def test_the_cache_keeps_a_policy_at_most_max_age_and_forgets_failures() -> None:
    cache = RobotsCache(max_age=100.0)
    rules = RobotsPolicy.allow_all("HTTP 404")
    down = RobotsPolicy.unreachable("HTTP 503")
    cache.put("https://a.example", rules, now=0.0)
    cache.put("https://b.example", down, now=0.0)
    assert cache.get("https://a.example", now=50.0) is rules
    assert cache.get("https://b.example", now=50.0) is down
    cache.forget_failures()
    assert cache.get("https://b.example", now=50.0) is None
    assert cache.get("https://a.example", now=101.0) is None
