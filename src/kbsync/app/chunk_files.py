"""Chunk files as a sync would: extract each one's text, then chunk it, with diagnostics.

What ``kbsync chunk`` shows, so a chunker can be tried on real documents before
a knowledge base is built with it. Chunking runs on the extracted text, never on
raw markup, exactly as in a sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbsync.core.chunking import TextChunker
from kbsync.core.media import media_type_for
from kbsync.embed.tokenizer import counter_for
from kbsync.errors import DocumentError, KbsyncError
from kbsync.extract.registry import extractor_for
from kbsync.extract.text import TextExtractor
from kbsync.model import ChunkingDiagnostics, ChunkingResult
from kbsync.report import chunk_dict, diagnostics_dict

__all__ = ["ChunkedFiles", "chunk_files"]


@dataclass(frozen=True, slots=True)
class ChunkedFiles:
    """The chunks of every file that could be read, why the others could not, and the
    diagnostics of all the chunks together."""

    files: Mapping[str, ChunkingResult]
    """Each file's chunks and diagnostics, by path, in path order."""
    failures: Mapping[str, str]
    """Why a file could not be read or extracted, by path."""
    diagnostics: ChunkingDiagnostics
    """Of every chunk of every file."""

    def to_dict(self, *, chunks: bool = True) -> dict[str, Any]:
        """JSON-ready data; ``chunks`` false leaves out the list of each file's chunks."""
        return {
            "files": {path: {"diagnostics": diagnostics_dict(r.diagnostics),
                             **({"chunks": [chunk_dict(c) for c in r.chunks]} if chunks else {})}
                      for path, r in self.files.items()},
            "failures": dict(self.failures),
            "diagnostics": diagnostics_dict(self.diagnostics),
        }


def chunk_files(paths: Iterable[str | Path], strategy: str = "tttd",
                **params: Any) -> ChunkedFiles:
    """Chunk files, and every file under folders (hidden ones left out), with ``strategy``
    and ``params`` as for :func:`kbsync.chunk_text`.

    A file that cannot be read or extracted is a failure, and the others are
    still chunked; a path that does not exist, or invalid parameters, raise
    ``KbsyncError`` before anything is read.
    """
    # A knowledge base that counts in its model's tokens names the model's tokenizer file.
    counter = counter_for(str(params.get("token_counter", "")))
    chunker = TextChunker(strategy, counter=counter, **params)
    files: dict[str, ChunkingResult] = {}
    failures: dict[str, str] = {}
    for path in sorted(_files([Path(p) for p in paths])):
        # Unknown types are tried as text, as `kbsync chunk` is pointed at them on purpose.
        extractor = extractor_for(media_type_for(path.name)) or TextExtractor()
        try:
            text = extractor.extract(path.read_bytes(), locator=str(path)).text
        except OSError as exc:
            failures[str(path)] = f"cannot be read: {exc.strerror or exc}"
        except DocumentError as exc:
            failures[str(path)] = exc.reason
        else:
            files[str(path)] = chunker.chunk(text)
    everything = [c for result in files.values() for c in result.chunks]
    return ChunkedFiles(files, failures, chunker.diagnose(everything))


def _files(paths: list[Path]) -> Iterator[Path]:
    """The files named and the files under the folders named, the missing refused first."""
    for path in paths:
        if not path.exists():
            raise KbsyncError(f"{path}: no such file or folder")
    for path in paths:
        if path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file() and not any(
                part.startswith(".") for part in p.relative_to(path).parts))
        else:
            yield path
