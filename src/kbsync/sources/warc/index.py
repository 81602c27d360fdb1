"""The captures of each WARC file kept between syncs, so an unchanged file is not scanned again.

A WARC file does not change once its crawler closed it, so its scan is kept in a
folder (the knowledge base's ``.kbsync/warc-index/``), one JSON file per WARC
file, under the WARC file's signature: its size and modification time, and its
ETag when the filesystem gives one. The next listing reuses the scan when the
signature is the same, and scans again when it is not. Only a clean scan is
kept (a file with an error may be one still being written), and never one of a
file modified in the last few seconds (the signature could miss a write in the
same second). A kept scan that cannot be read is scanned again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbsync.sources.warc.captures import Capture, RecordKind, ShardScan

__all__ = ["FORMAT", "ScanIndex", "signature_of"]

FORMAT = 1
"""The version of what a kept scan holds; a kept scan of another version is scanned again."""
_SETTLED_SECONDS = 5.0
_MTIME_FIELDS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")
_ETAG_FIELDS = ("ETag", "etag", "e_tag", "generation", "VersionId")


def signature_of(info: Mapping[str, Any]) -> str | None:
    """What says a file changed (size, modification time, ETag), from fsspec's ``info``;
    None when the filesystem gives no time nor ETag (then nothing is kept)."""
    mtime = next((info[f] for f in _MTIME_FIELDS if info.get(f) not in (None, "")), None)
    etag = next((info[f] for f in _ETAG_FIELDS if info.get(f) not in (None, "")), None)
    if mtime is None and etag is None:
        return None
    return json.dumps([info.get("size"), str(mtime), str(etag)])


def _settled(info: Mapping[str, Any], now: float) -> bool:
    """Whether the file was last modified long enough ago to trust its signature."""
    mtime = info.get("mtime")
    return not isinstance(mtime, int | float) or now - float(mtime) > _SETTLED_SECONDS


class ScanIndex:
    """Kept scans of WARC files in ``folder``, which is made only below a folder that exists
    (a knowledge base that was never synced gets nothing written)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, file: str, signature: str) -> ShardScan | None:
        """The kept scan of ``file`` if its signature is ``signature``, else None."""
        try:
            data = json.loads(self._path(file).read_text(encoding="utf-8"))
            if data["format"] != FORMAT or data["file"] != file \
                    or data["signature"] != signature:
                return None
            captures = tuple(_capture(file, row) for row in data["captures"])
            return ShardScan(file, captures, (), tuple(data["warnings"]))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def put(self, scan: ShardScan, signature: str, info: Mapping[str, Any]) -> None:
        """Keep a clean scan of a settled file; a failure to write keeps nothing, silently
        (the next listing scans the file again)."""
        if scan.errors or not _settled(info, time.time()) or not self.folder.parent.is_dir():
            return
        data = {"format": FORMAT, "file": scan.file, "signature": signature,
                "warnings": list(scan.warnings),
                "captures": [_row(c) for c in scan.captures]}
        try:
            self.folder.mkdir(exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, separators=(",", ":"))
            os.replace(temporary, self._path(scan.file))
        except OSError:
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(temporary)

    def _path(self, file: str) -> Path:
        name = hashlib.blake2b(file.encode("utf-8", "surrogatepass"), digest_size=16)
        return self.folder / f"{name.hexdigest()}.json"


def _row(c: Capture) -> list[Any]:
    return [c.key, c.date, c.offset, str(c.kind), c.status, c.record_id, c.media_type,
            c.digest, c.size, c.etag, c.last_modified, c.refers_to, c.refers_date, c.note]


def _capture(file: str, row: list[Any]) -> Capture:
    (key, date, offset, kind, status, record_id, media_type, digest, size, etag,
     last_modified, refers_to, refers_date, note) = row
    return Capture(str(key), int(date), file, int(offset), RecordKind(kind), int(status),
                   str(record_id), str(media_type), str(digest), int(size),
                   None if etag is None else str(etag),
                   None if last_modified is None else str(last_modified),
                   str(refers_to), int(refers_date), str(note))
