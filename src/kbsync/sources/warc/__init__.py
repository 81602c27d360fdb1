"""WARC files as a source: a crawl made by another crawler, synced by its records.

The modules, each holding one concern:

- :mod:`.settings`: the ``[[sources]]`` table of a ``warc`` source, typed and checked;
- :mod:`.captures`: what a record says about a page (:class:`~.captures.Capture`) and the
  merge of every capture into a listing (which capture wins, what deletes): pure;
- :mod:`.records`: reading WARC files (``warcio``): the captures of one file, and the
  payload of one record found again by its offset;
- :mod:`.index`: each file's scan kept between listings, so an unchanged file is not
  scanned again;
- :mod:`.source`: :class:`WarcSource`, the Source protocol over a set of WARC files,
  split by file (:meth:`~.source.WarcSource.shards`) for drivers that spread the work.

Reading needs the ``warc`` extra (warcio, fsspec), imported with :class:`WarcSource`;
the settings do not. The rules are in ``docs/warc.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbsync.sources.warc.settings import WarcSettings
    from kbsync.sources.warc.source import WarcSource

__all__ = ["WarcSettings", "WarcSource"]


def __getattr__(name: str) -> object:
    """The WARC source's names, imported when first asked for: its settings need no extra,
    so ``kbsync.toml`` is checked without the ``warc`` extra installed."""
    if name == "WarcSettings":
        from kbsync.sources.warc.settings import WarcSettings

        return WarcSettings
    if name == "WarcSource":
        from kbsync.sources.warc.source import WarcSource  # needs the `warc` extra

        return WarcSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
