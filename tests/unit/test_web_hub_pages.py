"""Hub pages (a short intro and a list of links): the list is part of the page's text."""

from __future__ import annotations

import pytest

pytest.importorskip("trafilatura")

from kbsync.extract.html import HtmlExtractor

INTRO = ("Welcome to the harbour news, where the harbour office writes what happens on the "
         "quay, week by week, for the boats and the people who live by the water. ")
POSTS = ["The ferry timetable changes in June", "A storm closed the pier on Monday",
         "New lights for the breakwater", "The fish market moves to the east quay"]
MENU = '<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About</a></li></ul></nav>'
FOOTER = ('<footer><ul><li><a href="/privacy">Privacy</a></li><li><a href="/terms">Terms</a>'
          '</li><li><a href="/contact">Contact us</a></li></ul></footer>')


def _links(titles: list[str]) -> str:
    return "".join(f'<li><a href="/posts/{i}">{t}</a></li>' for i, t in enumerate(titles))


def _page(body: str) -> bytes:
    return (f"<html><head><title>Harbour news</title></head><body><header>{MENU}</header>"
            f"<main>{body}</main>{FOOTER}</body></html>").encode()


def _hub(titles: list[str], intro: int = 1) -> bytes:
    return _page(f"<h1>Harbour news</h1><p>{INTRO * intro}</p><h2>Latest posts</h2>"
                 f"<ul>{_links(titles)}</ul>")


def _text(data: bytes) -> str:
    record = HtmlExtractor().extract(data, locator="https://news.example/", media_type="text/html")
    return record.text


@pytest.mark.parametrize("intro", [1, 3])
def test_a_hub_page_keeps_its_list_of_links_in_its_text(intro: int) -> None:
    text = _text(_hub(POSTS, intro))
    assert "Welcome to the harbour news" in text
    assert "Latest posts" in text
    for title in POSTS:
        assert title in text
    for chrome in ("Home", "About", "Privacy", "Contact us"):
        assert chrome not in text


def test_a_new_post_on_a_hub_page_changes_its_text() -> None:
    before = _text(_hub(POSTS))
    after = _text(_hub(["The summer regatta is on Saturday", *POSTS[:3]]))
    assert before != after
    assert "The summer regatta is on Saturday" in after


def test_the_related_posts_of_a_long_article_stay_out_of_its_text() -> None:
    article = "".join(
        f"<p>Paragraph {i}: the keeper climbs the stairs of the lighthouse every evening, "
        "trims the wick, cleans the lens and writes the weather in the log book.</p>"
        for i in range(12)
    )

    def page(related: list[str]) -> bytes:
        return _page(f"<article><h1>The keeper</h1>{article}</article>"
                     f"<h2>Related posts</h2><ul>{_links(related)}</ul>")

    first, second = _text(page(POSTS)), _text(page(list(reversed(POSTS))))
    assert "the keeper climbs the stairs" in first
    assert first == second
    assert POSTS[0] not in first
