"""WARC files written with warcio, scanned for their captures and read back by offset."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("warcio", reason="needs warcio (pip install 'kbsync[warc]')")

from kbsync.errors import DocumentError
from kbsync.model import SourceItem
from kbsync.sources.warc.captures import RecordKind
from kbsync.sources.warc.source import WarcSource
from tests.warc_files import WarcFile, page_html

DAY1 = "2024-01-01T00:00:00Z"
DAY2 = "2024-01-02T00:00:00Z"


def _three_pages(path: Path, *, gzipped: bool = True) -> list[bytes]:
    bodies = [page_html(f"Page {n}", f"About lighthouse number {n}.") for n in range(3)]
    with WarcFile(path, gzip=gzipped) as w:
        for n, body in enumerate(bodies):
            w.page(f"https://example.com/p{n}", body, DAY1)
    return bodies


def _read_all(source: WarcSource) -> dict[str, bytes]:
    return {item.key: source.read(item) for item in source.list().items}


@pytest.mark.parametrize("gzipped", [True, False], ids=["warc.gz", "warc"])
def test_every_page_is_read_back_from_its_own_offset(tmp_path: Path, gzipped: bool) -> None:
    path = tmp_path / ("crawl.warc.gz" if gzipped else "crawl.warc")
    bodies = _three_pages(path, gzipped=gzipped)
    source = WarcSource([str(path)])
    listing = source.list()
    assert listing.complete
    assert not listing.errors
    offsets = [int(dict(i.metadata)["warc_offset"]) for i in listing.items]
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 3
    assert _read_all(source) == {f"https://example.com/p{n}": b for n, b in enumerate(bodies)}
    assert {i.media_type for i in listing.items} == {"text/html; charset=utf-8"}
    assert {dict(i.metadata)["warc_file"] for i in listing.items} == {path.as_uri()}


def test_records_about_no_page_are_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    with WarcFile(path) as w:
        w.record("https://example.com/p", "request", b"GET /p HTTP/1.1\r\n\r\n", DAY1,
                 content_type="application/http; msgtype=request")
        w.record("https://example.com/p", "metadata", b"outlink: https://example.com/q\n",
                 DAY1, content_type="application/warc-fields")
        w.record("dns:example.com", "response", b"example.com. 300 IN A 127.0.0.1\n", DAY1,
                 content_type="text/dns")
        w.page("https://example.com/robots.txt", b"User-agent: *\nDisallow:\n", DAY1,
               content_type="text/plain")
        w.page("https://example.com/p", page_html("P", "The only page."), DAY1)
    listing = WarcSource([str(path)]).list()
    assert [i.key for i in listing.items] == ["https://example.com/p"]
    assert listing.complete
    assert not listing.warnings


def test_a_resource_record_is_a_page_with_the_records_content_type(tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    with WarcFile(path) as w:
        w.record("https://example.com/notes.txt", "resource", b"Plain notes on tides.", DAY1,
                 content_type="text/plain")
    source = WarcSource([str(path)])
    [item] = source.list().items
    assert item.media_type == "text/plain"
    assert source.read(item) == b"Plain notes on tides."


def test_a_malformed_record_of_a_gzip_warc_is_named_and_the_records_after_it_are_listed(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    bodies = _three_pages(path)
    second = int(dict(WarcSource([str(path)]).list().items[1].metadata)["warc_offset"])
    data = bytearray(path.read_bytes())
    data[second + 20:second + 40] = b"\x00" * 20  # inside the second gzip member
    path.write_bytes(bytes(data))
    source = WarcSource([str(path)])
    listing = source.list()
    assert not listing.complete
    [error] = listing.errors
    assert f"{path.as_uri()}: a malformed record at offset {second}" in error.message
    assert "\n" not in error.message
    assert _read_all(source) == {"https://example.com/p0": bodies[0],
                                 "https://example.com/p2": bodies[2]}


def test_a_wrong_content_length_in_a_plain_warc_distrusts_that_record_and_goes_on(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc"
    bodies = _three_pages(path, gzipped=False)
    data = path.read_bytes()
    start = data.index(b"Content-Length: ") + len(b"Content-Length: ")
    end = data.index(b"\r\n", start)
    longer = str(int(data[start:end]) + 150).encode()  # into the next record's header
    path.write_bytes(data[:start] + longer + data[end:])
    source = WarcSource([str(path)])
    listing = source.list()
    assert not listing.complete
    assert any("offset 0" in e.message for e in listing.errors)
    # p0 swallowed the start of p1; p2 is found again after them.
    assert _read_all(source) == {"https://example.com/p2": bodies[2]}


def test_a_header_block_without_type_or_length_does_not_hide_the_records_after_it(
        tmp_path: Path) -> None:
    """warcio reads such a block as one record running to the end of the file."""
    path = tmp_path / "crawl.warc"
    body = page_html("After", "The page after the broken block.")
    with WarcFile(path, gzip=False) as w:
        w.raw(b"WARC/1.0 but no header follows\r\n\r\nnor a record\r\n\r\n")
        w.page("https://example.com/after", body, DAY1)
    source = WarcSource([str(path)])
    listing = source.list()
    assert not listing.complete
    assert "a malformed record at offset 0" in listing.errors[0].message
    assert _read_all(source) == {"https://example.com/after": body}


@pytest.mark.parametrize("gzipped", [True, False], ids=["warc.gz", "warc"])
def test_a_file_that_ends_inside_a_record_makes_the_listing_incomplete(
        tmp_path: Path, gzipped: bool) -> None:
    path = tmp_path / ("crawl.warc.gz" if gzipped else "crawl.warc")
    _three_pages(path, gzipped=gzipped)
    path.write_bytes(path.read_bytes()[:-60])
    listing = WarcSource([str(path)]).list()
    assert not listing.complete
    assert [i.key for i in listing.items] == ["https://example.com/p0", "https://example.com/p1"]
    assert "ends inside the record" in listing.errors[0].message


def test_a_record_without_a_payload_digest_gets_the_one_a_writer_would_give(
        tmp_path: Path) -> None:
    with WarcFile(tmp_path / "with.warc.gz") as w:
        w.page("https://example.com/p", page_html("P", "Same bytes."), DAY1)
    with WarcFile(tmp_path / "without.warc.gz") as w:
        w.page("https://example.com/p", page_html("P", "Same bytes."), DAY1, digest=False)
    [given] = WarcSource([str(tmp_path / "with.warc.gz")]).list().items
    [computed] = WarcSource([str(tmp_path / "without.warc.gz")]).list().items
    assert given.stat == computed.stat


def test_a_gzip_encoded_payload_is_decoded_and_an_unknown_coding_is_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    body = page_html("Zipped", "A page sent compressed.")
    with WarcFile(path) as w:
        w.page("https://example.com/zipped", gzip.compress(body), DAY1,
               headers=[("Content-Encoding", "gzip")])
        w.page("https://example.com/odd", b"\x28\xb5\x2f\xfd", DAY1,
               headers=[("Content-Encoding", "zstd-unknown")])
    source = WarcSource([str(path)])
    odd, zipped = source.list().items
    assert source.read(zipped) == body
    with pytest.raises(DocumentError, match=r"unsupported Content-Encoding 'zstd-unknown'"):
        source.read(odd)


def test_a_payload_over_max_bytes_is_refused_naming_the_file_and_offset(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    _three_pages(path)
    source = WarcSource([str(path)], max_bytes=20)
    item = source.list().items[1]
    offset = dict(item.metadata)["warc_offset"]
    with pytest.raises(DocumentError) as caught:
        source.read(item)
    assert str(caught.value).startswith("https://example.com/p1: ")
    assert f"{path.as_uri()} at offset {offset}" in str(caught.value)
    assert "max_bytes" in str(caught.value)


def test_a_file_rewritten_since_the_listing_is_not_read_as_another_page(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    _three_pages(path)
    source = WarcSource([str(path)])
    item = source.list().items[0]
    _three_pages(path)  # the same pages again: new record ids at the same offsets
    with pytest.raises(DocumentError, match="is not there any more"):
        source.read(item)
    revisit_of_nothing = SourceItem(item.key, item.key, item.media_type, item.stat)
    with pytest.raises(DocumentError, match="no file of the source holds"):
        source.read(revisit_of_nothing)


def test_a_path_that_names_no_warc_file_makes_the_listing_incomplete(tmp_path: Path) -> None:
    (tmp_path / "crawl").mkdir()
    _three_pages(tmp_path / "crawl" / "a.warc.gz")
    listing = WarcSource([str(tmp_path / "crawl" / "*.warc.gz"),
                          str(tmp_path / "crawls" / "*.warc.gz"),
                          str(tmp_path / "missing.warc.gz")]).list()
    assert len(listing.items) == 3
    assert not listing.complete
    messages = [e.message for e in listing.errors]
    assert any(m.startswith(str(tmp_path / "crawls" / "*.warc.gz")) for m in messages)
    assert any(m.startswith(str(tmp_path / "missing.warc.gz")) for m in messages)
    assert all("nothing will be deleted" in m for m in messages)


def test_a_folder_is_searched_for_warc_files_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "crawl" / "2024" / "01").mkdir(parents=True)
    _three_pages(tmp_path / "crawl" / "2024" / "01" / "a.warc.gz")
    (tmp_path / "crawl" / "a.warc.gz.open").write_bytes(b"being written")
    (tmp_path / "crawl" / "index.cdx").write_text("not a WARC file")
    source = WarcSource([str(tmp_path / "crawl")])
    assert [Path(f).name for f in source.shards().files] == ["a.warc.gz"]
    assert len(source.list().items) == 3


def test_a_target_that_is_not_a_valid_url_is_a_warning_naming_the_file(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    with WarcFile(path) as w:
        w.page("https://example.com:99999/p", page_html("P", "Broken port."), DAY1)
        w.page("https://example.com/q", page_html("Q", "Good address."), DAY1)
    listing = WarcSource([str(path)]).list()
    assert [i.key for i in listing.items] == ["https://example.com/q"]
    assert listing.complete
    [warning] = listing.warnings
    assert path.as_uri() in warning
    assert "'https://example.com:99999/p'" in warning


def test_a_record_with_no_valid_date_leaves_the_decision_to_an_earlier_capture(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.warc.gz"
    with WarcFile(path) as w:
        w.page("https://example.com/p", page_html("P", "First."), DAY1)
        w.page("https://example.com/p", page_html("P", "Undated."), "yesterday")
    source = WarcSource([str(path)])
    [item] = source.list().items
    assert b"First." in source.read(item)
    shard = source.scan_shard(source.shards().files[0])
    assert [c.kind for c in shard.captures] == [RecordKind.RESPONSE, RecordKind.UNUSABLE]
    assert "no valid WARC-Date" in shard.captures[1].note


def test_warc_files_on_an_fsspec_filesystem_are_listed_and_read() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = f"/warc-test-{os.getpid()}"
    body = page_html("Remote", "A page in a bucket.")
    try:
        with fs.open(f"{root}/crawl/a.warc.gz", "wb") as stream, WarcFile(stream=stream) as w:
            w.page("https://example.com/remote", body, DAY2)
        source = WarcSource([f"memory://{root}/crawl/*.warc.gz"])
        [item] = source.list().items
        assert dict(item.metadata)["warc_file"] == f"memory://{root}/crawl/a.warc.gz"
        assert source.read(item) == body
    finally:
        fs.rm(root, recursive=True)
