"""``python -m kbsync``: the command line."""

from kbsync.cli import main

main()
