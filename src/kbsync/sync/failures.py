"""Documents that could not be read or extracted, remembered with the stat they failed at.

A broken file (a damaged ``.pptx``) fails the same way on every sync until it
changes: reading it again costs its bytes and repeats an error the last sync
reported. So a failure is remembered with the file's stat, the derivation it
was read with (a new extractor may read it) and its message, and the next sync
skips the file while all three are the same, reporting it as still failing
rather than as a new failure; ``--verify`` reads it again.

A stat is trusted only when its mtime lies well before the listing that met the
failure: a file written again within the file system's time granularity of that
moment could keep its size and mtime, and would then be skipped with new bytes
(the "racy" stat of git's index). Such a file is read again, and a failure with
the same stat counts as still failing, not as new.

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

__all__ = ["RACY_NS", "FailureMemory", "KnownFailure", "failures_meta_name"]

RACY_NS = 2_000_000_000
"""How long before the listing a file's mtime must lie for its stat to be trusted: the
coarsest common granularity of file times (FAT's two seconds)."""


@dataclass(frozen=True, slots=True)
class KnownFailure:
    """A failure a sync met: the stat and derivation it was met at, its message, and
    when the listing that met it started (nanoseconds since the epoch)."""

    stat: SourceStat
    derivation: str
    message: str
    listed_ns: int

    def trusted(self) -> bool:
        """Whether the stat alone says the file is as it was when it failed."""
        return self.stat.mtime_ns < self.listed_ns - RACY_NS


def failures_meta_name(source: str) -> str:
    """The :class:`~kbsync.store.Meta` name of a source's remembered failures."""
    return f"failures:{source}"


class FailureMemory:
    """The remembered failures of one source during a sync: which documents to skip, which
    failures are old, and what the next sync remembers (:meth:`save`)."""

    def __init__(self, store: Meta, source: str, listed_ns: int) -> None:
        self._source = source
        self._listed_ns = listed_ns
        self._stored = store.get_meta(failures_meta_name(source))
        self.known = _decode(self._stored)
        self._kept: dict[str, KnownFailure] = {}

    def skip(self, item: SourceItem, made_with: str, out: SourceTally) -> bool:
        """Whether ``item`` failed before as it is now, so is not read: then it is
        counted in ``out`` as still failing."""
        known = self.known.get(item.key)
        if known is None or item.stat != known.stat or known.derivation != made_with \
                or not known.trusted():
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
            if known is not None and known.stat == stat and known.derivation == derivation:
                old.add(key)
                # Met again at the same stat: from this listing only if that makes the stat
                # trusted (it was racy before), so an unchanged failure writes nothing.
                fresh = KnownFailure(stat, derivation, message, self._listed_ns)
                listed = fresh.listed_ns if fresh.trusted() and not known.trusted() \
                    else known.listed_ns
            else:
                listed = self._listed_ns
            self._kept[key] = KnownFailure(stat, derivation, message, listed)
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
    return json.dumps({key: [f.stat.size, f.stat.mtime_ns, f.stat.inode, f.derivation,
                             f.message, f.listed_ns] for key, f in sorted(failures.items())},
                      ensure_ascii=False)


def _decode(value: str | None) -> dict[str, KnownFailure]:
    """The failures :func:`_encode` wrote; nothing for a value it cannot read (the files
    are then read again, which is always correct)."""
    if not value:
        return {}
    try:
        return {str(key): KnownFailure(SourceStat(int(size), int(mtime), int(inode)),
                                       str(derivation), str(message), int(listed))
                for key, (size, mtime, inode, derivation, message, listed)
                in json.loads(value).items()}
    except (ValueError, TypeError, AttributeError):
        return {}
