"""How a sync runs: one value every driver takes, instead of a bag of keyword arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbsync.core.plan import BOILERPLATE_SHARE

__all__ = ["CACHE_SECONDS", "BatchLimits", "SyncOptions"]

CACHE_SECONDS = 1.0
"""Seconds of embedding between two commits of the embedding cache, at most."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How much of a source's changed documents a sync holds at once.

    A batch closes at ``documents`` documents or once the versions read for it
    (text and chunks) reach ``bytes``; a single larger document is a batch of its own.
    The first batch closes at ``first`` documents and each next one at twice the one
    before, up to ``documents``: the first documents are searchable soon after the
    reading ends even when the model embeds a few dozen chunks a second, and the large
    batches that a fast embedder needs come after.
    The vectors it computes are committed to the embedding cache every
    ``cache_seconds`` of embedding (0: every batch of 64), and when embedding stops.
    """

    documents: int = 1024
    bytes: int = 16 * 2**20
    first: int = 64
    cache_seconds: float = CACHE_SECONDS


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """What a sync may do and how.

    - ``dry_run``: only plan (what :meth:`KnowledgeBase.plan` reports); write nothing.
    - ``verify``: read every document even when the source says it is unchanged.
    - ``allow_mass_delete``: delete more than half of a source's documents at once
      (else those deletions wait for consent, :func:`kbsync.core.plan.mass_deletion`).
    - ``accept_root``: take a folder source whose root is on another device than at
      the last sync as moved there on purpose (else its listing counts as incomplete
      when it lacks documents: :func:`kbsync.sync.listing.check_root`).
    - ``due``: a revisiting source (a website) checks only the pages whose revisit
      schedule says they are due (:mod:`kbsync.core.schedule`); the others are unchanged,
      never deleted for not being checked.
    - ``accept_replacements``: apply at once a new text that shares almost nothing
      with the stored one (else it waits for a second sync to see it).
    - ``confirm_above_tokens``: refuse, before embedding anything of a source, a bill
      over this many tokens (None: no bound);
      ``bound_setting`` names the setting it comes from, for the refusal's message.
    - ``boilerplate_share``, ``index_boilerplate``: chunks in more than this share of
      a host's documents are boilerplate, neither embedded nor searched unless indexed.
    - ``batch``: how many documents are planned, embedded and applied together.
    - ``read_workers``: processes that read, extract and chunk documents (0: one per
      core, at most 8; 1: this process only), used when a source has at least
      :data:`~kbsync.sync.reading.POOL_MIN_DOCUMENTS` to read and can be forked.
    - ``scratch_dir``: where documents read wait for their batch (the system's
      temporary directory when None).
    - ``only``: sync only the sources of these names (None: every source); the others,
      and sources no longer configured, are left as they are.
    """

    dry_run: bool = False
    verify: bool = False
    due: bool = False
    allow_mass_delete: bool = False
    accept_root: bool = False
    accept_replacements: bool = False
    confirm_above_tokens: int | None = None
    bound_setting: str = ""
    boilerplate_share: float = BOILERPLATE_SHARE
    index_boilerplate: bool = False
    batch: BatchLimits = field(default_factory=BatchLimits)
    read_workers: int = 0
    scratch_dir: Path | None = None
    only: frozenset[str] | None = None
