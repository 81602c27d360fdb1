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

Needs the ``web`` extra (httpx, protego; brotli for ``br`` bodies).
"""

from __future__ import annotations

from kbsync.errors import DependencyMissingError

try:
    import httpx  # noqa: F401
    import protego  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise DependencyMissingError("The web source", "web", exc.name or "httpx", exc) from exc

from kbsync.sources.web.config import WebSettings
from kbsync.sources.web.source import WebSource

__all__ = ["WebSettings", "WebSource"]
