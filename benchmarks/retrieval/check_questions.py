"""Check ``questions.jsonl``: every answer is a verbatim passage of its document.

Each line is ``{"id", "question", "document", "answer"}``. An answer passes when, after
collapsing every whitespace run to a single space on both sides, it is a substring of the
named file in ``examples/corpus``. The checker also reports answers found in more than one
file (an ambiguous ground truth) and duplicate ids, and prints how many questions and
files the set covers.

Run it from anywhere::

    python benchmarks/retrieval/check_questions.py

It exits with status 1 when any check fails.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.jsonl"
CORPUS = HERE.parent.parent / "examples" / "corpus"

__all__ = ["Question", "collapse", "load_questions", "main", "problems"]


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    document: str
    answer: str


def collapse(text: str) -> str:
    """``text`` with every whitespace run collapsed to one space, ends stripped."""
    return " ".join(text.split())


def load_questions(path: Path = QUESTIONS) -> list[Question]:
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            questions.append(
                Question(row["id"], row["question"], row["document"], row["answer"])
            )
        except KeyError as missing:
            raise ValueError(f"{path.name}:{number}: missing field {missing}") from None
    return questions


def problems(questions: list[Question], corpus: Path = CORPUS) -> list[str]:
    """Every failed check, as a line of text; empty when the set is sound."""
    texts = {p.name: collapse(p.read_text(encoding="utf-8")) for p in corpus.iterdir()}
    found: list[str] = []
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            found.append(f"{q.id}: duplicate id")
        seen.add(q.id)
        if q.document not in texts:
            found.append(f"{q.id}: no such document {q.document!r}")
            continue
        answer = collapse(q.answer)
        if answer not in texts[q.document]:
            found.append(f"{q.id}: answer not found verbatim in {q.document}: {answer[:70]!r}")
        elsewhere = sorted(n for n, t in texts.items() if n != q.document and answer in t)
        if elsewhere:
            found.append(f"{q.id}: answer also appears in {', '.join(elsewhere)}")
    return found


def main() -> int:
    questions = load_questions()
    failed = problems(questions)
    for line in failed:
        print(line)
    files = len({q.document for q in questions})
    print(f"{len(questions)} questions over {files} files: {len(failed)} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
