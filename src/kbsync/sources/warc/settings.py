"""The ``[[sources]]`` table of a ``warc`` source, typed and checked before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kbsync.errors import ConfigError, ParameterError
from kbsync.sources.objects import secret_option
from kbsync.sources.web.config import DEFAULT_MEDIA_TYPES

__all__ = ["DEFAULT_MAX_BYTES", "WARC_SUFFIXES", "WarcSettings", "is_glob"]

DEFAULT_MAX_BYTES = 50_000_000
"""The largest payload read back for one page, decoded (a page over it is an error)."""
WARC_SUFFIXES = (".warc", ".warc.gz")
"""The names of WARC files, as a folder named in ``paths`` is searched for them."""


def is_glob(path: str) -> bool:
    """Whether a path holds a glob's wildcard (``*``, ``?``, ``[``)."""
    return any(c in path for c in "*?[")


@dataclass(frozen=True, slots=True)
class WarcSettings:
    """The WARC files of a crawl and how their records are read.

    - ``paths``: WARC files, folders holding them (searched for ``*.warc`` and
      ``*.warc.gz`` at any depth) or globs of them (``crawl/**/*.warc.gz``); a
      local path is relative to ``kbsync.toml``, a URL (``s3://bucket/crawl/*.warc.gz``)
      goes through fsspec.
    - ``media_types``: pages answered with another type are not documents (None: all).
    - ``max_bytes``: the largest payload read for one page, after its Content-Encoding.
    - ``storage_options`` / ``storage_options_env``: for fsspec, as an object store's
      (a secret is never written here: ``storage_options_env`` names the variable).
    """

    paths: tuple[str, ...]
    media_types: tuple[str, ...] | None = tuple(sorted(DEFAULT_MEDIA_TYPES))
    max_bytes: int = DEFAULT_MAX_BYTES
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    storage_options_env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.paths or not all(p.strip() for p in self.paths):
            raise ParameterError("paths must name WARC files, folders or globs "
                                 '(like ["crawl/*.warc.gz"])')
        if self.max_bytes <= 0:
            raise ParameterError(f"max_bytes must be a positive integer, got {self.max_bytes}")
        secrets = [name for name in self.storage_options if secret_option(str(name))]
        if secrets:
            raise ParameterError(
                f"storage_options holds {', '.join(secrets)}, a secret; never write one in "
                "kbsync.toml: name the environment variable that holds it in "
                "storage_options_env")

    def resolved_options(self, environ: Mapping[str, str]) -> dict[str, Any]:
        """``storage_options`` with each ``storage_options_env`` entry read from ``environ``;
        ConfigError naming the variable when it is not set."""
        options = dict(self.storage_options)
        for option, variable in self.storage_options_env.items():
            value = environ.get(variable)
            if value is None:
                raise ConfigError(f"{', '.join(self.paths)}: storage_options_env names "
                                  f"{variable} for {option}, and it is not set")
            options[option] = value
        return options
