"""Same-second rewrites on a real file system with 1-second timestamps (kbsync issue 32).

An ext2 image made with ``mkfs.ext2 -I 128`` (128-byte inodes: whole-second times) is
loop-mounted, a knowledge base indexes a folder on it, and five times over a note is
written, synced, rewritten with the same size within the same second, and synced again
with a plain ``sync()``: the count printed is how many of those syncs made search return
the new text. A trial whose rewrite fell into the next second (the sync took too long)
is not a same-second rewrite: it is tried again.

Needs root and loop devices (``mount -o loop``); anything else is refused with a
message. Uses the public API only, so it runs against any version of kbsync.

    sudo .venv/bin/python benchmarks/racy_ext2.py            # five trials
    sudo .venv/bin/python benchmarks/racy_ext2.py --trials 10
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kbsync import KnowledgeBase

WORDS = ("alpha", "gamma", "delta", "omega", "sigma", "kappa", "theta", "zetas", "betas",
         "iotas", "rhoes", "lamda")  # all of one length: a rewrite keeps the size
TRIES = 20  # attempts at one same-second trial before giving up on it


@contextlib.contextmanager
def ext2_mount(folder: Path, megabytes: int = 32) -> Iterator[Path]:
    """A fresh ext2 file system with 128-byte inodes, loop-mounted under ``folder``."""
    image, mount = folder / "ext2.img", folder / "mnt"
    with open(image, "wb") as f:
        f.truncate(megabytes * 2**20)
    subprocess.run(["mkfs.ext2", "-q", "-F", "-I", "128", str(image)], check=True,
                   capture_output=True)
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True,
                   capture_output=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _start_of_a_second() -> None:
    """Wait until just after the clock turns a second, so a write, a sync and a rewrite
    fit in it."""
    time.sleep(1 - time.time() % 1 + 0.01)


def _write(path: Path, word: str) -> None:
    with open(path, "w", encoding="utf-8") as f:  # in place: same inode, as editors often do
        f.write(f"The harbour pilot's code word this week is {word}.\n")


def trial(kb: KnowledgeBase, note: Path, old: str, new: str) -> bool | None:
    """One write, sync, same-second same-size rewrite, plain sync; whether search then
    finds the new text and not the old (None: the rewrite missed the second)."""
    _start_of_a_second()
    _write(note, old)
    written = note.stat()
    kb.sync()
    _write(note, new)
    rewritten = note.stat()
    if (rewritten.st_mtime_ns, rewritten.st_size) != (written.st_mtime_ns, written.st_size):
        return None
    kb.sync()

    def found(word: str) -> bool:
        return any(hit.key == note.name for hit in kb.search(word, 5, mode="text"))

    return found(new) and not found(old)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    if args.trials < 1 or args.trials >= len(WORDS):
        parser.error(f"--trials must be from 1 to {len(WORDS) - 1}")
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("mkfs.ext2", "mount", "umount")):
        print("needs root and mkfs.ext2, mount and umount (a loop mount of an ext2 image)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kbsync-racy-") as tmp:
        folder = Path(tmp)
        try:
            mounted = ext2_mount(folder)
            mount = mounted.__enter__()
        except subprocess.CalledProcessError as exc:
            why = (exc.stderr or b"").decode(errors="replace").strip()
            print(f"cannot make or mount the ext2 image: {why or exc}", file=sys.stderr)
            return 2
        try:
            docs = mount / "docs"
            docs.mkdir()
            note = docs / "note.md"
            picked = 0
            with KnowledgeBase.create(folder / "kb", [docs], embedder={"kind": "hashing"}) as kb:
                for n in range(args.trials):
                    for _ in range(TRIES):
                        outcome = trial(kb, note, WORDS[n], WORDS[n + 1])
                        if outcome is not None:
                            break
                    else:
                        print(f"trial {n + 1}: no rewrite fell in the second of its write "
                              f"in {TRIES} tries (syncs too slow here)", file=sys.stderr)
                        return 2
                    picked += outcome
                    print(f"trial {n + 1}: {'picked up' if outcome else 'MISSED'}")
        finally:
            mounted.__exit__(None, None, None)
    print(f"same-second rewrites picked up by a plain sync: {picked} of {args.trials}")
    return 0 if picked == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
