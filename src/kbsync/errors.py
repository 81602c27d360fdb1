"""The one error tree of kbsync.

Every error kbsync raises on purpose derives from :class:`KbsyncError`, so a
caller can catch the whole family with one clause. Exit codes belong to the
command line, not here.
"""

from __future__ import annotations

__all__ = [
    "ChunkingError",
    "ClusterError",
    "ConfigError",
    "ConfirmationRequiredError",
    "DependencyMissingError",
    "DocumentChangingError",
    "DocumentError",
    "EmbeddingError",
    "ExtractionError",
    "KbsyncError",
    "LockedError",
    "ParameterError",
    "SchemaError",
    "SourceError",
    "StoreError",
    "Terminated",
    "VectorStoreError",
]


class KbsyncError(Exception):
    """Root of every error kbsync raises on purpose."""


class ParameterError(KbsyncError, ValueError):
    """A setting is invalid: out of range, inconsistent with another, or unknown."""


class ChunkingError(KbsyncError):
    """Input could not be chunked (for example, it is not text)."""


class DependencyMissingError(KbsyncError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str,
                 cause: BaseException | None = None) -> None:
        # The import's own error says what is really wrong when the package is there
        # but one of its dependencies is not (or is the wrong version).
        why = f" (the import failed: {type(cause).__name__}: {cause})" if cause else ""
        super().__init__(
            f"{feature} needs the optional dependency {module!r}: "
            f"install it with `pip install 'kbsync[{extra}]'`{why}"
        )
        self.feature = feature
        self.extra = extra
        self.module = module


class DocumentError(KbsyncError):
    """A problem with one document; the message names it. The run goes on with the others."""

    def __init__(self, locator: str, message: str) -> None:
        super().__init__(f"{locator}: {message}")
        self.locator = locator
        self.reason = message


class DocumentChangingError(DocumentError):
    """A document changed while it was read, or since it was listed: it is left for the
    next sync, which reads it whole. Its stored version, if any, stays as it is."""


class ExtractionError(DocumentError):
    """A document's bytes could not be turned into text (undecodable, binary, malformed)."""


class SourceError(KbsyncError):
    """A source could not be listed or read."""


class StoreError(KbsyncError):
    """The record store is unusable or inconsistent."""


class SchemaError(StoreError):
    """The store's schema is newer than this kbsync knows; nothing was written."""


class LockedError(KbsyncError):
    """Another process holds the writer lock of the knowledge base."""


class ConfigError(KbsyncError):
    """The configuration file is missing, malformed or inconsistent."""


class EmbeddingError(KbsyncError):
    """An embedding provider failed or answered something unusable (after its retries)."""


class VectorStoreError(KbsyncError):
    """An external vector store failed; the record store is left consistent."""


class ClusterError(KbsyncError):
    """The cluster a sync runs on lost a worker it needed (a killed actor, a lost node).

    What was applied stays: a sync run again redoes only what was not (the gates and
    the embedding cache skip the rest).
    """


class ConfirmationRequiredError(KbsyncError):
    """A sync would cost more than the configured bound (``[index] confirm_above_tokens``)."""


class Terminated(KeyboardInterrupt):
    """A run stopped by a signal other than Ctrl-C (SIGTERM), cleanly, as Ctrl-C stops it.

    A ``KeyboardInterrupt`` so that every clean-up and record of an interrupted run
    happens as for Ctrl-C; ``signum`` says which signal, so the command line can
    exit as a process killed by it would be reported (128 + the signal's number).
    """

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(f"terminated ({name})")
        self.signum = signum
