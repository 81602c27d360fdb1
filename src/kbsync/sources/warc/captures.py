"""What one WARC record says about a page, and the merge of every capture into a listing.

No I/O: the captures of each file (:mod:`.records` reads them) and what the store
knows go in, a :class:`~kbsync.model.Listing` comes out. A page is what its latest
*decisive* capture says, by ``WARC-Date`` (then the file's name, then the offset):

==========================================  ==============================================
latest decisive capture                     in the listing
==========================================  ==============================================
``response``/``resource``, HTTP 200 or 203  an item: the payload of that record
``revisit``, or a ``response`` with a 304   an item: the payload of the capture it refers
                                            to (by payload digest; without one, the
                                            ``WARC-Refers-To`` capture, else the latest
                                            earlier page of the URL)
410, 301, 308                               absent: deleted
404 after a 404 or 410                      absent: deleted (a second check confirms it)
a lone 404                                  ``ItemError(missing=True)`` for a stored page
                                            (kept); absent for one never stored
a type outside ``media_types``              absent
==========================================  ==============================================

Not decisive, so an earlier capture decides: 5xx, 429, 401, 403, the temporary
redirects 302, 303 and 307, any other status, and a record that could not be used.
When no capture of a URL decides, a stored page is kept (an ``ItemError`` saying why)
and one never stored stays absent. A revisit whose payload no file holds lists a
stored page unchanged when its digest is the stored one, and is kept otherwise.

The stat gate compares ``SourceStat(payload size, 0, payload_signature(digest))``: the
same payload in a later capture (a revisit, a new crawl) passes unread. The item's
``metadata`` says where the payload is (``warc_file``, ``warc_offset``,
``warc_record_id``, ``warc_date``), so :meth:`~.source.WarcSource.read` seeks to it
without scanning again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from urllib.parse import urlsplit

from kbsync.core.identity import payload_signature
from kbsync.core.media import media_type_for
from kbsync.model import ItemError, KnownItem, Listing, SourceItem, SourceStat, Validators

__all__ = ["Capture", "RecordKind", "ShardScan", "merge", "warc_time"]

_PAGE = frozenset({200, 203})
# A revisit's own HTTP status when it says "the same payload as before".
_REVISIT = frozenset({0, 200, 203, 304})
_DELETED = frozenset({410, 301, 308})
_NOT_FOUND = 404


class RecordKind(StrEnum):
    """The records that say something about a page."""

    RESPONSE = "response"
    RESOURCE = "resource"
    """A document stored without HTTP headers: a 200 with the record's Content-Type."""
    REVISIT = "revisit"
    UNUSABLE = "unusable"
    """A record of the URL that could not be read as a capture (``note`` says why)."""


@dataclass(frozen=True, slots=True)
class Capture:
    """One record about one page: where it is and what it answered, not its payload.

    ``key`` is the canonical URL; ``date`` the ``WARC-Date`` in nanoseconds since the
    epoch; ``offset`` the record's (its gzip member's) in ``file``, a URL. ``status``
    is the HTTP status (200 for a resource). ``digest`` is the payload's
    (``WARC-Payload-Digest``, else computed), ``size`` its length as stored.
    A revisit's ``refers_to`` and ``refers_date`` are its ``WARC-Refers-To-Target-URI``
    (canonical) and ``WARC-Refers-To-Date``, when it has them.
    """

    key: str
    date: int
    file: str
    offset: int
    kind: RecordKind
    status: int = 0
    record_id: str = ""
    media_type: str = ""
    digest: str = ""
    size: int = 0
    etag: str | None = None
    last_modified: str | None = None
    refers_to: str = ""
    refers_date: int = 0
    note: str = ""

    @property
    def order(self) -> tuple[int, str, int]:
        """Later captures sort later: by date, then by file name and offset."""
        return self.date, self.file, self.offset

    @property
    def is_page(self) -> bool:
        """A response or resource with a page's status and a known payload."""
        return (self.kind in (RecordKind.RESPONSE, RecordKind.RESOURCE)
                and self.status in _PAGE and bool(self.digest))

    @property
    def is_revisit(self) -> bool:
        """A revisit of the same payload, or a response that says 304 Not Modified."""
        return ((self.kind is RecordKind.REVISIT and self.status in _REVISIT)
                or (self.kind is RecordKind.RESPONSE and self.status == 304))

    def where(self) -> str:
        """The capture in a few words, for messages."""
        return f"the capture of {warc_time(self.date)} in {self.file} at offset {self.offset}"


@dataclass(frozen=True, slots=True)
class ShardScan:
    """The captures of one WARC file, and what went wrong reading it.

    An error means a record may be missing (a malformed or truncated record, an
    unreadable file): the listing is then incomplete, so nothing is deleted.
    """

    file: str
    captures: tuple[Capture, ...] = ()
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def warc_time(nanoseconds: int) -> str:
    """A capture's date as ISO 8601 in UTC (``2024-05-01T12:00:00Z``)."""
    when = datetime.fromtimestamp(nanoseconds // 1_000_000_000, UTC)
    fraction = nanoseconds % 1_000_000_000
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{fraction:09d}".rstrip("0") + "Z" if fraction else text + "Z"


def merge(scans: Iterable[ShardScan], known: Mapping[str, KnownItem] | None = None,
          media_types: frozenset[str] | None = None, failures: Sequence[str] = ()) -> Listing:
    """Every file's captures as one listing: the latest decisive capture of each page.

    ``known`` is what the store holds (a ``pending`` entry is not stored);
    ``failures`` are paths that could not be listed. Any failure or file error
    makes the listing incomplete.
    """
    known = known or {}
    by_key: dict[str, list[Capture]] = defaultdict(list)
    errors = [ItemError("", message) for message in failures]
    warnings: list[str] = []
    for scan in scans:
        for capture in scan.captures:
            by_key[capture.key].append(capture)
        errors += (ItemError("", message) for message in scan.errors)
        warnings += scan.warnings
    payloads: dict[str, Capture] = {}  # digest -> the latest page with that payload
    for captures in by_key.values():
        captures.sort(key=lambda c: c.order)
        for capture in captures:
            held = payloads.get(capture.digest)
            if capture.is_page and (held is None or held.order < capture.order):
                payloads[capture.digest] = capture
    items: list[SourceItem] = []
    for key in sorted(by_key):
        stored = known.get(key)
        outcome = _decide(by_key[key], payloads, media_types,
                          None if stored is None or stored.pending else stored)
        if isinstance(outcome, SourceItem):
            items.append(outcome)
        elif outcome is not None:
            errors.append(outcome)
    return Listing(items=tuple(items), complete=not any(not e.key for e in errors),
                   errors=tuple(errors), warnings=tuple(warnings))


def _decide(captures: Sequence[Capture], payloads: Mapping[str, Capture],
            media_types: frozenset[str] | None,
            stored: KnownItem | None) -> SourceItem | ItemError | None:
    """What the captures of one page (oldest first) make of it; see the module docstring."""
    for i in range(len(captures) - 1, -1, -1):
        capture = captures[i]
        if capture.is_page:
            return _page(capture, capture, media_types)
        if capture.is_revisit:
            original = _original(capture, captures[:i], payloads)
            if original is not None:
                return _page(capture, original, media_types)
            return _unresolved(capture, media_types, stored)
        if capture.kind is RecordKind.UNUSABLE:
            continue
        if capture.status in _DELETED:
            return None
        if capture.status == _NOT_FOUND:
            before = captures[i - 1] if i else None
            if before is not None and before.kind is not RecordKind.UNUSABLE and (
                    before.status == _NOT_FOUND or before.status in _DELETED):
                return None
            if stored is None:
                return None
            return ItemError(capture.key, f"HTTP 404 in {capture.where()}; deleted when a "
                                          "later capture confirms it", missing=True)
    if stored is None:
        return None
    latest = captures[-1]
    why = latest.note or f"answered HTTP {latest.status}"
    return ItemError(latest.key, f"{latest.where()} {why}, and no earlier capture in the "
                                 "source's files is a page; the stored version is kept")


def _original(revisit: Capture, earlier: Sequence[Capture],
              payloads: Mapping[str, Capture]) -> Capture | None:
    """The page whose payload a revisit repeats: by digest (the same URL's first), else
    by ``WARC-Refers-To``, else the latest earlier page of the same URL."""
    if revisit.digest:
        for capture in reversed(earlier):
            if capture.is_page and capture.digest == revisit.digest:
                return capture
        return payloads.get(revisit.digest)
    if revisit.refers_date and (not revisit.refers_to or revisit.refers_to == revisit.key):
        for capture in reversed(earlier):
            if capture.is_page and capture.date == revisit.refers_date:
                return capture
    return next((c for c in reversed(earlier) if c.is_page), None)


def _unresolved(revisit: Capture, media_types: frozenset[str] | None,
                stored: KnownItem | None) -> SourceItem | ItemError | None:
    """A revisit whose payload no file holds: unchanged if its digest is the stored one."""
    if stored is None:
        return None
    stat = stored.stat
    # Without its Content-Type the type is unknown (a guess by the path could drop it).
    if revisit.digest and revisit.media_type and stat is not None \
            and stat.inode == payload_signature(revisit.digest):
        if not _accepted(revisit.media_type, media_types):
            return None
        return SourceItem(revisit.key, revisit.key, revisit.media_type, stat,
                          _validators(revisit, revisit))
    return ItemError(revisit.key, f"{revisit.where()} is a revisit of a capture that no "
                                  "file of the source holds; the stored version is kept")


def _page(decider: Capture, original: Capture,
          media_types: frozenset[str] | None) -> SourceItem | None:
    """The item of a page whose latest decisive capture is ``decider`` and whose payload is
    that of ``original`` (the same capture unless ``decider`` is a revisit)."""
    media_type = _media_type(decider, original)
    if not _accepted(media_type, media_types):
        return None
    metadata = (("warc_date", warc_time(original.date)), ("warc_file", original.file),
                ("warc_offset", str(original.offset)), ("warc_record_id", original.record_id))
    return SourceItem(decider.key, decider.key, media_type,
                      SourceStat(original.size, 0, payload_signature(original.digest)),
                      _validators(decider, original), metadata=metadata)


def _media_type(decider: Capture, original: Capture) -> str:
    """The Content-Type the latest answer gave, else the original's, else by the path."""
    return (decider.media_type or original.media_type
            or media_type_for(urlsplit(decider.key).path))


def _accepted(media_type: str, media_types: frozenset[str] | None) -> bool:
    return media_types is None or media_type.split(";", 1)[0].strip() in media_types


def _validators(decider: Capture, original: Capture) -> Validators | None:
    """The ETag and Last-Modified of the latest answer that has any."""
    for capture in (decider, original):
        if capture.etag is not None or capture.last_modified is not None:
            return Validators(capture.etag, capture.last_modified)
    return None
