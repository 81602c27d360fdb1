"""Edit kinds on real documentation histories: a labelled sample, the oracle's rules, rewrites.

For every ``modify`` of the three histories in ``<repo>/../shared/corpora``, the old and
new files are extracted as a sync would and compared with :func:`kbsync.core.compare`. The
verdict *before* is the similarity rule that kinds replaced (cosmetic when similarity
>= 0.98); *after* is the verdict of today's compare(). Printed:

1. The labelled sample (``benchmarks/edit_labels.tsv``): 310 edits, each labelled
   cosmetic or substantive by reading its word diff (``--show`` prints them). Stratum
   ``random``: 90 edits of django-docs, 40 of fastapi-docs-2023 and 50 of fastapi-docs,
   drawn with ``random.Random("37:<history>").sample``. Stratum ``small``: 80 edits
   drawn with ``random.Random("37:small").sample`` from the others where at most 6
   words changed as written (:mod:`edit_oracle`), because a random draw holds few
   candidates for cosmetic. Stratum ``heldout``, labelled after the classifier was
   written: 25 edits drawn from all the others and 25 from the other small ones, with
   one ``random.Random("38:heldout")``. The confusion tables, before and after.
2. The oracle's rules over every edit: edits that change a number, or 10 or more
   words, that were called cosmetic; edits of whitespace, punctuation or case only that
   were called cosmetic or unchanged.
3. Rewrites (line-oracle similarity under 0.3) with their similarity, the share of the
   old text kept and the verdict; and the highest similarity of any final document of
   the histories replaced by an error page or a login wall (the collapses the
   re-examine verdict is for).

    python benchmarks/edit_kinds.py [--corpora DIR] [--show STRATUM]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kbsync import ChangeKind, ChangeReport, compare, normalize
from kbsync.core.compare import REEXAMINE_KEPT, REEXAMINE_SIMILARITY

sys.path.insert(0, str(Path(__file__).resolve().parent))

from change_reports import extracted, modifications
from edit_oracle import OracleEdit, oracle_edit, word_runs
from oracle import oracle_similarity

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"
LABELS = Path(__file__).resolve().parent / "edit_labels.tsv"
SEED = 37
RANDOM_DRAW = {"django-docs": 90, "fastapi-docs-2023": 40, "fastapi-docs": 50}
SMALL_DRAW = 80
HELDOUT_DRAW = 25
SMALL_WORDS = 6
OLD_COSMETIC = 0.98
REWRITE = 0.3
COLLAPSES = {
    "error page": "404 Not Found\n\nThe page you requested could not be found. "
                  "Go back to the home page.",
    "login wall": "Sign in\n\nPlease sign in to continue. Email address. Password. "
                  "Forgot your password? Create an account.",
    "maintenance": "Service unavailable\n\nWe are down for maintenance and will be back "
                   "shortly. Thank you for your patience.",
    "bot check": "Just a moment...\n\nChecking if the site connection is secure. This "
                 "process is automatic. Your browser will redirect to your requested "
                 "content shortly. Please allow up to 5 seconds.",
    "access denied": "Access denied\n\nYou don't have permission to access this page on "
                     "this server. Reference number 18.2f3e.",
    "cookie wall": "We value your privacy\n\nWe use cookies to improve your experience "
                   "on our site, to show you content and to analyse our traffic. Accept all. "
                   "Reject all. Manage preferences.",
}
THRESHOLDS = (0.05, 0.08, 0.1, 0.12, 0.15, 0.2)


@dataclass(frozen=True)
class Edit:
    """One modify, compared and read by the oracle."""

    history: str
    index: int
    commit: str
    path: str
    size: int
    kept: float
    changed: bool
    similarity: float
    kind: str
    reason: str
    verdict: str
    oracle: OracleEdit
    line_oracle: float

    @property
    def before(self) -> str:
        """The verdict by the similarity rule that kinds replaced."""
        if not self.changed:
            return "unchanged"
        return "cosmetic" if self.similarity >= OLD_COSMETIC else "other"


def histories(corpora: Path) -> list[Path]:
    return [corpora / f"{name}-history.jsonl.gz" for name in RANDOM_DRAW]


def commits_of(path: Path) -> Iterator[str]:
    """The commit of each modify of a history, in the order of :func:`modifications`."""
    import gzip
    import json
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        for n, line in enumerate(f):
            if n == 0:
                continue
            event = json.loads(line)
            yield from (event["commit"] for c in event["changes"] if c["op"] == "modify")


def measure(path: Path) -> list[Edit]:
    """Every modify of one history, compared and read by the oracle."""
    history = path.name.removesuffix("-history.jsonl.gz")
    out = []
    for index, ((name, old_file, new_file), commit) in enumerate(
            zip(modifications(path), commits_of(path), strict=True)):
        old, new = extracted(name, old_file), extracted(name, new_file)
        report = compare(old, new)
        out.append(Edit(history, index, commit, name, max(len(old), len(new)),
                        kept_share(old, report), report.changed,
                        report.similarity, str(report.kind), report.reason, str(report.verdict),
                        oracle_edit(old, new), oracle_similarity(old, new)))
    return out


def kept_share(old: str, report: ChangeReport) -> float:
    """The share of the old text's normalized bytes outside its removed regions."""
    size = len(normalize(old).text.encode())
    gone = sum(len(normalize(old[r.offset:r.end]).text.encode()) for r in report.removed_regions)
    return 1.0 - gone / size if size else 0.0


def held(similarity: float, kept: float, threshold: float) -> bool:
    """Whether the re-examine verdict holds a text at this similarity threshold."""
    return similarity <= threshold and kept < REEXAMINE_KEPT


def draw(edits: dict[str, list[Edit]]) -> list[tuple[str, Edit]]:
    """The sample: (stratum, edit), as the module docstring says it was drawn."""
    picked: list[tuple[str, Edit]] = []
    taken = set()
    for history, k in RANDOM_DRAW.items():
        rows = edits[history]
        for i in random.Random(f"{SEED}:{history}").sample(range(len(rows)), k):
            picked.append(("random", rows[i]))
            taken.add((history, i))
    pool = [e for history in RANDOM_DRAW for e in edits[history]
            if e.oracle.raw_words <= SMALL_WORDS and (history, e.index) not in taken]
    small = random.Random(f"{SEED}:small").sample(pool, SMALL_DRAW)
    picked += [("small", e) for e in small]
    taken |= {(e.history, e.index) for e in small}
    rest = [e for history in RANDOM_DRAW for e in edits[history]
            if (e.history, e.index) not in taken]
    rng = random.Random(f"{SEED + 1}:heldout")
    heldout = rng.sample(rest, HELDOUT_DRAW)
    rest_small = [e for e in rest if e.oracle.raw_words <= SMALL_WORDS and e not in heldout]
    heldout += rng.sample(rest_small, HELDOUT_DRAW)
    return picked + [("heldout", e) for e in heldout]


def read_labels(path: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(history, commit, path) -> (label, note) of the labelled sample."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t")
        return {(r["history"], r["commit"], r["path"]): (r["label"], r["note"]) for r in rows}


def confusion(rows: list[tuple[str, str]], title: str) -> None:
    """Print label (rows) against verdict (columns: cosmetic or unchanged, substantive)."""
    table = Counter(rows)
    print(f"  {title:<10} {'called cosmetic/unchanged':>26} {'called substantive':>19}")
    for label in ("cosmetic", "substantive"):
        print(f"  {label:<10} {table[(label, 'cosmetic')]:>26} {table[(label, 'other')]:>19}")
    agree = table[("cosmetic", "cosmetic")] + table[("substantive", "other")]
    print(f"  agreement {agree}/{len(rows)} ({agree / len(rows):.1%})")


def called(verdict: str) -> str:
    return "cosmetic" if verdict in ("cosmetic", "unchanged") else "other"


def show_sample(edits: dict[str, list[Edit]], stratum: str, corpora: Path) -> None:
    """Print the word diff of each sampled edit of ``stratum``, for labelling."""
    wanted = {(e.history, e.index) for s, e in draw(edits) if s == stratum}
    for path in histories(corpora):
        history = path.name.removesuffix("-history.jsonl.gz")
        for index, ((name, old_file, new_file), commit) in enumerate(
                zip(modifications(path), commits_of(path), strict=True)):
            if (history, index) not in wanted:
                continue
            print(f"### {history} {commit} {name}")
            for a, b in word_runs(extracted(name, old_file), extracted(name, new_file))[:25]:
                print(f"  [-{' '.join(a)[:600]}-] {{+{' '.join(b)[:600]}+}}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--show", choices=("random", "small", "heldout"),
                        help="print the word diffs of one stratum of the sample and stop")
    args = parser.parse_args(argv)
    if not all(p.is_file() for p in histories(args.corpora)):
        print(f"history files missing under {args.corpora}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    edits = {p.name.removesuffix("-history.jsonl.gz"): measure(p)
             for p in histories(args.corpora)}
    if args.show:
        show_sample(edits, args.show, args.corpora)
        return 0
    labels = read_labels(args.labels)
    sample = draw(edits)
    print(f"1. Labelled sample ({len(sample)} edits; {args.labels.name})")
    rows = []
    for stratum, e in sample:
        label, _ = labels[(e.history, e.commit, e.path)]
        rows.append((stratum, label, e))
    for name, chosen in [("all", rows)] + [(stratum, [r for r in rows if r[0] == stratum])
                                           for stratum in ("random", "small", "heldout")]:
        print(f" {name}: {len(chosen)} edits, {sum(r[1] == 'cosmetic' for r in chosen)} "
              "labelled cosmetic")
        confusion([(label, called(e.before)) for _, label, e in chosen], "before")
        confusion([(label, called(e.verdict)) for _, label, e in chosen], "after")
    print(" disagreements after:")
    for stratum, label, e in rows:
        if (label == "cosmetic") != (called(e.verdict) == "cosmetic"):
            print(f"  {stratum} {e.history} {e.commit[:12]} {e.path}: labelled {label}, "
                  f"{e.verdict} ({e.kind}: {e.reason}), similarity {e.similarity:.3f}")

    print("\n2. The oracle's rules over every edit (before -> after)")
    print(f"  {'history':<18} {'edits':>5} {'number: cosmetic':>18} {'>=10 words: cosmetic':>22} "
          f"{'layout only: cosmetic/unchanged':>32}")
    everything = [e for rows_ in edits.values() for e in rows_]
    for name, chosen in [*edits.items(), ("all", everything)]:
        number = [e for e in chosen if e.oracle.number]
        wordy = [e for e in chosen if e.oracle.words >= 10]
        layout = [e for e in chosen if e.oracle.layout_only]
        print(f"  {name:<18} {len(chosen):>5} "
              f"{_cosmetic(number, 'before')}/{len(number)} -> {_cosmetic(number, 'after')}"
              f"{'':>5} {_cosmetic(wordy, 'before')}/{len(wordy)} -> "
              f"{_cosmetic(wordy, 'after'):<6}"
              f"{_cosmetic(layout, 'before')}/{len(layout)} -> "
              f"{_cosmetic(layout, 'after')}/{len(layout)}")
    for name, chosen in [*edits.items(), ("all", everything)]:
        print(f"  verdicts {name}: before {dict(Counter(called(e.before) for e in chosen))}, "
              f"after {dict(Counter(e.verdict for e in chosen))}")
    reasons = Counter(e.reason.split(" ")[0].rstrip(":") for e in everything
                      if e.kind == ChangeKind.SUBSTANTIVE)
    print(f"  first words of the substantive reasons: {dict(reasons.most_common())}")

    print(f"\n3. Rewrites (line oracle < {REWRITE}) and collapses")
    for e in sorted(everything, key=lambda e: e.line_oracle):
        if e.line_oracle >= REWRITE:
            break
        print(f"  {e.history} {e.commit[:12]} {e.path}: similarity {e.similarity:.3f}, "
              f"kept {e.kept:.2f}, line oracle {e.line_oracle:.3f}, {e.verdict} ({e.reason})")
    collapses = collapse_scores(args.corpora)
    for (history, name), scores in sorted(collapses.items()):
        top = max(scores)
        kept = sum(held(s, k, REEXAMINE_SIMILARITY) for s, k, _ in scores)
        print(f"  {history} replaced by the {name}: {kept}/{len(scores)} held, "
              f"highest similarity {top[0]:.3f} ({top[2]})")
    every_collapse = [x for scores in collapses.values() for x in scores]
    print(f"  {'threshold':>9} {'real edits held':>16} {'collapses not held':>19}")
    for t in THRESHOLDS:
        real = [e for e in everything if e.changed and held(e.similarity, e.kept, t)]
        missed = sum(not held(s, k, t) for s, k, _ in every_collapse)
        print(f"  {t:>9} {len(real):>16} {missed:>15}/{len(every_collapse)}   "
              + ", ".join(f"{e.path} {e.similarity:.3f}" for e in real))
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


def collapse_scores(corpora: Path) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
    """(similarity, kept share, key) of every final document of each history replaced by
    each collapse text (an error page, a login wall...)."""
    import gzip
    import json
    out: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for path in histories(corpora):
        files: dict[str, str] = {}
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            for n, line in enumerate(f):
                event = json.loads(line)
                if n == 0:
                    files = dict(event["files"])
                    continue
                for c in event["changes"]:
                    if c["op"] == "delete":
                        del files[c["path"]]
                    elif c["op"] == "rename":
                        del files[c["old_path"]]
                        files[c["path"]] = c["content"]
                    else:
                        files[c["path"]] = c["content"]
        history = path.name.removesuffix("-history.jsonl.gz")
        for key, content in files.items():
            old = extracted(key, content)
            for name, text in COLLAPSES.items():
                report = compare(old, text)
                out.setdefault((history, name), []).append(
                    (report.similarity, kept_share(old, report), key))
    return out


def _cosmetic(chosen: list[Edit], when: str) -> int:
    return sum(called(e.before if when == "before" else e.verdict) == "cosmetic"
               for e in chosen)


if __name__ == "__main__":
    raise SystemExit(main())
