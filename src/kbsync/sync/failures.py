"""Documents that could not be read or extracted, remembered with the stat they failed at.

A broken file (a damaged ``.pptx``) fails the same way on every sync until it
changes: reading it again costs its bytes and repeats an error the last sync
reported. So a failure is remembered with the file's stat, the derivation it
was read with (a new extractor may read it) and its message, and the next sync
skips the file while all three are the same, reporting it as still failing
rather than as a new failure; ``--verify`` reads it again.

A racy stat (:class:`~kbsync.model.SourceStat`: its mtime not safely older than the
listing that met the failure) is never trusted: a file written again within the file
system's time granularity could keep its size and mtime, and would then be skipped
with new bytes. Such a file is read again, and a failure of the same file counts as
still failing, not as new; its stat, listed again once it is no longer racy, is then
trusted.

The memory is one value of the store's :class:`~kbsync.store.Meta` role per
source, as small as the set of broken files; a source without failures has none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from kbsync.model import SourceItem, SourceStat
from kbsync.store import Meta
from kbsync.sync.tally import SourceTally

__all__ = ["FailureMemory", "KnownFailure", "failures_meta_name"]


@dataclass(frozen=True, slots=True)
class KnownFailure:
    """A failure a sync met: the stat (racy or not) and derivation it was met at, and its
    message."""

    stat: SourceStat
    derivation: str
    message: str


def _same_file(a: SourceStat, b: SourceStat) -> bool:
    """Whether two stats describe the same file as it was, racy or not."""
    return (a.size, a.mtime_ns, a.inode) == (b.size, b.mtime_ns, b.inode)


def failures_meta_name(source: str) -> str:
    """The :class:`~kbsync.store.Meta` name of a source's remembered failures."""
    return f"failures:{source}"


class FailureMemory:
    """The remembered failures of one source during a sync: which documents to skip, which
    failures are old, and what the next sync remembers (:meth:`save`)."""

    def __init__(self, store: Meta, source: str) -> None:
        self._source = source
        self._stored = store.get_meta(failures_meta_name(source))
        self.known = _decode(self._stored)
        self._kept: dict[str, KnownFailure] = {}

    def skip(self, item: SourceItem, made_with: str, out: SourceTally) -> bool:
        """Whether ``item`` failed before as it is now, so is not read: then it is
        counted in ``out`` as still failing."""
        known = self.known.get(item.key)
        # Equal stats, neither racy: a racy one is recorded racy, and differs from one
        # listed once it is no longer racy (which is then trusted).
        if known is None or item.stat is None or item.stat != known.stat \
                or item.stat.racy or known.derivation != made_with:
            return False
        self._kept[item.key] = known
        out.still_failing.append((item.key, known.message))
        return True

    def settle(self, out: SourceTally) -> None:
        """Sort the read failures of ``out``: one met before at the same stat and
        derivation moves from ``failures`` (and from the failed documents and the
        changes) to ``still_failing``, as if it had been skipped; each is remembered."""
        old = set()
        for key, (stat, derivation, message) in out.unreadable.items():
            known = self.known.get(key)
            if known is not None and _same_file(known.stat, stat) \
                    and known.derivation == derivation:
                old.add(key)
            self._kept[key] = KnownFailure(stat, derivation, message)
        if not old:
            return
        failures = [(key, message) for key, message in out.failures if key not in old]
        out.still_failing.extend((key, message) for key, message in out.failures
                                 if key in old)
        out.failures.clear()
        out.failures.extend(failures)
        out.documents["failed"] -= len(old)
        actions = [a for a in out.actions if not (a[1] == "failed" and a[0] in old)]
        out.actions.clear()
        out.actions.extend(actions)

    def save(self, store: Meta) -> None:
        """Remember the failures of this sync (those skipped, and those met), forgetting
        the rest: a document read well, changed, or gone."""
        value = _encode(self._kept)
        if (self._kept or self.known) and value != self._stored:
            store.set_meta(failures_meta_name(self._source), value)


def _encode(failures: Mapping[str, KnownFailure]) -> str:
    return json.dumps({key: [f.stat.size, f.stat.mtime_ns, f.stat.inode, f.stat.racy,
                             f.derivation, f.message] for key, f in sorted(failures.items())},
                      ensure_ascii=False)


def _decode(value: str | None) -> dict[str, KnownFailure]:
    """The failures :func:`_encode` wrote; nothing for a value it cannot read (the files
    are then read again, which is always correct)."""
    if not value:
        return {}
    try:
        return {str(key): KnownFailure(SourceStat(int(size), int(mtime), int(inode),
                                                  racy=bool(racy)),
                                       str(derivation), str(message))
                for key, (size, mtime, inode, racy, derivation, message)
                in json.loads(value).items()}
    except (ValueError, TypeError, AttributeError):
        return {}
