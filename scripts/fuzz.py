"""Fuzz one kbsync parser with atheris (libFuzzer) for a while and report what it found.

Usage::

    python scripts/fuzz.py TARGET --seconds N [--save DIR] [--timeout S]
    python scripts/fuzz.py --list

TARGET is a name from ``tests/fuzz/targets.py`` (normalize, extract_text,
extract_markdown, extract_html, extract_pdf, urls, robots, sitemaps). The saved
corpus ``tests/fuzz/corpus/TARGET`` seeds the run and is never written to; new
inputs go to ``--save`` (a temporary folder by default). An input worth keeping
(one that failed, once fixed) is copied by hand into the saved corpus, named
``finding-*``. A failing input is written as ``crash-*`` or ``timeout-*``
next to the new inputs; replay it with the target function to debug it. libFuzzer
ends with ``Done N runs in S second(s)`` and its final statistics.

Needs atheris (``pip install atheris``); the saved corpus is replayed in CI by
``tests/fuzz/test_fuzz_corpus.py`` without it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_NAMES = ("normalize", "extract_text", "extract_markdown", "extract_html", "extract_pdf",
                "urls", "robots", "sitemaps")
# Libraries whose Python code a target drives: instrumented too, so that coverage of
# their parsers guides the fuzzer (C code, lxml and expat, gives no feedback).
LIBRARIES = {
    "extract_text": ["charset_normalizer"],
    "extract_markdown": ["markdown_it", "charset_normalizer"],
    "extract_html": ["trafilatura", "htmldate", "courlan", "justext"],
    "extract_pdf": ["pypdf"],
    "robots": ["protego"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?", choices=TARGET_NAMES)
    parser.add_argument("--seconds", type=int, default=60, help="how long to fuzz")
    parser.add_argument("--save", type=Path, help="folder for new inputs and failures")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    args = parser.parse_args()
    if args.list or args.target is None:
        print("\n".join(TARGET_NAMES))
        return 0

    import atheris

    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    libraries = LIBRARIES.get(args.target, [])
    with atheris.instrument_imports(include=["kbsync", *libraries]):
        for name in libraries:  # extractors import theirs lazily, after this block
            importlib.import_module(name)
        from tests.fuzz.targets import TARGETS
    target = TARGETS[args.target]
    saved = ROOT / "tests" / "fuzz" / "corpus" / args.target
    work = args.save or Path(tempfile.mkdtemp(prefix=f"kbsync-fuzz-{args.target}-"))
    work.mkdir(parents=True, exist_ok=True)

    libfuzzer = [
        sys.argv[0], str(work), str(saved),
        f"-max_total_time={args.seconds}", f"-timeout={args.timeout}", "-rss_limit_mb=2048",
        f"-artifact_prefix={work}{os.sep}", "-print_final_stats=1",
    ]
    print(f"fuzz {args.target} for {args.seconds} s; inputs and failures go to {work}",
          file=sys.stderr)
    atheris.Setup(libfuzzer, target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
