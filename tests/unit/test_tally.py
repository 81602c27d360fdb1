"""A source's tally: what workers send, how tallies merge, and the stored report read back."""

from __future__ import annotations

from dataclasses import fields

from kbsync.model import ChangeKind, ChangeReport, Region, Verdict
from kbsync.report import SourceResult, SyncResult
from kbsync.sync import SourceTally
from kbsync.sync.tally import SyncReport


def _edit(similarity: float) -> ChangeReport:
    return ChangeReport(changed=True, similarity=similarity, added=(), removed=(), kept=0,
                        moved=0, regions=(Region(3, 5),), verdict=Verdict.REPROCESS,
                        removed_regions=(Region(1, 2),), kind=ChangeKind.SUBSTANTIVE,
                        reason="number 950 → 975")


def _tally(n: int) -> SourceTally:
    tally = SourceTally(source="docs")
    tally.documents["modified"] += n
    tally.chunks["added"] += 2 * n
    for f in fields(SourceTally):
        if f.type == "int":
            setattr(tally, f.name, n + len(f.name))
    tally.failures.append((f"bad-{n}.md", "cannot be read"))
    tally.warnings.append(f"warning {n}")
    tally.actions.append((f"doc-{n}.md", "modified", None))
    tally.unsupported.append(f"scan-{n}.png")
    tally.note_change(f"doc-{n}.md", _edit(0.5 + n / 10))
    return tally


def test_a_tally_comes_back_from_its_dict_as_it_was() -> None:
    tally = _tally(1)
    tally.listing_complete = False
    back = SourceTally.from_dict(tally.to_dict())
    assert back.to_dict() == tally.to_dict()
    assert back.result().to_dict() == tally.result().to_dict()
    change = back.changes["doc-1.md"]
    assert (change.kind, change.reason) == (ChangeKind.SUBSTANTIVE, "number 950 → 975")


def test_merging_adds_every_count_and_keeps_every_list() -> None:
    merged = _tally(1)
    merged.merge(_tally(2))
    result = merged.result()
    assert result.documents["modified"] == 3
    assert result.embeddings_computed == 3 + 2 * len("embeddings_computed")
    assert [k for k, _ in result.failures] == ["bad-1.md", "bad-2.md"]
    assert result.unsupported == ("scan-1.png", "scan-2.png")
    assert [c.key for c in result.changes] == ["doc-1.md", "doc-2.md"]
    assert all(c.change is not None for c in result.changes)


def test_a_stored_report_reads_back_as_the_result_it_was() -> None:
    site = _tally(4)
    site.revision, site.pages_checked = "abc123 2026-12-01", 7
    report = SyncReport(dry_run=False, started="2026-12-01T00:00:00+00:00",
                        finished="2026-12-01T00:00:01+00:00", embedder="hashing:x",
                        sources=[_tally(1), site], seconds={"read": 0.5})
    result = report.result()
    back = SyncResult.from_dict(result.to_dict())
    assert back.to_dict() == result.to_dict()
    assert back.sources == result.sources


def test_a_report_of_an_older_version_reads_its_missing_counts_as_zero() -> None:
    old = {"source": "docs", "documents": {"new": 2}, "chunks": {}, "bytes_read": 10,
           "failures": [{"key": "a.md", "message": "cannot be read"}], "changes": []}
    result = SourceResult.from_dict(old)
    assert (result.bytes_read, result.documents_applied, result.skipped_erased) == (10, 0, 0)
    assert result.failures == (("a.md", "cannot be read"),)
    assert result.listing_complete


def test_an_edit_in_the_report_names_the_regions_it_added_and_the_regions_it_removed() -> None:
    change = _tally(1).result().changes[0]
    data = change.to_dict()
    assert data["regions"] == [{"offset": 3, "length": 5}]
    assert data["removed_regions"] == [{"offset": 1, "length": 2}]
    back = type(change).from_dict(data).change
    assert back is not None
    assert back.removed_regions == (Region(1, 2),)
