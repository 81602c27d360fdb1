"""What a listed document comes to: the stat gate, else a read, the bytes and text gates and
chunks (an :class:`~kbsync.core.plan.Observation`)."""

from __future__ import annotations

import json
import sys
from bisect import bisect_right
from collections.abc import Callable
from functools import cache

from kbsync.core.identity import (
    derivation_hash,
    embedding_text_key,
    normalized_pieces_hash,
    source_bytes_hash,
)
from kbsync.core.normalize import NORMALIZER_VERSION, canonical_pieces
from kbsync.core.plan import (
    Action,
    ChunkDraft,
    DocumentVersion,
    Failed,
    Held,
    Observation,
    Refreshed,
    StoredDocument,
    Unchanged,
)
from kbsync.errors import DocumentChangingError, DocumentError
from kbsync.extract import Extractor
from kbsync.model import Chunk, Record, SourceItem
from kbsync.sources import Source
from kbsync.sync.chunker import Chunker
from kbsync.sync.scratch import Scratch
from kbsync.sync.tally import SourceTally

__all__ = [
    "Derive",
    "ExtractorFor",
    "count_unchanged",
    "derivation",
    "deriver",
    "observe",
    "stat_gate_passes",
    "unchanged_observation",
]


ExtractorFor = Callable[[str], Extractor | None]


Derive = Callable[[str], str | None]
"""The derivation a document of a media type is read with; None when no extractor reads it."""


def deriver(extractor_for: ExtractorFor, chunker: Chunker) -> Derive:
    """:data:`Derive` for these extractors and chunker: what a stored version was made with.

    A stored version whose derivation differs must be read again, whatever its stat.
    """
    @cache
    def derive(media_type: str) -> str | None:
        extractor = extractor_for(media_type)
        return None if extractor is None else derivation(chunker, extractor.identity)

    return derive


def derivation(chunker: Chunker, extractor_identity: str) -> str:
    """What a version is made with: the normalizer, the chunker and the extractor."""
    return derivation_hash(NORMALIZER_VERSION, chunker.fingerprint, extractor_identity)


def stat_gate_passes(item: SourceItem, old: StoredDocument | None, made_with: str) -> bool:
    """Gate 1: the stored version was made the same way and the source says it is the same
    (its stat, or an HTTP 304), so the document is not read at all.

    A racy stat (:class:`~kbsync.model.SourceStat`) passes nothing: one recorded as
    racy may be shared by a later write within its timestamp tick, so its bytes are
    compared until a stat is recorded that is no longer racy. (The scratch file's
    ``UNCHANGED`` query takes the same decision in SQL.)
    """
    return old is not None and old.derivation == made_with and (
        item.not_modified or (item.stat is not None and not item.stat.racy
                              and old.stat == item.stat))


def count_unchanged(scratch: Scratch, verify: bool, out: SourceTally) -> int:
    """Count in ``out`` what ``scratch`` settles as unchanged in one query; how many.

    ``verify`` reads everything again: then nothing is settled without a read, and no
    read is owed to a racy stat. Otherwise the documents read again only for a racy stat
    are counted too (``racy_rereads``), so that the bytes a sync of nothing reads are
    explained.
    """
    if not verify:
        out.racy_rereads += scratch.racy()
    unchanged, size = (0, 0) if verify else scratch.unchanged()
    out.documents[str(Action.UNCHANGED)] += unchanged
    out.bytes_skipped += size
    return unchanged


def unchanged_observation(item: SourceItem, old: StoredDocument) -> Observation:
    """Gate 1 passed; still refresh validators a 304 brought, or clear a missing count."""
    fresh = item.validators if item.validators is not None else old.validators
    if fresh != old.validators or old.missing:
        return Refreshed(item.key, item.stat, fresh)
    return Unchanged(item.key)


def observe(
    source: Source, item: SourceItem, old: StoredDocument | None, extractor: Extractor,
    derivation: str, chunker: Chunker, out: SourceTally,
    on_chunk: Callable[[Chunk], None] | None = None,
) -> Observation:
    """Gates 2 and 3 for one document that the stat gate let through.

    ``on_chunk`` sees every chunk made (for the run's chunking diagnostics).
    """
    try:
        data = source.read(item)
    except DocumentChangingError as exc:
        # Being written to is not a failure: the stored version stays, the next sync reads it.
        out.warnings.append(f"{item.key}: {exc.reason}")
        return Held(item.key)
    except DocumentError as exc:
        return Failed(item.key, exc.reason, stat=item.stat, derivation=derivation)
    except Exception as exc:  # a bug or an unforeseen error must not stop the run
        return Failed(item.key, f"cannot be read: {type(exc).__name__}: {exc}",
                      stat=item.stat, derivation=derivation)
    out.bytes_read += len(data)
    bytes_hash = source_bytes_hash(data)
    same_derivation = old is not None and old.derivation == derivation
    if same_derivation and old is not None and bytes_hash == old.bytes_hash:
        if old.stat == item.stat and old.validators == item.validators and not old.missing:
            return Unchanged(item.key)
        return Refreshed(item.key, item.stat, item.validators)
    try:
        record = extractor.extract(data, locator=item.locator, media_type=item.media_type)
    except DocumentError as exc:
        return Failed(item.key, exc.reason, stat=item.stat, derivation=derivation)
    except Exception as exc:  # a bug or an unforeseen error must not stop the run
        return Failed(item.key, f"cannot be extracted: {type(exc).__name__}: {exc}",
                      stat=item.stat, derivation=derivation)
    out.warnings.extend(f"{item.key}: {warning}" for warning in record.warnings)
    del data  # the extracted text replaces the bytes: never both copies and the chunks
    text = record.text
    # Hashed block by block: a whole-text normalization holds word arrays many
    # times the size of the text.
    text_hash = normalized_pieces_hash(canonical_pieces([text]), NORMALIZER_VERSION,
                                       extractor.identity)
    rechunk = not (same_derivation and old is not None and text_hash == old.text_hash)
    return DocumentVersion(
        key=item.key, locator=item.locator, media_type=item.media_type, stat=item.stat,
        bytes_hash=bytes_hash, text_hash=text_hash, derivation=derivation, title=record.title,
        metadata=json.dumps({**dict(record.metadata), **dict(item.metadata)}, sort_keys=True),
        text=text,
        chunks=_chunk_record(record, chunker, on_chunk) if rechunk else (), rechunked=rechunk,
        validators=item.validators, renamed_from=item.renamed_from,
    )


def _chunk_record(record: Record, chunker: Chunker,
                  on_chunk: Callable[[Chunk], None] | None) -> tuple[ChunkDraft, ...]:
    """Chunk the record's text as one stream; each chunk takes the heading it starts under.

    One stream (rather than one per section) keeps short sections together with
    their neighbours instead of making a fragment of every heading.
    """
    text, starts = _record_layout(record)
    drafts: list[ChunkDraft] = []
    # Chunks one at a time, not a tuple of them beside the drafts; one string per
    # boundary kind, not one per chunk (a big document has hundreds of thousands).
    for c in chunker.text_chunker().chunks([text]):
        if on_chunk is not None:
            on_chunk(c)
        section = max(0, bisect_right(starts, c.start) - 1)
        heading = record.sections[section].heading if record.sections else None
        drafts.append(ChunkDraft(c.identity, c.text, section, heading, c.start, c.end,
                                 c.token_count, sys.intern(str(c.boundary)),
                                 embedding_text_key(c.text)))
    return tuple(drafts)


def _record_layout(record: Record) -> tuple[str, list[int]]:
    """The record's text and where each section starts in it (as :attr:`Record.text`)."""
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for section in record.sections:
        starts.append(length + (2 if parts else 0))
        for piece in (section.heading, section.text):
            if piece:
                length += len(piece) + (2 if parts else 0)
                parts.append(piece)
    return "\n\n".join(parts), starts
