"""The store's file on disk: created private, salvaged from, swapped for a rebuilt one."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from kbsync.crashpoints import crashpoint
from kbsync.errors import StoreError
from kbsync.store.guard import store_error

if TYPE_CHECKING:  # NumPy is imported where vectors are read or written
    import numpy as np
    import numpy.typing as npt

    from kbsync.store import EmbeddingCache, Erasures

__all__ = ["BUSY_SECONDS", "DAMAGE_SUFFIX", "carry_erasures", "damage_note", "noted_damage",
           "prepare_state", "rebuild_file", "refuse_shared", "remove_rebuild_leftovers",
           "salvage_embeddings", "swap_in", "writable"]

BUSY_SECONDS = 30.0
"""How long opening, reading or writing the store waits for another process's lock."""

DAMAGE_SUFFIX = ".damaged"
"""The suffix of the file beside a store that remembers it is damaged (see
:meth:`~kbsync.store.Maintenance.known_damage`)."""


def damage_note(path: Path) -> Path:
    """The file beside the store ``path`` that says it is damaged: a file of its own, since a
    damaged store may not take a write, nor give back what it was told."""
    return path.with_name(path.name + DAMAGE_SUFFIX)


def noted_damage(path: Path) -> str | None:
    """Why the store ``path`` is known to be damaged, as its note says; None without one."""
    try:
        note = damage_note(path).read_text(encoding="utf-8").strip()
    except OSError:  # none (or unreadable: then nothing is known)
        return None
    return note or "damage was found"


def salvage_embeddings(damaged: Path, into: EmbeddingCache) -> int:
    """Copy every readable cached vector of the store file ``damaged`` into ``into``; how many.

    Rows are read in rowid order; where a damaged page stops the reading, the
    rest is read from the other end, so one bad page costs only the rows on it.
    """
    import numpy as np

    db = sqlite3.connect(f"{damaged.resolve().as_uri()}?mode=ro", uri=True)
    rows: dict[tuple[str, str], tuple[int, bytes]] = {}
    sql = "SELECT rowid, digest, embedder, dimension, vector FROM embeddings "
    try:
        last = 0
        try:
            for rowid, digest, embedder, dimension, vector in db.execute(sql + "ORDER BY rowid"):
                rows[(digest, embedder)] = (dimension, vector)
                last = rowid
        except sqlite3.DatabaseError:
            with contextlib.suppress(sqlite3.DatabaseError):
                for _, digest, embedder, dimension, vector in db.execute(
                        sql + "WHERE rowid > ? ORDER BY rowid DESC", (last,)):
                    rows[(digest, embedder)] = (dimension, vector)
    except sqlite3.DatabaseError:
        pass  # not even the table is readable: nothing to salvage
    finally:
        db.close()
    by_embedder: dict[str, dict[str, npt.NDArray[np.float32]]] = {}
    for (digest, embedder), (dimension, vector) in rows.items():
        if isinstance(vector, bytes) and len(vector) == 4 * dimension:
            by_embedder.setdefault(embedder, {})[digest] = np.frombuffer(vector, np.float32)
    for embedder, vectors in by_embedder.items():
        into.put_vectors(embedder, vectors)
    return sum(len(v) for v in by_embedder.values())


def carry_erasures(damaged: Path, into: Erasures) -> int:
    """Copy the erasures of the store file ``damaged`` into ``into``; how many.

    Unlike a lost vector, a lost erasure would bring an erased document back, so an
    erasures table that cannot be read in full is a StoreError, not a partial copy.
    """
    db = sqlite3.connect(f"{damaged.resolve().as_uri()}?mode=ro", uri=True)
    try:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'erasures'").fetchone() is None:
            return 0  # a store from before erasures were remembered
        rows = db.execute("SELECT pattern, created FROM erasures").fetchall()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{damaged}: its erasures cannot be read ({exc}), so a rebuilt store "
                         "could bring erased documents back; nothing was rebuilt") from exc
    finally:
        db.close()
    for pattern, created in rows:
        into.add_erasure(str(pattern), str(created))
    return len(rows)


def swap_in(fresh: Path, live: Path, backup: Path) -> None:
    """Put the closed store file ``fresh`` in place of ``live``, keeping the old one as ``backup``.

    The old file is hard-linked to ``backup`` first and replaced by one rename, so
    at every moment ``live`` is the old store or the new one; its write-ahead log
    goes with the backup, lest SQLite replay it onto the new file.
    """
    try:
        for name in (backup, *_companions(backup)):
            name.unlink(missing_ok=True)
        crashpoint("store.rebuild_backup")
        os.link(live, backup)
        for old, kept in zip(_companions(live), _companions(backup), strict=True):
            if old.exists():
                os.replace(old, kept)
        crashpoint("store.rebuild_swap")
        os.replace(fresh, live)
        folder = os.open(live.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        raise store_error(str(live), exc, "cannot put the rebuilt store in place") from exc


def rebuild_file(live: Path) -> Path:
    """Where a rebuild of the store file ``live`` makes its fresh store (``<store>.rebuild``)."""
    return live.with_name(live.name + ".rebuild")


def remove_rebuild_leftovers(live: Path) -> int:
    """Delete what a killed rebuild of ``live`` left (its fresh store and that file's WAL); bytes.

    A rebuild runs under the writer lock and removes its file itself when it fails,
    so the caller must hold that lock: then no rebuild is running, and the file, if
    any, is what a killed one left behind (a store's worth of bytes, until now kept
    until the next rebuild). ``<store>.before-rebuild`` is the kept backup, not a leftover.
    A file that cannot be removed (a read-only folder) stays: it costs space, not
    correctness, so it never stops the writer that found it.
    """
    fresh = rebuild_file(live)
    freed = 0
    for path in (fresh, *_companions(fresh)):
        try:
            size = path.stat().st_size
            path.unlink()
        except OSError:
            continue
        freed += size
    return freed


def _companions(path: Path) -> tuple[Path, Path]:
    """The write-ahead log and shared-memory files SQLite keeps beside ``path``."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def writable(path: Path) -> bool:
    """Whether the store file and its folder (for the WAL) can be written.

    ``access`` honours read-only mounts and immutable files even for root, whom
    permission bits do not stop.
    """
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def refuse_shared(folder: Path, mode: int) -> None:
    """Refuse a state directory of ``mode`` that every user may write (see
    :func:`prepare_state`): whatever reads the store from it, a sync or a status."""
    if mode & stat.S_IWOTH:
        raise StoreError(f"{folder}: the state directory is writable by every user, so anyone "
                         "could replace the store; use a private folder (chmod 700)")


def prepare_state(path: Path) -> None:
    """Create the state directory (0700) and the store file (0600); refuse a shared directory.

    Whoever can write the state directory can swap the store or its WAL for their
    own; SQLite gives the WAL and shared-memory files the store file's mode.
    """
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = folder.stat().st_mode
    except OSError as exc:
        raise StoreError(f"{folder}: cannot create the state directory: {exc}") from exc
    refuse_shared(folder, mode)
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc}") from exc
