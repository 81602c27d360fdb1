"""The merge of a crawl's captures into a listing: which capture wins and what deletes."""

from __future__ import annotations

from kbsync.core.identity import payload_signature
from kbsync.model import ItemError, KnownItem, Listing, SourceItem, SourceStat
from kbsync.sources.warc.captures import Capture, RecordKind, ShardScan, merge, warc_time

URL = "https://example.com/p"
DAY = 86_400 * 1_000_000_000
HTML = frozenset({"text/html"})


def _page(day: int, digest: str = "sha1:A", *, key: str = URL, file: str = "a.warc.gz",
          offset: int = 0, status: int = 200, media: str = "text/html") -> Capture:
    return Capture(key, day * DAY, file, offset, RecordKind.RESPONSE, status,
                   f"<urn:{file}:{offset}>", media, digest, 100)


def _revisit(day: int, digest: str = "", *, status: int = 200, refers_day: int = 0,
             file: str = "b.warc.gz", media: str = "text/html") -> Capture:
    return Capture(URL, day * DAY, file, 0, RecordKind.REVISIT, status, "<urn:revisit>",
                   media, digest, 0, refers_to=URL if refers_day else "",
                   refers_date=refers_day * DAY)


def _merge(*captures: Capture, stored: bool = False, stat: SourceStat | None = None,
           failures: tuple[str, ...] = ()) -> Listing:
    known = {URL: KnownItem(URL, stat)} if stored else {}
    return merge([ShardScan("a.warc.gz", captures)], known, HTML, failures)


def _only(listing: Listing) -> SourceItem | ItemError | None:
    assert len(listing.items) + len(listing.errors) <= 1
    return (listing.items or listing.errors or (None,))[0]


def _offset(outcome: SourceItem | ItemError | None) -> int:
    assert isinstance(outcome, SourceItem)
    return int(dict(outcome.metadata)["warc_offset"])


def test_the_latest_capture_wins_by_date_whatever_the_order_of_the_files() -> None:
    later = _page(2, "sha1:B", file="a.warc.gz", offset=7)
    earlier = _page(1, "sha1:A", file="z.warc.gz", offset=9)
    listing = merge([ShardScan("z.warc.gz", (earlier,)), ShardScan("a.warc.gz", (later,))])
    [item] = listing.items
    assert _offset(item) == 7
    assert item.stat == SourceStat(100, 0, payload_signature("sha1:B"))
    assert dict(item.metadata)["warc_date"] == "1970-01-03T00:00:00Z"


def test_a_failed_capture_leaves_the_page_to_the_latest_capture_before_it() -> None:
    for status in (500, 503, 429, 403, 302, 307, 206):
        assert _offset(_only(_merge(_page(1, offset=3), _page(2, offset=9, status=status)))) == 3


def test_a_410_or_a_permanent_redirect_deletes_the_page() -> None:
    for status in (410, 301, 308):
        assert _merge(_page(1), _page(2, status=status), stored=True) == Listing(items=())


def test_a_lone_404_keeps_a_stored_page_until_a_later_capture_confirms_it() -> None:
    lone = _only(_merge(_page(1), _page(2, status=404), stored=True))
    assert isinstance(lone, ItemError)
    assert lone.missing
    assert "HTTP 404" in lone.message
    assert "a.warc.gz" in lone.message
    assert _only(_merge(_page(1), _page(2, status=404))) is None  # never stored: absent
    confirmed = _merge(_page(1), _page(2, status=404), _page(3, status=404), stored=True)
    assert confirmed == Listing(items=())


def test_a_page_answered_again_after_a_404_is_listed() -> None:
    assert _offset(_only(_merge(_page(1, status=404), _page(2, offset=5)))) == 5


def test_a_revisit_reads_the_payload_of_the_capture_with_its_digest() -> None:
    original = _page(1, "sha1:A", offset=11)
    other = _page(2, "sha1:B", offset=22)
    item = _only(_merge(original, other, _revisit(3, "sha1:A")))
    assert _offset(item) == 11
    assert isinstance(item, SourceItem)
    assert item.stat == SourceStat(100, 0, payload_signature("sha1:A"))


def test_a_revisit_finds_a_payload_another_url_holds() -> None:
    elsewhere = _page(1, "sha1:A", key="https://example.com/mirror", offset=44)
    listing = _merge(elsewhere, _revisit(2, "sha1:A"))
    assert [_offset(i) for i in listing.items] == [44, 44]


def test_a_not_modified_answer_reads_the_capture_it_refers_to() -> None:
    first, second = _page(1, "sha1:A", offset=1), _page(2, "sha1:B", offset=2)
    assert _offset(_only(_merge(first, second, _revisit(3, status=304, refers_day=1)))) == 1
    assert _offset(_only(_merge(first, second, _revisit(3, status=304)))) == 2
    assert _offset(_only(_merge(first, second, _page(3, "", status=304)))) == 2


def test_a_revisit_of_a_payload_no_file_holds_is_unchanged_only_if_stored_alike() -> None:
    stat = SourceStat(100, 0, payload_signature("sha1:A"))
    same = _only(_merge(_revisit(3, "sha1:A"), stored=True, stat=stat))
    assert isinstance(same, SourceItem)
    assert same.stat == stat
    assert not same.metadata
    other = _only(_merge(_revisit(3, "sha1:C"), stored=True, stat=stat))
    assert isinstance(other, ItemError)
    assert not other.missing
    assert "no file of the source holds" in other.message
    assert _only(_merge(_revisit(3, "sha1:A"))) is None
    untyped = _only(_merge(_revisit(3, "sha1:A", media=""), stored=True, stat=stat))
    assert isinstance(untyped, ItemError)  # its type unknown: kept, not guessed away


def test_a_page_of_a_type_outside_media_types_is_absent() -> None:
    assert _only(_merge(_page(1), _page(2, "sha1:B", media="image/png"), stored=True)) is None
    item = _only(_merge(_page(1, media="text/html; charset=iso-8859-1")))
    assert isinstance(item, SourceItem)
    assert item.media_type == "text/html; charset=iso-8859-1"


def test_a_stored_page_no_capture_decides_is_kept_with_the_reason() -> None:
    unusable = Capture(URL, 2 * DAY, "a.warc.gz", 5, RecordKind.UNUSABLE,
                       note="has no valid WARC-Date")
    kept = _only(_merge(_page(1, status=503), unusable, stored=True))
    assert isinstance(kept, ItemError)
    assert not kept.missing
    assert "has no valid WARC-Date" in kept.message
    assert "stored version is kept" in kept.message
    assert _only(_merge(_page(1, status=503), unusable)) is None
    assert _offset(_only(_merge(_page(1, offset=3), unusable))) == 3


def test_a_file_that_failed_makes_the_listing_incomplete_and_keeps_the_pages_read() -> None:
    broken = ShardScan("b.warc.gz", (_page(1, offset=4, file="b.warc.gz"),),
                       errors=("b.warc.gz: a malformed record at offset 90",))
    listing = merge([broken])
    assert not listing.complete
    assert [_offset(i) for i in listing.items] == [4]
    assert not merge([], failures=("crawl/*.warc.gz: no WARC file is there",)).complete


def test_capture_times_print_as_utc_iso_8601() -> None:
    assert warc_time(0) == "1970-01-01T00:00:00Z"
    assert warc_time(DAY + 500_000_000) == "1970-01-02T00:00:00.5Z"
