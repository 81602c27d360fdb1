from __future__ import annotations

import pytest

from kbsync import chunk_text, normalize
from kbsync.core.chunking.tokens import EstimatingCounter, TiktokenCounter, token_counter
from kbsync.core.normalize import scan_words
from kbsync.errors import ParameterError
from tests.conftest import CORPUS, ROOT

tiktoken = pytest.importorskip("tiktoken")
LINK_HEAVY = ["a-harbormaster-glossary.md", "a-harbormaster-getting-started.md",
              "a-harbormaster-upgrading.md", "b-onboarding-guide.md"]


@pytest.fixture(scope="module")
def exact() -> TiktokenCounter:
    return TiktokenCounter()


def _kinds() -> dict[str, str]:
    code = "\n\n".join(p.read_text() for p in sorted((ROOT / "src" / "kbsync").rglob("*.py")))
    return {
        "prose": "\n\n".join(p.read_text() for p in sorted(CORPUS.glob("*.txt"))),
        "source code": code,
        "link-heavy markdown": "\n\n".join((CORPUS / n).read_text() for n in LINK_HEAVY),
    }


@pytest.mark.parametrize("kind", ["prose", "source code", "link-heavy markdown"])
def test_the_estimate_is_within_15_percent_of_exact_cl100k(
    exact: TiktokenCounter, kind: str
) -> None:
    text = normalize(_kinds()[kind]).text
    encoding = exact._encoding
    truth = len(encoding.encode_ordinary(text))
    estimate = int(EstimatingCounter().count(scan_words(text)).sum())
    assert abs(estimate - truth) / truth <= 0.15, (kind, estimate, truth)


def test_no_chunk_exceeds_a_quarter_over_the_maximum_by_exact_count(exact: TiktokenCounter) -> None:
    encoding = exact._encoding
    for path in sorted(CORPUS.iterdir()):
        for c in chunk_text(path.read_text()).chunks:
            assert len(encoding.encode_ordinary(c.text)) <= 1.25 * 512, (path.name, c.index)


def test_the_exact_counter_is_an_option_with_its_own_identity(corpus: str) -> None:
    result = chunk_text(corpus, token_counter="tiktoken")
    assert result.diagnostics.token_counter == "tiktoken-cl100k_base"
    assert max(c.token_count for c in result.chunks) <= 512
    assert {c.identity for c in result.chunks}.isdisjoint(
        {c.identity for c in chunk_text(corpus).chunks}
    )


def test_every_word_counts_at_least_one_token() -> None:
    counts = EstimatingCounter().count(scan_words("a , . ; 1 é 日本 " * 10))
    assert counts.min() >= 1


def test_an_unknown_counter_is_a_clear_error() -> None:
    with pytest.raises(ParameterError, match="unknown token counter"):
        token_counter("words")


