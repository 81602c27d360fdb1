"""The one error tree of kbsync.

Every error kbsync raises on purpose derives from :class:`KbsyncError`, so a
caller can catch the whole family with one clause. Exit codes belong to the
command line, not here.
"""

from __future__ import annotations

__all__ = [
    "ChunkingError",
    "DependencyMissingError",
    "KbsyncError",
    "ParameterError",
]


class KbsyncError(Exception):
    """Root of every error kbsync raises on purpose."""


class ParameterError(KbsyncError, ValueError):
    """A setting is invalid: out of range, inconsistent with another, or unknown."""


class ChunkingError(KbsyncError):
    """Input could not be chunked (for example, it is not text)."""


class DependencyMissingError(KbsyncError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the optional dependency {module!r}: "
            f"install it with `pip install 'kbsync[{extra}]'`"
        )
        self.feature = feature
        self.extra = extra
        self.module = module
