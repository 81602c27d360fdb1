"""The counting of ``benchmarks/retrieval/bench.py``, on tiny inputs, and its peer index.

The benchmark's figures rest on a few small functions (span overlap, first relevant rank,
the embedding-cache rule of churn, offsets mapped back through the normalizer) and on the
peer index searching as kbsync does; each is checked here without the corpora.
"""

from __future__ import annotations

import math

import pytest
from benchmarks.retrieval import strategies as bench


def test_spans_overlap_only_when_they_share_a_character() -> None:
    assert bench.overlaps((0, 5), (4, 9))
    assert bench.overlaps((4, 9), (0, 5))
    assert not bench.overlaps((0, 5), (5, 9))  # half-open: touching is not sharing
    assert bench.overlaps((0, 10), (3, 4))


def test_the_first_relevant_result_must_be_in_the_question_s_document() -> None:
    q = bench.Question("q", "a", "?", ((100, 120),))
    returned = [bench.Returned("b", 90, 130, 1), bench.Returned("a", 0, 99, 1),
                bench.Returned("a", 110, 111, 1)]
    assert bench.first_relevant(q, returned) == 3
    assert bench.first_relevant(q, returned[:2]) is None


def test_scores_count_recall_at_one_and_five_and_the_reciprocal_rank() -> None:
    s = bench.scores_of([1, 3, 6, None], [10, 20])
    assert (s.recall_1, s.recall_5) == (0.25, 0.5)
    assert math.isclose(s.mrr_10, (1 + 1 / 3 + 1 / 6) / 4)
    assert s.context_tokens == 15


def test_churn_counts_only_texts_no_document_had_before_the_commit() -> None:
    book = bench.ChunkBook()
    assert book.commit({"a.md": ["x", "y"], "b.md": ["z"]}) == ["x", "y", "z"]
    # A moved chunk and a chunk another document holds cost nothing; a new one once.
    assert book.commit({"a.md": ["y", "w", "w"], "c.md": ["z", "x"]}) == ["w"]
    # Deleting the last holder of a text forgets it: it is new again later.
    assert book.commit({"b.md": None, "c.md": None}) == []
    assert book.commit({"d.md": ["z"]}) == ["z"]
    assert book.commit({"a.md": None, "d.md": None}) == []
    assert book.by_path == {}
    assert not book.counts


def test_offsets_of_the_canonical_text_map_back_to_the_file_text() -> None:
    raw = "One  two\r\n\r\n\r\nthree   four five"
    canonical = "One two\n\nthree four five"
    m = bench.OffsetMap(raw, canonical)
    assert not m.same
    start, end = canonical.index("three"), canonical.index("four") + len("four")
    assert raw[m.start(start):m.end(end)] == "three   four"
    assert bench.OffsetMap(canonical, canonical).same


TOPICS = ["volcano lava basalt eruption", "violin concerto orchestra bow",
          "glacier ice moraine valley", "compiler parser grammar token",
          "harbour ship cargo crane", "orchard apple blossom bee"]


def _documents(preamble: str = "") -> tuple[list[object], list[object]]:
    """Three documents of twelve paragraphs, and nine questions, each answered by one word."""
    docs = []
    for d in range(3):
        paragraphs = [preamble] if preamble else []
        for p in range(12):
            topic = TOPICS[(d * 5 + p) % len(TOPICS)].split()
            sentence = " ".join(f"{topic[(p + i) % 4]} word{d}{p}{i}" for i in range(30))
            paragraphs.append(f"Paragraph {p} of document {d}: {sentence}.")
        docs.append(bench.Document(f"doc{d}", "\n\n".join(paragraphs)))
    questions = []
    for d, doc in enumerate(docs):
        for p in (1, 6, 10):
            needle = f"word{d}{p}3"
            at = doc.text.index(needle)
            questions.append(bench.Question(f"{d}/{p}", doc.id, f"which {needle} {TOPICS[p % 6]}",
                                        ((at, at + len(needle)),)))
    return docs, questions


def test_the_peer_index_ranks_kbsync_s_own_chunks_as_kbsync_s_search_does() -> None:
    docs, questions = _documents()
    settings = {"kind": "hashing", "dimension": 256}
    embedder = bench.CachingEmbedder(bench.make_embedder(settings))
    setup = next(s for s in bench.KBSYNC if s.label == "kbsync tttd")  # answers these questions
    chunker = setup.chunker
    as_peer = bench.PeerSetup("kbsync chunks", "", lambda: lambda text: [
        (c.start, c.end) for c in chunker.chunks(text)])
    stats, engine = bench.kbsync_recall(setup, settings, embedder, docs, questions, bench.MODES)
    peer_stats, peer = bench.peer_recall(as_peer, embedder, docs, questions, bench.MODES)
    assert stats.chunks == peer_stats.chunks > len(docs)
    assert engine["0"]["hybrid"].recall_5 > 0.5  # the questions are answerable
    for context, by_mode in engine.items():
        for mode, scores in by_mode.items():
            other = peer[context][mode]
            assert (scores.recall_1, scores.recall_5, scores.mrr_10) == pytest.approx(
                (other.recall_1, other.recall_5, other.mrr_10)), (context, mode)


def test_a_window_over_a_chunk_that_search_leaves_out_still_maps_to_the_document() -> None:
    # The same opening in every document is boilerplate: searched never, but windows
    # of the chunks after it hold it.
    preamble = " ".join(f"lorem{i} ipsum dolor sit amet" for i in range(60))
    docs, questions = _documents(preamble)
    settings = {"kind": "hashing", "dimension": 256}
    embedder = bench.CachingEmbedder(bench.make_embedder(settings))
    stats, scores = bench.kbsync_recall(bench.KBSYNC[0], settings, embedder, docs, questions,
                                    ("text",))
    assert stats.chunks > len(docs)
    assert scores["512"]["text"].recall_5 > 0.5
