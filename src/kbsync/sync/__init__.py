"""The sync: bring a store in step with its sources, doing the least work that is correct.

The sync is a set of batch steps over one context (:mod:`kbsync.sync.steps`, the values
they hand each other in :mod:`kbsync.sync.context`): list, gate, observe, decide, plan,
embed, apply, delete, merge. Drivers only compose them: :func:`sync_sources` in one
process (:mod:`kbsync.sync.single`), :func:`sync_parallel` with workers sharing a
PostgreSQL store (:mod:`kbsync.sync.parallel`, :mod:`kbsync.sync.work`), :func:`sync_ray`
on a Ray cluster (:mod:`kbsync.sync.ray_driver`, over the tasks and actors of
:mod:`kbsync.sync.ray_pool`). The steps,
each in the module named for it, see only protocols (Source, Extractor, the store's
roles, Embedder, VectorSink) and the pure core, so every part can be replaced by a fake
from :mod:`kbsync.testing`:

- :mod:`~kbsync.sync.listing`: list a source beside the store's manifest of it;
- :mod:`~kbsync.sync.observe`: the stat gate, then read, extract, hash and chunk
  (:mod:`~kbsync.sync.reading`: in a pool of processes);
- :mod:`~kbsync.sync.replacements`: compare a changed text with the stored one, hold a
  collapsed one;
- :mod:`~kbsync.sync.embedding`: embed a plan's cache misses (in a thread of its own),
  backfill; :mod:`~kbsync.sync.collect`: the vectors' way into the cache;
  :mod:`~kbsync.sync.bill`: refuse a bill over its bound;
- :mod:`~kbsync.sync.apply`: write a plan, count it, delete what vanished;
- :mod:`~kbsync.sync.run`: what every driver does around the steps: the sources of a
  run, one source's steps in order (the driver saying how documents are read and
  applied), a stop recorded, the run's end;
- :mod:`~kbsync.sync.batches`: the single driver's batches, a batch embedded while the
  one before is applied; :mod:`~kbsync.sync.work`: batches claimed from the work queue
  (the parallel driver);
- :mod:`~kbsync.sync.removed`, :mod:`~kbsync.sync.erasures`: sources no longer
  configured, keys ``kbsync erase`` covers;
- :mod:`~kbsync.sync.tally`: what a run did, as it goes;
- :mod:`~kbsync.sync.scratch`: what a source's documents wait in between steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbsync.lazy import names_on_first_use

if TYPE_CHECKING:
    from kbsync.sync.chunker import EMBEDDER_COUNTER, Chunker
    from kbsync.sync.embedding import backfill
    from kbsync.sync.erasures import is_key_hash, tombstone
    from kbsync.sync.options import BatchLimits, SyncOptions
    from kbsync.sync.parallel import sync_parallel
    from kbsync.sync.ray_driver import sync_ray
    from kbsync.sync.ray_pool import RayCluster
    from kbsync.sync.removed import release_source
    from kbsync.sync.scratch import remove_stale
    from kbsync.sync.single import sync_sources
    from kbsync.sync.tally import Progress, SourceTally, SyncReport, utc_now
    from kbsync.sync.work import ClaimedDocument, WorkQueue, drain, worker_context

# Where each name lives: imported when first asked for, so that importing one step (the
# chunker's settings, the tally) does not import both drivers and every step.
_HOMES = {
    "kbsync.sync.chunker": ("EMBEDDER_COUNTER", "Chunker"),
    "kbsync.sync.embedding": ("backfill",),
    "kbsync.sync.erasures": ("is_key_hash", "tombstone"),
    "kbsync.sync.options": ("BatchLimits", "SyncOptions"),
    "kbsync.sync.parallel": ("sync_parallel",),
    "kbsync.sync.ray_driver": ("sync_ray",),
    "kbsync.sync.ray_pool": ("RayCluster",),
    "kbsync.sync.removed": ("release_source",),
    "kbsync.sync.scratch": ("remove_stale",),
    "kbsync.sync.single": ("sync_sources",),
    "kbsync.sync.tally": ("Progress", "SourceTally", "SyncReport", "utc_now"),
    "kbsync.sync.work": ("ClaimedDocument", "WorkQueue", "drain", "worker_context"),
}

__all__ = [
    "EMBEDDER_COUNTER",
    "BatchLimits",
    "Chunker",
    "ClaimedDocument",
    "Progress",
    "RayCluster",
    "SourceTally",
    "SyncOptions",
    "SyncReport",
    "WorkQueue",
    "backfill",
    "drain",
    "is_key_hash",
    "release_source",
    "remove_stale",
    "sync_parallel",
    "sync_ray",
    "sync_sources",
    "tombstone",
    "utc_now",
    "worker_context",
]


__getattr__ = names_on_first_use(__name__, _HOMES)
"""A name of the package, imported from its module on first use."""
