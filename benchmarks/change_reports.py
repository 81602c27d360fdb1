"""Change reports on real documentation histories, against the line-diff oracle.

For every ``modify`` of every commit of each history in ``<repo>/../shared/corpora``
(``*-history.jsonl.gz``), the old and new files are extracted as a sync would
(the extractor of their media type), compared with :func:`kbsync.core.compare`, and
scored with :func:`oracle.oracle_similarity`. Printed per history: documents,
the share with ``|similarity - oracle| <= 0.1``, the mean ``|similarity - oracle|``,
re-examine verdicts where the oracle says at least half is unchanged, verdict
counts and the compare() time (p50 / p99).

    python benchmarks/change_reports.py [--corpora DIR] [--history NAME ...] [--worst N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbsync import Verdict, compare
from kbsync.extract.registry import extractor_for, media_type_for

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import oracle_similarity

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"
TOLERANCE = 0.1


def modifications(path: Path) -> Iterator[tuple[str, str, str]]:
    """``(path, old text, new text)`` of every modify in a history file, in order."""
    files: dict[str, str] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for n, line in enumerate(f):
            event: dict[str, Any] = json.loads(line)
            if n == 0:
                files = dict(event["files"])
                continue
            for change in event["changes"]:
                op, name = change["op"], change["path"]
                if op == "modify":
                    yield name, files[name], change["content"]
                if op == "delete":
                    del files[name]
                elif op == "rename":
                    del files[change["old_path"]]
                    files[name] = change["content"]
                else:
                    files[name] = change["content"]


def extracted(name: str, text: str) -> str:
    """The text a sync would compare: the file's record, as its extractor makes it."""
    media_type = media_type_for(name)
    extractor = extractor_for(media_type)
    if extractor is None:
        return text
    return extractor.extract(text.encode("utf-8"), locator=name, media_type=media_type).text


def measure(path: Path) -> tuple[dict[str, Any], list[tuple[float, float, str]]]:
    """The table row of one history, and (similarity, oracle, document) of each modify.

    The row's ``reexamined`` lists the re-examine verdicts (document, similarity, oracle).
    """
    rows: list[tuple[float, float, str]] = []
    reexamined: list[tuple[str, float, float]] = []
    times: list[float] = []
    verdicts: Counter[str] = Counter()
    reexamine_kept = 0
    for name, old_file, new_file in modifications(path):
        old, new = extracted(name, old_file), extracted(name, new_file)
        started = time.perf_counter()
        report = compare(old, new)
        times.append(time.perf_counter() - started)
        oracle = oracle_similarity(old, new)
        rows.append((report.similarity, oracle, name))
        verdicts[str(report.verdict)] += 1
        if report.verdict is Verdict.REEXAMINE_EXTRACTION:
            reexamined.append((name, report.similarity, oracle))
            reexamine_kept += oracle >= 0.5
    diffs = [abs(s - o) for s, o, _ in rows]
    times.sort()
    n = len(rows)
    return {
        "history": path.name.removesuffix("-history.jsonl.gz"),
        "documents": n,
        "within": sum(d <= TOLERANCE for d in diffs) / n if n else 1.0,
        "mean": sum(diffs) / n if n else 0.0,
        "reexamine_kept": reexamine_kept,
        "verdicts": dict(sorted(verdicts.items())),
        "p50_ms": 1000 * times[n // 2] if n else 0.0,
        "p99_ms": 1000 * times[min(n - 1, int(n * 0.99))] if n else 0.0,
        "reexamined": reexamined,
    }, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    parser.add_argument("--history", action="append", default=[],
                        help="a history name (e.g. django-docs); default: all")
    parser.add_argument("--worst", type=int, default=0,
                        help="also list the N documents farthest from the oracle")
    args = parser.parse_args(argv)
    paths = sorted(args.corpora.glob("*-history.jsonl.gz"))
    if args.history:
        paths = [p for p in paths if p.name.removesuffix("-history.jsonl.gz") in args.history]
    if not paths:
        print(f"no history files in {args.corpora}", file=sys.stderr)
        return 2
    print(f"{'history':<20} {'docs':>5} {'within 0.1':>10} {'mean |d|':>9} "
          f"{'reexam@>=.5':>11} {'p50 ms':>8} {'p99 ms':>8}  verdicts")
    for path in paths:
        row, rows = measure(path)
        print(f"{row['history']:<20} {row['documents']:>5} {row['within']:>10.1%} "
              f"{row['mean']:>9.3f} {row['reexamine_kept']:>11} {row['p50_ms']:>8.1f} "
              f"{row['p99_ms']:>8.1f}  {row['verdicts']}")
        for name, s, o in row["reexamined"]:
            print(f"    re-examine: {name}: similarity {s:.3f}, oracle {o:.3f}")
        for s, o, name in sorted(rows, key=lambda r: -abs(r[0] - r[1]))[:args.worst]:
            print(f"    {name}: similarity {s:.3f}, oracle {o:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
