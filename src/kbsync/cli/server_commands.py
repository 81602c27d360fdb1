"""Commands that serve the knowledge base: mcp (stdio) and serve (the dashboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbsync.cli.base import ConfigOption, Errors, app, open_kb

__all__ = ["mcp", "serve_command"]

@app.command()
def mcp(
    config: ConfigOption = Path("."),
    allow_sync: Annotated[bool, typer.Option(
        help="Let clients run the sync tool (by default they may only read).")] = False,
) -> None:
    """Serve the knowledge base over the Model Context Protocol on stdio (extra `mcp`)."""
    with Errors():
        from kbsync.mcp.server import serve  # needs the `mcp` extra

        with open_kb(config) as kb:
            serve(kb, allow_sync=allow_sync)


@app.command("serve")
def serve_command(
    config: ConfigOption = Path("."),
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8765,
    allow_actions: Annotated[bool, typer.Option(
        "--allow-actions", help="Offer sync and erase (otherwise read-only).")] = False,
) -> None:
    """Serve a local web dashboard: sources, runs, document changes, search, a JSON API."""
    with Errors():
        from kbsync.serve import Guard, is_loopback, serve, sign_in_address  # extra `serve`

        if not is_loopback(host):
            typer.echo(f"warning: {host} is reachable from other machines; the dashboard "
                       "has no login, so anyone who can reach it can read the knowledge base"
                       + (" and run its actions" if allow_actions else ""), err=True)
        with open_kb(config) as kb:
            if kb.config.embedder.kind == "local":
                typer.echo("loading the local model (searches, here and from `kbsync "
                           "search`, then use it at once)", err=True)
                kb.query_vector("warm up")
            guard = Guard(bound=host)
            if allow_actions:  # the token signs in the browser that opens it: keep it private
                typer.echo(f"serving {sign_in_address(host, port, guard)} (actions allowed "
                           "from the browser that opens this address); Ctrl-C stops", err=True)
            else:
                typer.echo(f"serving http://{host}:{port}/ (read-only); Ctrl-C stops", err=True)
            serve(kb, host=host, port=port, allow_actions=allow_actions, guard=guard)
