"""The sync: bring a store in step with its sources, doing the least work that is correct.

Three drivers run the same steps: :func:`sync_sources` in one process
(:mod:`kbsync.sync.single`), :func:`sync_parallel` with workers sharing a PostgreSQL
store (:mod:`kbsync.sync.parallel`), :func:`sync_ray` on a Ray cluster
(:mod:`kbsync.sync.ray_driver`, over the tasks and actors of :mod:`kbsync.sync.ray_pool`).
The steps, each in the module named for it, see only protocols (Source, Extractor,
RecordStore, Embedder, VectorSink) and the pure core, so every part can be replaced by a
fake from :mod:`kbsync.testing`:

- :mod:`~kbsync.sync.listing`: list a source beside the store's manifest of it;
- :mod:`~kbsync.sync.observe`: the stat gate, then read, extract, hash and chunk
  (:mod:`~kbsync.sync.reading`: in a pool of processes);
- :mod:`~kbsync.sync.replacements`: compare a changed text with the stored one, hold a
  collapsed one;
- :mod:`~kbsync.sync.embedding`: embed a plan's cache misses (in a thread of its own),
  backfill; :mod:`~kbsync.sync.collect`: the vectors' way into the cache;
  :mod:`~kbsync.sync.bill`: refuse a bill over its bound;
- :mod:`~kbsync.sync.apply`: write a plan, count it, delete what vanished;
- :mod:`~kbsync.sync.batches`: a source's changes planned, embedded and applied a
  batch at a time (the single driver); :mod:`~kbsync.sync.work`: a document claimed
  from the work queue (the parallel driver);
- :mod:`~kbsync.sync.removed`, :mod:`~kbsync.sync.erasures`: sources no longer
  configured, keys ``kbsync erase`` covers;
- :mod:`~kbsync.sync.tally`: what a run did, as it goes;
- :mod:`~kbsync.sync.scratch`: what a source's documents wait in between steps.
"""

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
from kbsync.sync.work import ClaimedDocument, WorkQueue, drain

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
]
