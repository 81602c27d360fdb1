"""Every optional dependency that fails to import says so, with the import's own error.

A package can be installed and still fail to import (one of its own dependencies
missing or of the wrong version, as lxml 6 did to trafilatura); the message must
then show why, not only which extra to install.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kbsync.errors import DependencyMissingError


def _html() -> object:
    from kbsync.extract.html import HtmlExtractor

    return HtmlExtractor().extract(b"<p>hi</p>", locator="a.html")


def _pdf() -> object:
    from kbsync.extract.pdf import PdfExtractor

    return PdfExtractor().extract(b"%PDF-1.4\n", locator="a.pdf")


def _watch() -> object:
    from kbsync.app.watch import _watchdog

    return _watchdog()


def _tiktoken() -> object:
    from kbsync.core.chunking.tokens import TiktokenCounter

    return TiktokenCounter()


def _openai() -> object:
    from kbsync.embed.providers.openai import OpenAIEmbedder, OpenAISettings

    return OpenAIEmbedder(OpenAISettings("some-model"))


def _local() -> object:
    from kbsync.embed.providers.local import LocalEmbedder

    return LocalEmbedder()


def _onnx() -> object:
    from kbsync.embed.providers.local import LocalEmbedder

    return LocalEmbedder(backend="onnx-int8")


def _postgres() -> object:
    from kbsync.store.postgres.connection import load_psycopg

    return load_psycopg()


def _qdrant(tmp: Path) -> object:
    from kbsync.vectors.qdrant import QdrantSink

    return QdrantSink(path=tmp)


def _lancedb(tmp: Path) -> object:
    from kbsync.vectors.lancedb import LanceDBSink

    return LanceDBSink(path=tmp)


def _s3() -> object:
    from fsspec.registry import _registry

    from kbsync.sources.objects import ObjectStoreSource

    # fsspec keeps the class of a protocol it loaded (an earlier test's): forget it here.
    loaded = _registry.pop("s3", None)
    try:
        return ObjectStoreSource("s3://bucket/docs")
    finally:
        if loaded is not None:
            _registry["s3"] = loaded


def _fsspec() -> object:
    from kbsync.sources.objects import ObjectStoreSource

    return ObjectStoreSource("memory://docs")


def _module(name: str) -> Callable[[], object]:
    """Import a module of kbsync afresh: it imports its extra when it is imported."""
    def load() -> object:
        sys.modules.pop(name, None)
        return importlib.import_module(name)
    return load


CASES: dict[str, tuple[str, Callable[..., object]]] = {
    "html": ("trafilatura", _html),
    "pdf": ("pypdf", _pdf),
    "watch": ("watchdog", _watch),
    "tiktoken": ("tiktoken", _tiktoken),
    "openai": ("httpx", _openai),
    "local": ("sentence_transformers", _local),
    "onnx": ("onnxruntime", _onnx),
    "postgres": ("psycopg", _postgres),
    "qdrant": ("qdrant_client", _qdrant),
    "lancedb": ("lancedb", _lancedb),
    "s3": ("s3fs", _s3),
    "fsspec": ("fsspec", _fsspec),
    "serve": ("starlette", _module("kbsync.serve")),
    "web": ("protego", _module("kbsync.sources.web.source")),
    "warc": ("warcio", _module("kbsync.sources.warc.records")),
    "mcp": ("mcp", _module("kbsync.mcp.server")),
    "langchain": ("langchain_core", _module("kbsync.adapters.langchain")),
    "llamaindex": ("llama_index", _module("kbsync.adapters.llamaindex")),
}


@pytest.mark.parametrize("extra", sorted(CASES))
def test_an_extra_that_fails_to_import_shows_the_import_error(
        extra: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module, use = CASES[extra]
    # None in sys.modules makes importing it fail, its submodules too (loaded or not).
    for name in [n for n in sys.modules if n.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, module, None)
    for name in ("kbsync.serve", "kbsync.sources.web.source", "kbsync.sources.warc.records",
                 "kbsync.mcp.server",
                 "kbsync.adapters.langchain", "kbsync.adapters.llamaindex"):
        if name in sys.modules:  # put back as it was, whatever the fresh import did
            monkeypatch.setitem(sys.modules, name, sys.modules[name])
    with pytest.raises(DependencyMissingError) as caught:
        use(tmp_path) if use in (_qdrant, _lancedb) else use()
    message = str(caught.value)
    assert f"kbsync[{extra}]" in message
    cause = caught.value.__cause__
    assert isinstance(cause, ImportError)
    assert module in str(cause)
    assert str(cause) in message
