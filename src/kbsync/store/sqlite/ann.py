"""An approximate index over the store's vector matrix: FAISS inverted lists (IVF) that
name candidate chunks for an exact re-score, a cache derived from the matrix.

Why: the exact scan reads every vector (223 ms at a million chunks of 384 dimensions on two
cores), an IVF index reads the few lists nearest the query. The index never decides a
result: its candidates are scored again against the current matrix, whose chunk ids are
the store's current ones, so a deleted or edited chunk cannot come back from it. Its own
vectors are 8-bit (a quarter of the matrix's memory): they only choose candidates.

The index follows the matrix: when the matrix is read again (the store changed), the
vectors gone or changed are removed and the new ones added, which costs a little per
changed chunk; it is trained again, in a thread, only when the number of vectors has
doubled or halved since. Without FAISS (the ``ann`` extra) nothing here is used.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:  # NumPy is imported when vectors are indexed, not with the store
    import numpy as np
    import numpy.typing as npt

    Ids: TypeAlias = npt.NDArray[np.int64]

__all__ = ["ANN_ABOVE", "AnnIndexes", "ann_available"]

#: Vectors of one embedder above which a search asks the index: below it the exact scan
#: is as fast (under about 50 ms here) and loses nothing.
ANN_ABOVE = 200_000

#: Lists read per query (of about the square root of the vectors' count): recall@10 after
#: the re-score was 0.99 or better at 100,000 and 1,000,000 clustered vectors.
PROBES = 32

#: Training points per list: FAISS warns below 39.
_TRAINING_PER_LIST = 64

# Four coordinates' bits stand for a vector when the index is brought in step: a chunk whose
# vector was written again (repaired, re-embedded) under the same id differs in them.
_SKETCH = 4

@functools.cache
def ann_available() -> bool:
    """Whether FAISS (the ``ann`` extra) can be imported."""
    try:
        _faiss()
    except ImportError:
        return False
    return True


def _sketch(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.int32]:
    import numpy as np

    columns = np.linspace(0, matrix.shape[1] - 1, _SKETCH).astype(np.intp)
    return np.ascontiguousarray(matrix[:, columns]).view(np.int32)


@dataclass(slots=True)
class _Index:
    """One embedder's index and what it holds: the sorted chunk ids, their vectors'
    sketches, and the count it was trained for."""

    faiss_index: Any
    ids: Ids
    sketch: npt.NDArray[np.int32]
    trained_for: int
    #: The matrix's id list it is in step with (identity: the matrix is replaced, not changed).
    synced: list[int] | None = None


def _faiss() -> Any:
    # FAISS's own type hints lack much of its SWIG interface (direct maps, IVF search
    # parameters): it is used as untyped.
    return importlib.import_module("faiss")


def _train(matrix: npt.NDArray[np.float32], ids: list[int]) -> _Index:
    """An index over ``matrix`` (rows named by ``ids``), trained on a sample of it."""
    import numpy as np

    faiss = _faiss()
    count, dimension = matrix.shape
    lists = max(1, min(65_536, round(math.sqrt(count))))
    index = faiss.index_factory(dimension, f"IVF{lists},SQ8", faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    size = min(count, lists * _TRAINING_PER_LIST)
    index.train(matrix[np.sort(rng.choice(count, size=size, replace=False))])
    index.set_direct_map_type(faiss.DirectMap.Hashtable)  # removals by id without a scan
    named = np.asarray(ids, dtype=np.int64)
    index.add_with_ids(matrix, named)
    order = np.argsort(named, kind="stable")
    return _Index(index, named[order], _sketch(matrix)[order], count, ids)


def _bring_in_step(built: _Index, matrix: npt.NDArray[np.float32], ids: list[int],
                   order: npt.NDArray[np.intp]) -> None:
    """Remove from ``built`` the chunks gone or changed, and add the new and changed ones."""
    import numpy as np

    named = np.asarray(ids, dtype=np.int64)[order]
    sketch = _sketch(matrix)[order]
    at = np.searchsorted(built.ids, named)
    present = at < len(built.ids)
    present[present] = built.ids[at[present]] == named[present]
    same = present.copy()
    same[present] = (built.sketch[at[present]] == sketch[present]).all(axis=1)
    kept = np.zeros(len(built.ids), dtype=bool)
    kept[at[same]] = True
    if not kept.all():
        built.faiss_index.remove_ids(np.ascontiguousarray(built.ids[~kept]))
    if not same.all():
        rows = order[~same]
        built.faiss_index.add_with_ids(matrix[rows], named[~same])
    built.ids, built.sketch, built.synced = named, sketch, ids


class AnnIndexes:
    """The index of each embedder's vectors, built above ``above`` vectors, in a thread
    unless asked to wait; a search while it builds scans exactly."""

    def __init__(self, above: int = ANN_ABOVE) -> None:
        self.above = above
        self._built: dict[str, _Index] = {}
        self._building: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def wanted(self, count: int) -> bool:
        """Whether ``count`` vectors are many enough for the index (and FAISS is there)."""
        return 0 < self.above <= count and ann_available()

    def candidates(self, embedder: str, matrix: npt.NDArray[np.float32], ids: list[int],
                   order: npt.NDArray[np.intp], query: npt.NDArray[np.float32], fetch: int,
                   allowed: Ids | None = None, *, wait: bool = False) -> Ids | None:
        """Chunk ids of up to ``fetch`` vectors near ``query`` (of those in ``allowed``, if
        given), or None when there is no index to ask yet: then the caller scans.

        ``order`` sorts ``ids``; ``wait`` builds the index now instead of in a thread.
        """
        import numpy as np

        built = self._ready(embedder, matrix, ids, order, wait=wait)
        if built is None:
            return None
        faiss = _faiss()
        params = faiss.SearchParametersIVF(nprobe=PROBES)
        if allowed is not None:
            # A bitmap over the chunk ids (a millisecond or so per million): with FAISS's
            # hash set of ids (IDSelectorBatch) a search over half of 100,000 chunks was
            # slower than the exact scan.
            bits = np.zeros(int(allowed.max(initial=0)) + 1, dtype=bool)
            bits[allowed] = True
            packed = np.packbits(bits, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(packed), faiss.swig_ptr(packed))
            params.sel = selector
        with self._lock:  # not while another search brings the same index in step
            found: Ids = built.faiss_index.search(query[None, :], fetch, params=params)[1][0]
        return found[found >= 0]

    def _ready(self, embedder: str, matrix: npt.NDArray[np.float32], ids: list[int],
               order: npt.NDArray[np.intp], *, wait: bool) -> _Index | None:
        with self._lock:
            built = self._built.get(embedder)
            if built is not None and built.synced is not ids:
                _bring_in_step(built, matrix, ids, order)
            if built is not None and built.trained_for // 2 <= len(ids) <= 2 * built.trained_for:
                return built
            if not self.above:  # a build failed
                return built
            thread = self._building.get(embedder)
            if thread is None or not thread.is_alive():
                thread = threading.Thread(target=self._build, args=(embedder, matrix, ids),
                                          name=f"kbsync-ann-{embedder}", daemon=True)
                self._building[embedder] = thread
                thread.start()
        if wait:
            thread.join()
            return self._ready(embedder, matrix, ids, order, wait=False)
        return built  # trained for another count: still right after the re-score, meanwhile

    def _build(self, embedder: str, matrix: npt.NDArray[np.float32], ids: list[int]) -> None:
        try:
            built = _train(matrix, ids)
        except Exception as exc:  # a thread's error would reach no caller
            # Out of memory, most likely: the exact scan answers from now on, and the
            # build is not tried again on every search.
            logging.getLogger("kbsync.store").warning(
                "the approximate vector index could not be built (%s); searches scan "
                "exactly", " ".join(str(exc).split())[:200] or type(exc).__name__)
            with self._lock:
                self.above = 0
                self._building.pop(embedder, None)
            return
        with self._lock:
            self._built[embedder] = built
            self._building.pop(embedder, None)
