"""Commands that set a knowledge base up: version, init, sources add and remove."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kbsync import __version__
from kbsync.cli.base import (
    ConfigOption,
    EndpointOption,
    Errors,
    JsonOption,
    app,
    emit,
    open_kb,
    sources_app,
)

__all__ = ["init", "sources_add", "sources_remove", "version", "version_info"]

@app.command()
def version(as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the version, "
                                                  "Python's and the extras installed.")] = False,
            verbose: Annotated[bool, typer.Option("--verbose", help="Also say which chunking "
                                                  "implementation runs.")] = False,
            ) -> None:
    """Print the version of kbsync."""
    if as_json:
        emit(version_info())
    else:
        typer.echo(__version__)
        if verbose:
            from kbsync.core import native

            typer.echo(native.describe())


_EXTRAS = {
    "tiktoken": ("tiktoken",), "html": ("trafilatura",), "pdf": ("pypdf",),
    "watch": ("watchdog",), "local": ("sentence_transformers",), "openai": ("httpx",),
    "web": ("httpx", "protego"), "qdrant": ("qdrant_client",), "lancedb": ("lancedb",),
    "langchain": ("langchain_core",), "llamaindex": ("llama_index.core",), "mcp": ("mcp",),
    "serve": ("starlette", "jinja2", "uvicorn"), "postgres": ("psycopg", "pgvector"),
    "office": ("docx", "pptx", "openpyxl", "ebooklib", "lxml", "striprtf"),
    "onnx": ("onnxruntime", "onnx"), "fsspec": ("fsspec",), "s3": ("fsspec", "s3fs"),
    "warc": ("warcio", "fsspec"), "ann": ("faiss",), "ray": ("ray",),
}
"""The modules each optional extra brings (those of pyproject.toml's extras)."""


def version_info() -> dict[str, Any]:
    """kbsync's version, Python's, and for each optional extra whether its modules are
    installed (found, not imported: a broken install shows when the feature is used)."""
    import importlib.util
    import platform

    from kbsync.core import native

    def found(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    return {"version": __version__, "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "chunking_core": "compiled" if native.kernel is not None else "numpy",
            "extras": {name: all(found(m) for m in modules)
                       for name, modules in _EXTRAS.items()}}


@app.command()
def init(
    sources: Annotated[list[str] | None, typer.Argument(
        help="Sources to keep in sync: folders, http(s) URLs, git+REPOSITORY, s3:// or "
             "other fsspec URLs, WARC files (crawl/*.warc.gz, warc+FOLDER).")] = None,
    folder: Annotated[Path, typer.Option(help="Where to write the configuration.")] = Path("."),
    allow_private: Annotated[list[str] | None, typer.Option(
        "--allow-private", help="Let the websites be crawled at this loopback or private "
        "address or range (repeatable; e.g. 127.0.0.1, 10.0.0.0/8).")] = None,
    embedder_kind: Annotated[str | None, typer.Option(
        "--embedder", help="hashing or local (default: local when installed).")] = None,
    endpoint_url: EndpointOption = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Write over a kbsync.toml already in the folder (its store is left "
                        "as it is).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write kbsync.toml with these sources and the defaults (SQLite store under .kbsync/).

    Refuses a folder that has a kbsync.toml, unless --force: then the file is written
    anew, and the store is never touched.

    The embedder is the local model when the extra `local` is installed, else the
    hashing embedder (lexical search), with a warning; the chunker is the default for
    that embedder, as a kbsync.toml without [chunker] would have it. Says which and why.
    """
    with Errors(as_json):
        from kbsync.engine import (
            chunker_choice,
            init_config,
            init_embedder,
            refuse_missing_folders,
        )

        refuse_missing_folders(folder, sources or [])
        embedder, warning = init_embedder(embedder_kind)
        config = init_config(folder, sources or [], embedder=embedder,
                             allow_private=allow_private or [], endpoint_url=endpoint_url,
                             overwrite=force)
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    kind = config.embedder.kind
    chunker = config.chunker
    if as_json:
        emit({"config": str(config.file), "sources": [s.name for s in config.sources],
              "embedder": kind, "chunker": {"strategy": chunker.strategy, **chunker.params}})
        return
    why = ("as --embedder asks" if embedder_kind is not None
           else "the local model is installed: semantic search, offline" if kind == "local"
           else "the local model is not installed: lexical search")
    typer.echo(f"wrote {config.file} with {len(config.sources)} source(s), "
               f"embedder {kind} ({why})")
    size = f"{chunker.params.get('min_tokens')}-{chunker.params.get('max_tokens')} tokens"
    typer.echo(f"chunker {chunker.strategy}, {size}: {chunker_choice(chunker, kind)}")


@sources_app.command("add")
def sources_add(
    path: Annotated[str, typer.Argument(
        help="A folder, an http(s) URL, git+REPOSITORY, an s3:// or other fsspec URL, or "
             "WARC files (crawl/*.warc.gz, warc+FOLDER).")],
    name: Annotated[str | None, typer.Option(help="Its name in the knowledge base.")] = None,
    endpoint_url: EndpointOption = None,
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Add a source: a folder, a website, a git repository or an object store."""
    with Errors(as_json), open_kb(config) as kb:
        kb.add_source(path, name, endpoint_url=endpoint_url)
        updated = kb.config
    if as_json:
        emit({"sources": [s.name for s in updated.sources]})
    else:
        typer.echo(f"added {updated.sources[-1].name}")


@sources_app.command("remove")
def sources_remove(
    name: Annotated[str, typer.Argument(help="The source's name.")],
    config: ConfigOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Remove a source (its documents are deleted by the next sync)."""
    with Errors(as_json), open_kb(config) as kb:
        kb.remove_source(name)
        updated = kb.config
    if as_json:
        emit({"sources": [s.name for s in updated.sources]})
    else:
        typer.echo(f"removed {name}: the next sync deletes its documents")
