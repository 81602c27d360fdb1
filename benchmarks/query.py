"""Query latency with the local model: one-shot ``kbsync search`` in each mode, with and
without a running ``kbsync serve``, and in-process searches.

What is measured
    A knowledge base of the sample corpus (``examples/corpus``) in a temporary folder, with
    ``[embedder] kind = "local"`` (all-MiniLM-L6-v2), synced once (the sync also exports
    the model's fp32 ONNX query encoder into the user's cache). Then, each timed as wall
    seconds around the whole command (interpreter start, imports, query encoder, search):

    ``search, text mode``       ``kbsync search --mode text``: no model (the reference);
    ``search, vector mode``     ``kbsync search --mode vector``: the query is embedded by
                                the ONNX export, without importing torch;
    ``search, hybrid mode``     ``kbsync search --mode hybrid`` (the default mode);
    ``serve: first search``     the first ``kbsync search --mode vector`` after
                                ``kbsync serve`` started (the kept-alive process
                                alternative: a server that holds the model);
    ``serve: next searches``    later searches through that server;
    ``in process: first/next``  ``KnowledgeBase.search`` in one process, vector and
                                hybrid: the first call loads the query encoder.

    Each row is the median of ``--repeat`` runs (the first-search rows of one run each).
    The last lines say whether a one-shot search imported torch (``python -X importtime``)
    and the cold hybrid search's time over the cold text search's.

Run it from the repository root (needs the ``local`` and ``serve`` extras)::

    python benchmarks/query.py            # 5 repeats
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "corpus"
QUERIES = ["how do retries work", "rotate the database password", "what does the harbour "
           "master do at night", "configure the deployment", "bread proofing time"]


def _kbsync(*args: str) -> list[str]:
    return [sys.executable, "-m", "kbsync", *args]


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _knowledge_base(folder: Path) -> Path:
    from kbsync.engine import init_config

    shutil.copytree(CORPUS, folder / "docs")
    init_config(folder, ["docs"])
    config = (folder / "kbsync.toml").read_text()
    head, _, tail = config.partition("[embedder]")
    rest = tail.split("\n[", 1)
    config = head + '[embedder]\nkind = "local"\n' + ("\n[" + rest[1] if len(rest) > 1 else "")
    (folder / "kbsync.toml").write_text(config)
    subprocess.run(_kbsync("sync", "--yes", "-c", str(folder)), check=True,
                   capture_output=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        kb = _knowledge_base(Path(tmp))
        c = ["-c", str(kb)]

        def searches(mode: str) -> list[float]:
            return [_timed(_kbsync("search", QUERIES[i % len(QUERIES)], "--mode", mode, *c))
                    for i in range(args.repeat)]

        for mode in ("text", "vector", "hybrid"):
            rows.append((f"search, {mode} mode", statistics.median(searches(mode))))
        imported = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "kbsync", "search", QUERIES[0], *c],
            capture_output=True, text=True, check=True).stderr
        torch = any(line.rstrip().endswith((" torch", " sentence_transformers"))
                    for line in imported.splitlines())
        port = _free_port()
        server = subprocess.Popen(_kbsync("serve", "--port", str(port), *c),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            from kbsync.app.served import notice_path
            from kbsync.engine import load_config

            notice = notice_path(load_config(kb))
            for _ in range(600):
                if notice.exists():
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        pass
                time.sleep(0.1)
            else:
                raise SystemExit("kbsync serve did not start")
            rows.append(("serve: first search", _timed(
                _kbsync("search", QUERIES[0], "--mode", "vector", *c))))
            rows.append(("serve: next searches", statistics.median(searches("vector"))))
        finally:
            server.terminate()
            server.wait(timeout=60)
        from kbsync import KnowledgeBase

        for mode in ("vector", "hybrid"):
            with KnowledgeBase.open(kb) as opened:
                start = time.perf_counter()
                opened.search(QUERIES[0], mode=mode)  # type: ignore[arg-type]
                rows.append((f"in process: first search, {mode}", time.perf_counter() - start))
                times = []
                for i in range(args.repeat):
                    start = time.perf_counter()
                    query = QUERIES[(i + 1) % len(QUERIES)]
                    opened.search(query, mode=mode)  # type: ignore[arg-type]
                    times.append(time.perf_counter() - start)
                rows.append((f"in process: next searches, {mode}", statistics.median(times)))
    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  seconds (median of {args.repeat})")
    for name, seconds in rows:
        print(f"{name:{width}}  {seconds:7.3f}")
    times = dict(rows)
    print(f"torch imported by a one-shot search: {'yes' if torch else 'no'}")
    ratio = times["search, hybrid mode"] / times["search, text mode"]
    print(f"cold hybrid / cold text: {ratio:.2f}x")
    print(json.dumps({name: round(s, 4) for name, s in rows}))


if __name__ == "__main__":
    main()
