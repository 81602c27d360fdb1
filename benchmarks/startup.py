"""How long commands take to start: ``kbsync --version``, ``kbsync status`` and
``kbsync status --json`` of a small synced folder against a bare ``python -c pass``, as a
ratio (``--all`` adds ``import kbsync.cli``, ``--help``, a no-op ``sync`` and a ``search``).

    python benchmarks/startup.py [--runs 11] [--all] [--importtime COMMAND]
    python benchmarks/startup.py --profile status

Each command runs ``--runs`` times as a new process (cold: nothing of kbsync is loaded,
the files are in the page cache, the modules compiled to .pyc files as an installed
package has them, even where ``PYTHONDONTWRITEBYTECODE`` is set), the commands taking
turns so that a burst of load on the machine falls on all of them; a row is the median of
its runs and its ratio to the median of ``python -c pass``, of the wall time and of the CPU
time (user and system, which a loaded machine stretches less). The goal is ``kbsync status``
within 10x a bare interpreter.

``--importtime status`` prints instead what that command imports, slowest first
(``python -X importtime``), by the cumulative microseconds of each module; ``--profile
status`` the functions it spends most in, imports included (``python -m cProfile``).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "corpus"

# As an installed kbsync runs: its modules compiled once into .pyc files, not on each start.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(command: list[str]) -> tuple[float, float]:
    """The wall time and the CPU time (user and system) of one run of ``command`` (its
    output discarded; it must succeed). The CPU time moves less with the machine's load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=ENV)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def commands(home: Path, every: bool = False) -> dict[str, list[str]]:
    """Each row's command line, against the knowledge base in ``home``: the ``kbsync``
    command installed beside this Python (as a person runs it), else ``python -m kbsync``;
    with ``every`` the slower commands too."""
    script = Path(sys.executable).with_name("kbsync")
    kbsync = [str(script)] if script.exists() else [sys.executable, "-m", "kbsync"]
    config = ["-c", str(home)]
    rows = {"python -c pass": [sys.executable, "-c", "pass"],
            "kbsync --version": [*kbsync, "--version"],
            "kbsync status": [*kbsync, "status", *config],
            "kbsync status --json": [*kbsync, "status", "--json", *config]}
    if every:
        rows |= {"python -c 'import kbsync.cli'": [sys.executable, "-c", "import kbsync.cli"],
                 "kbsync --help": [*kbsync, "--help"],
                 "kbsync sync (no-op)": [*kbsync, "sync", "-q", *config],
                 "kbsync search": [*kbsync, "search", "rotate the secrets", "-k", "3", *config]}
    return rows


def knowledge_base(home: Path) -> None:
    """A knowledge base in ``home``: 20 Markdown files, the hashing embedder, synced."""
    (home / "docs").mkdir()
    for path in sorted(CORPUS.glob("*.md"))[:20]:  # the corpus has 17
        shutil.copy(path, home / "docs" / path.name)
    kbsync = [sys.executable, "-m", "kbsync"]
    subprocess.run([*kbsync, "init", "docs", "--folder", str(home), "--embedder", "hashing"],
                   check=True, stdout=subprocess.DEVNULL, env=ENV)
    subprocess.run([*kbsync, "sync", "-q", "-c", str(home)], check=True, env=ENV)


def importtime(command: list[str], top: int = 25) -> None:
    """The ``top`` modules ``command`` spends most importing, cumulative, slowest first."""
    if Path(command[0]).name == "kbsync":  # the script, run by this Python with its option
        command = [sys.executable, "-m", "kbsync", *command[1:]]
    found = subprocess.run([command[0], "-X", "importtime", *command[1:]], check=True, env=ENV,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    rows = []
    for line in found.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line[len("import time:"):].split("|")
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    for cumulative, name in sorted(rows, reverse=True)[:top]:
        print(f"{cumulative / 1000:8.1f} ms {name}")
    print(f"{len(rows)} modules")


def profile(command: list[str], top: int = 30) -> None:
    """The ``top`` functions ``command`` (a ``kbsync`` one) spends most in, cumulative."""
    with tempfile.TemporaryDirectory() as folder:
        stats = Path(folder) / "profile"
        args = command[1:] if Path(command[0]).name == "kbsync" else command[3:]
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "kbsync", *args],
                       stdout=subprocess.DEVNULL, env=ENV, check=False)
        import pstats

        pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--all", action="store_true", help="time the slower commands too")
    parser.add_argument("--importtime", metavar="ROW", help="a row's name after 'kbsync ' "
                        "(status, search, ...), or 'import kbsync.cli'")
    parser.add_argument("--profile", metavar="ROW", help="a row's name after 'kbsync '")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        knowledge_base(home)
        rows = commands(home, every=args.all or bool(args.importtime or args.profile))
        if args.importtime or args.profile:
            wanted = [name for name in rows if (args.importtime or args.profile) in name]
            (importtime if args.importtime else profile)(rows[wanted[0]])
            return
        for command in rows.values():
            wall(command)  # the page cache warm, .pyc files written
        times: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, command in rows.items():
                seconds, used = wall(command)
                times[name].append(seconds)
                cpu[name].append(used)
    bare = statistics.median(times["python -c pass"])
    bare_cpu = statistics.median(cpu["python -c pass"])
    print(f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'command':32} {'median':>9} {'min':>9} {'ratio':>6}  {'cpu':>9} {'ratio':>6}")
    for name, seconds in times.items():
        median, used = statistics.median(seconds), statistics.median(cpu[name])
        print(f"{name:32} {median:7.3f} s {min(seconds):7.3f} s {median / bare:5.1f}x  "
              f"{used:7.3f} s {used / bare_cpu:5.1f}x")


if __name__ == "__main__":
    main()
