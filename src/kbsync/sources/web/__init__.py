"""Websites as a source: crawl seeds and sitemaps politely, revalidate cheaply, delete carefully.

The modules, each holding one concern:

- :mod:`.urls`: canonical URLs (the keys) and the scope;
- :mod:`.addresses`: the guard against local, private and metadata addresses;
- :mod:`.robots`: robots.txt rules, their cache and Crawl-delay;
- :mod:`.sitemaps`: sitemap and sitemap-index parsing;
- :mod:`.decoding`: Content-Encoding decoders with a size cap;
- :mod:`.politeness`: per-host connection limits and request spacing;
- :mod:`.fetch`: one request: deadline, redirects, caps, Retry-After;
- :mod:`.links`: links and visible text of HTML pages;
- :mod:`.soft404`: pages that say "not found" with a 200;
- :mod:`.crawler`: the crawl and what each answer means for the listing;
- :mod:`.source`: :class:`WebSource`, the Source protocol over a crawl.

The crawl needs the ``web`` extra (httpx, protego; brotli for ``br`` bodies), imported
with :class:`WebSource`; the settings do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsync.sources.web.config import WebSettings
    from kbsync.sources.web.source import WebSource

__all__ = ["WebSettings", "WebSource"]


def __getattr__(name: str) -> object:
    """The web source's names, imported when first asked for: its settings need no extra,
    so ``kbsync.toml`` is checked without the ``web`` extra installed."""
    if name == "WebSettings":
        from kbsync.sources.web.config import WebSettings

        return WebSettings
    if name == "WebSource":
        from kbsync.sources.web.source import WebSource  # needs the `web` extra

        return WebSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
