"""The Ray side of a Ray sync: the cluster it joins or starts, the reading tasks, and the
actors that embed (a model loaded once per actor, on a GPU where the cluster has them) and
apply (a store connection each: one for a store of one writer, several for PostgreSQL).

Ray is imported here only, and only when a Ray sync starts (the ``ray`` extra). What runs
in Ray's workers is the sync's own steps (:func:`~kbsync.sync.reading.read_jobs`,
:func:`~kbsync.sync.embedding.embed_plan`, :func:`~kbsync.sync.apply.apply_plan`) over
parts each worker builds once from a :class:`Recipe`: a store connection or a model in
memory cannot travel to a worker, a configuration can.

Reading is pure and embedding too, so a reading task or an embedding call that a lost
worker took is run again by Ray. Applying is not repeated: a store actor that dies fails
the sync with :class:`~kbsync.errors.ClusterError`, and the next sync redoes what was not
applied (its transaction was rolled back with the connection).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from kbsync.core.plan import Plan
from kbsync.embed import Embedder, Vectors, norm_of
from kbsync.errors import ClusterError, DependencyMissingError, KbsyncError
from kbsync.extract import Extractor
from kbsync.model import VectorNorm
from kbsync.sources import Source
from kbsync.store import RecordStore
from kbsync.sync.apply import apply_plan
from kbsync.sync.chunker import Chunker
from kbsync.sync.embedding import embed_plan
from kbsync.sync.observe import ExtractorFor
from kbsync.sync.reading import Job, Read, read_jobs
from kbsync.sync.tally import Progress, SourceTally
from kbsync.sync.vector_index import EmbeddedIndex

__all__ = ["Applied", "Embedded", "Pool", "RayCluster", "Recipe", "import_ray",
           "start_local_ray"]

READ_PER_TASK = 32
"""Documents one reading task reads: consecutive keys of the listing (a key range), enough
that a task's round trip through Ray (a millisecond or two) is small beside its reads."""
TASKS_PER_CPU = 4
"""Reading tasks in flight per CPU: enough to keep every CPU busy while the syncing
process files what came back, few enough that memory does not grow with the source."""
_RETRIES = 3
"""How often Ray runs again a reading task or an embedding call whose worker was lost."""
_DEFAULT_APPLIERS = 4
_STARTING = "start Ray"  # the progress stage of Ray's start
"""Store actors on a store that many connections may write (PostgreSQL), unless told."""


class Recipe(Protocol):
    """What a worker builds a knowledge base's parts from; picklable, since every worker is
    sent it (:class:`kbsync.engine.recipe.ConfigRecipe`)."""

    @property
    def chunker(self) -> Chunker: ...

    @property
    def many_writers(self) -> bool:
        """Whether several connections may write the store at once."""
        ...

    def source(self, name: str) -> Source: ...

    def extractor_for(self, media_type: str) -> Extractor | None: ...

    def embedder(self, gpu: bool) -> Embedder:
        """The embedder; ``gpu``: the worker was given a GPU to run it on."""
        ...

    def store(self) -> RecordStore:
        """A connection of this worker's own to the store."""
        ...


@dataclass(frozen=True, slots=True)
class RayCluster:
    """Where a Ray sync runs and how wide.

    - ``address``: a running cluster to join (``"auto"``, ``"ray://head:10001"``); None
      joins the one ``RAY_ADDRESS`` names, else starts Ray on this machine for the sync
      (and stops it after), unless this process joined one already.
    - ``cpus``: the CPUs of a Ray started here, and what the reading tasks in flight are
      counted in (:data:`TASKS_PER_CPU` each); 0: the cluster's CPUs.
    - ``embedders``: embedding actors (each loads the model once); 0: one per GPU of the
      cluster, else one.
    - ``appliers``: store actors applying batches, each with its connection; 0: four.
      A store of one writer at a time (SQLite) always gets one.
    - ``gpus``: whether each embedding actor takes a GPU; None: when the cluster has GPUs.
    """

    address: str | None = None
    cpus: int = 0
    embedders: int = 0
    appliers: int = 0
    gpus: bool | None = None


def import_ray() -> Any:
    """The ``ray`` module; :class:`~kbsync.errors.DependencyMissingError` naming the extra."""
    try:
        import ray
    except ImportError as exc:
        raise DependencyMissingError("a sync on Ray (--engine ray)", "ray", "ray", exc) from exc
    return ray


@dataclass(frozen=True, slots=True)
class Embedded:
    """A plan's vectors on their way from an embedding actor to a store actor: one matrix,
    a row per digest (one buffer for Ray's object store, not one per vector), and the
    digests whose embedding failed."""

    digests: tuple[str, ...]
    matrix: npt.NDArray[np.float32]
    failed: frozenset[str] = frozenset()

    def vectors(self) -> dict[str, npt.NDArray[np.float32]]:
        return dict(zip(self.digests, self.matrix, strict=True))


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying a batch counted, and the digests its own embedding failed (a later
    batch that took them as embedded fails the documents that hold them)."""

    tally: SourceTally
    failed: frozenset[str] = field(default_factory=frozenset)


class EmbedWorker:
    """An embedding actor: the model loaded once, the misses of each plan it is sent
    embedded as a single-process sync embeds them (deduplicated, shortest first, in model
    batches cut by tokens: :func:`~kbsync.sync.embedding.embed_plan`)."""

    def __init__(self, recipe: Recipe, gpu: bool) -> None:
        self._embedder = recipe.embedder(gpu)

    def embed(self, the_plan: Plan) -> tuple[SourceTally, Embedded]:
        """The plan's vectors, and what embedding them counted."""
        out = SourceTally(source=the_plan.source)
        vectors, failed = embed_plan(the_plan, self._embedder, out, None)
        digests = tuple(vectors)
        matrix = np.stack([vectors[d] for d in digests]) if digests \
            else np.empty((0, self._embedder.dimension), dtype=np.float32)
        return out, Embedded(digests, matrix, frozenset(failed))

    def embed_texts(self, texts: Sequence[str]) -> Vectors:
        return self._embedder.embed(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._embedder.count_tokens(texts)

    def gpus(self) -> list[str]:
        """The GPUs Ray gave this actor (none on CPU actors)."""
        return [str(g) for g in import_ray().get_gpu_ids()]


class StoreWorker:
    """A store actor: one connection of its own, applying the batches it is sent in their
    transactions with their vectors (:func:`~kbsync.sync.apply.apply_plan`)."""

    def __init__(self, recipe: Recipe) -> None:
        self._store = recipe.store()
        self._index = EmbeddedIndex(self._store)
        # Only its identity is used: a local model is not loaded for it.
        self._embedder = recipe.embedder(False)

    def apply(self, the_plan: Plan, embedded: Embedded | None, skip: frozenset[str],
              borrowed: frozenset[str], *after: Applied) -> Applied:
        """Apply a batch once the batches it took digests from (``after``) are applied;
        a document holding a digest one of them failed to embed keeps its previous version."""
        own = embedded.failed if embedded is not None else frozenset()
        failed = set(own)
        for earlier in after:
            failed |= earlier.failed & borrowed
        out = SourceTally(source=the_plan.source)
        apply_plan(the_plan, {}, failed, self._store, self._index, self._embedder, out, None,
                   skip, held=None if embedded is None else embedded.vectors())
        return Applied(out, own)


# What a worker process built for reading, by (run, source): kept for the run's next tasks.
_READING: OrderedDict[tuple[str, str], tuple[Source, ExtractorFor, Chunker]] = OrderedDict()
_READING_KEPT = 4


def read_task(recipe: Recipe, run: str, source: str, jobs: Sequence[Job]) -> Read:
    """A reading task: consecutive documents of one source read, extracted and chunked."""
    parts = _READING.get((run, source))
    if parts is None:
        parts = (recipe.source(source), recipe.extractor_for, recipe.chunker)
        _READING[(run, source)] = parts
        while len(_READING) > _READING_KEPT:
            _READING.popitem(last=False)
    return read_jobs(*parts, jobs)


class Pool:
    """The workers of one Ray sync: reading tasks, embedding actors, store actors.

    Ray is joined, or started, when the sync first needs it: a sync that reads and
    writes nothing (a no-op) never starts it, and ``progress`` is told of Ray's start
    (seconds of a small sync) as a stage of its own.
    """

    def __init__(self, cluster: RayCluster, recipe: Recipe, run: str,
                 progress: Progress | None = None) -> None:
        import_ray()  # a missing extra is said before anything is listed
        self.run = run
        self._cluster, self._recipe_itself, self._progress = cluster, recipe, progress
        self._ray: Any = None
        self._started = False
        self._embedders: list[Any] = []
        self._appliers: list[Any] = []

    def _up(self) -> Any:
        """Ray, joined or started here on first use (with what the pool needs of it)."""
        if self._ray is not None:
            return self._ray
        ray = import_ray()
        if self._progress is not None:
            self._progress(_STARTING, 0, 1)
        cluster, recipe = self._cluster, self._recipe_itself
        self._started = _connect(ray, cluster)
        self._ray = ray
        if self._progress is not None:
            self._progress(_STARTING, 1, 1)
        try:
            resources = ray.cluster_resources()
            self.cpus = cluster.cpus or max(1, int(resources.get("CPU", 1)))
            gpus = int(resources.get("GPU", 0))
            self.on_gpus = gpus > 0 if cluster.gpus is None else cluster.gpus
            self._embedding = cluster.embedders or (max(1, gpus) if self.on_gpus else 1)
            self._applying = (cluster.appliers or _DEFAULT_APPLIERS) \
                if recipe.many_writers else 1
            # Actors get the recipe itself (a restarted one needs it again), tasks a reference.
            self._recipe = ray.put(recipe)
            self._embed_class, self._store_class, self._read = _remote(ray)
        except BaseException:
            self.close()
            raise
        return ray

    @property
    def window(self) -> int:
        """Reading tasks in flight: :data:`TASKS_PER_CPU` per CPU."""
        self._up()
        return TASKS_PER_CPU * self.cpus

    @property
    def embedders(self) -> list[Any]:
        """The embedding actors, started when first needed (a sync that embeds nothing,
        a no-op, starts none)."""
        if not self._embedders:
            self._up()
            self._embedders = [self._embed_class.options(
                name=f"kbsync:{self.run}:embed:{i}", num_gpus=1 if self.on_gpus else 0,
                max_restarts=_RETRIES, max_task_retries=_RETRIES,
            ).remote(self._recipe_itself, self.on_gpus) for i in range(self._embedding)]
        return self._embedders

    @property
    def appliers(self) -> list[Any]:
        """The store actors, started when first needed."""
        if not self._appliers:
            self._up()
            self._appliers = [self._store_class.options(
                name=f"kbsync:{self.run}:store:{i}", max_restarts=0, max_task_retries=0,
            ).remote(self._recipe_itself) for i in range(self._applying)]
        return self._appliers

    def warm(self) -> None:
        """Start the actors now (a sync about to read documents will embed and write):
        their start, a process each, then overlaps the reading instead of delaying the
        first batch."""
        _ = self.embedders, self.appliers

    @property
    def actors(self) -> int:
        """How many actors the pool has or will have: what bounds the batches in flight."""
        self._up()
        return self._embedding + self._applying

    def read(self, source: str, jobs: Sequence[Job]) -> Any:
        """Start reading ``jobs`` of ``source``; the task's reference."""
        self._up()
        return self._read.remote(self._recipe, self.run, source, list(jobs))

    def put(self, value: object) -> Any:
        return self._up().put(value)

    def embed(self, number: int, the_plan: Any) -> tuple[Any, Any]:
        """Start embedding a plan (a reference) on an actor chosen by ``number``; the
        references of its tally and of its vectors."""
        actor = self.embedders[number % len(self.embedders)]
        tally, embedded = actor.embed.options(num_returns=2).remote(the_plan)
        return tally, embedded

    def apply(self, number: int, the_plan: Any, embedded: Any, skip: Any,
              borrowed: frozenset[str], after: Sequence[Any]) -> Any:
        """Start applying a plan on the store actor chosen by ``number``, once ``after``
        (references of earlier applies) are done; the reference of its :class:`Applied`."""
        actor = self.appliers[number % len(self.appliers)]
        return actor.apply.remote(the_plan, embedded, skip, borrowed, *after)

    def ready(self, ref: Any) -> bool:
        done, _ = self._ray.wait([ref], timeout=0, fetch_local=False)
        return bool(done)

    def get(self, ref: Any) -> Any:
        """The value of ``ref``; a lost worker is a :class:`~kbsync.errors.ClusterError`, an
        error of kbsync's in a worker is raised here as itself."""
        exceptions = self._ray.exceptions
        try:
            return self._ray.get(ref)
        except exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, KbsyncError):
                raise cause from None
            if isinstance(cause, exceptions.RayError):
                raise _lost(cause) from cause
            raise
        except exceptions.RayError as exc:
            raise _lost(exc) from exc

    def embedder(self, local: Embedder) -> Embedder:
        """``local`` (this process's embedder, for its identity) with its work done by an
        embedding actor: what the steps that embed outside batches call (a backfill)."""
        return _Remote(local, self)

    def close(self) -> None:
        """Stop every actor, and Ray if the sync started it.

        A store actor's connection goes with its process: every batch it applied is
        committed by then, and a transaction it had begun is rolled back.
        """
        ray = self._ray
        if ray is None:  # never started: nothing to stop
            return
        for actor in (*self._embedders, *self._appliers):
            ray.kill(actor, no_restart=True)
        self._embedders, self._appliers = [], []
        if self._started:
            ray.shutdown()
            self._started = False


class _Remote:
    """An embedder whose texts are embedded and counted by an embedding actor."""

    def __init__(self, local: Embedder, pool: Pool) -> None:
        self._local, self._pool = local, pool

    @property
    def identity(self) -> str:
        return self._local.identity

    @property
    def dimension(self) -> int:
        return self._local.dimension

    @property
    def max_input_tokens(self) -> int | None:
        return self._local.max_input_tokens

    @property
    def norm(self) -> VectorNorm:
        return norm_of(self._local)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        counted: list[int] = self._pool.get(
            self._pool.embedders[0].count_tokens.remote(list(texts)))
        return counted

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors: Vectors = self._pool.get(self._pool.embedders[0].embed_texts.remote(list(texts)))
        return vectors


def _lost(exc: BaseException) -> ClusterError:
    return ClusterError(f"the Ray cluster lost a worker of this sync ({type(exc).__name__}); "
                        "what was applied stays: sync again to finish the rest")


def _connect(ray: Any, cluster: RayCluster) -> bool:
    """Join the cluster, or start Ray here; whether it was started or joined here."""
    if ray.is_initialized():
        return False
    if cluster.address is not None:
        ray.init(address=cluster.address, **_QUIET)
    elif os.environ.get("RAY_ADDRESS"):
        ray.init(**_QUIET)
    else:
        start_local_ray(cluster.cpus or None)
    return True


# A sync's output is its report: Ray's own notes at start-up are not part of it.
_QUIET: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}


def start_local_ray(cpus: int | None, gpus: int | None = None) -> None:
    """Start Ray on this machine as a sync starts it: ``cpus`` CPUs (None: the machine's),
    ``gpus`` GPUs declared (None: those Ray finds), no dashboard, quiet, and its workers at
    the niceness of the process that starts it.

    Ray runs its workers at niceness 15 by default, so that its own services stay
    responsive: on a machine that runs other work too, the reading tasks and the actors
    (all of a sync's work) then wait for every other process. Measured on two cores
    shared with other builds: reading tasks at 17-25 % of a core each at niceness 15.
    """
    ray = import_ray()
    ray.init(num_cpus=cpus, num_gpus=gpus, include_dashboard=False,
             _system_config={"worker_niceness": 0}, **_QUIET)


_REMOTE: tuple[Any, Any, Any] | None = None


def _remote(ray: Any) -> tuple[Any, Any, Any]:
    """The actor classes and the reading task as Ray knows them (made once per process)."""
    global _REMOTE
    if _REMOTE is None:
        _REMOTE = (ray.remote(EmbedWorker), ray.remote(StoreWorker),
                   ray.remote(max_retries=_RETRIES)(read_task))
    return _REMOTE
