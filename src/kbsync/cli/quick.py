"""The commands that must start at once, run without Typer: ``kbsync --version`` and
``kbsync status [--json] [-c PATH]``.

A status in a shell prompt or a cron check runs often, and Typer with the Click it carries
costs more to import than the rest of ``kbsync status``'s start (benchmarks/startup.py).
These command lines are few and plain, so they are read here; any other (``--help``, an
option this does not know, ``--debug``, a typo) goes to Typer, which gives its output and
its usage errors, and runs the same :func:`~kbsync.cli.status_view.show_status`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kbsync.cli.output import echo

__all__ = ["quick"]


def quick(args: Sequence[str]) -> int | None:
    """Run the command line ``args`` (after ``kbsync``) if it is one read here: its exit
    code; None for every other, which Typer runs."""
    if list(args) == ["--version"]:
        from kbsync import __version__

        echo(__version__)
        return 0
    if args[:1] == ["status"]:
        options = _status_options(args[1:])
        if options is not None:
            from kbsync.cli.status_view import show_status

            config, as_json = options
            return show_status(config, as_json=as_json)
    return None


def _status_options(args: Sequence[str]) -> tuple[Path, bool] | None:
    """``status``'s config and ``--json``, as Typer reads them (the last of each wins, a
    ``-c`` takes the next argument whatever it is); None for anything else."""
    config, as_json = Path("."), False
    rest = iter(args)
    for arg in rest:
        if arg == "--json":
            as_json = True
        elif arg in ("-c", "--config"):
            value = next(rest, None)
            if value is None:
                return None  # Typer's usage error
            config = Path(value)
        elif arg.startswith("--config="):
            config = Path(arg.removeprefix("--config="))
        else:
            return None
    return config, as_json
