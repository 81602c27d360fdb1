"""A source held in memory: documents set, changed and removed by the test."""

from __future__ import annotations

from collections.abc import Mapping

from kbsync.core.identity import source_bytes_hash
from kbsync.errors import DocumentError
from kbsync.model import ItemError, KnownItem, Listing, SourceItem, SourceStat, Validators

__all__ = ["MemorySource"]


class MemorySource:
    """A source whose documents live in a dict of key -> bytes (or None to fail reading).

    The stat of a document is derived from its content, so an edit changes it
    and an unchanged document keeps it; ``complete=False`` simulates a partial listing.
    ``renames`` (new key to old key) are listed as ``renamed_from``, as git names renames.
    """

    def __init__(self, documents: Mapping[str, bytes | None] | None = None,
                 name: str = "memory", media_type: str = "text/plain", *,
                 http: bool = False) -> None:
        self.documents: dict[str, bytes | None] = dict(documents or {})
        self._name = name
        self.media_type = media_type
        self.complete = True
        self.http = http
        self.errors: dict[str, ItemError] = {}
        self.renames: dict[str, str] = {}
        self.reads: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def list(self, known: Mapping[str, KnownItem] | None = None) -> Listing:
        """Items with a content-derived stat; with ``http=True``, ETags and 304 answers instead."""
        known = known or {}
        items = []
        for key, data in sorted(self.documents.items()):
            if key in self.errors:
                continue
            payload = data or b""
            tag = source_bytes_hash(payload)[:12]
            if self.http:
                validators = Validators(etag=f'"{tag}"')
                seen = known.get(key)
                items.append(SourceItem(key, f"memory:{key}", self.media_type, None, validators,
                                        not_modified=seen is not None
                                        and seen.validators == validators,
                                        renamed_from=self.renames.get(key)))
            else:
                items.append(SourceItem(key, f"memory:{key}", self.media_type,
                                        SourceStat(len(payload), int(tag, 16), 1),
                                        renamed_from=self.renames.get(key)))
        return Listing(tuple(items), complete=self.complete, errors=tuple(self.errors.values()))

    def read(self, item: SourceItem) -> bytes:
        self.reads.append(item.key)
        data = self.documents.get(item.key)
        if data is None:
            raise DocumentError(item.locator, "cannot be read (simulated)")
        return data
