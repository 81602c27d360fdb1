"""Bad inputs in a folder source: each test puts one next to two good documents and syncs.

The rule under test: bad input gets a clear error naming the file, the run goes on
with the other documents, and nothing already indexed is lost. Every sync here must
finish, index the good documents, leave a store that verifies, and be idempotent:
a second sync of the same folder writes nothing but its run row (a failing document
is retried and fails again, without writing). Fixtures are generated in ``tmp_path``.
"""

from __future__ import annotations

import errno
import io
import os
import random
import re
import subprocess
import sys
import threading
import time
import unicodedata
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kbsync.app.knowledge_base import KnowledgeBase, SyncResult
from kbsync.core.chunking import identity_for
from kbsync.embed.hashing import HashingEmbedder
from kbsync.engine import init_config
from kbsync.extract.registry import extractor_for
from kbsync.model import SourceItem
from kbsync.sources.files import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, sync_sources

GOOD = {
    "alpha.txt": "The lighthouse keeper logs every passing ship in a leather notebook before "
    "dawn.\n\nWhen fog rolls in, the foghorn sounds twice a minute until the bay clears.\n",
    "bravo.md": "# Vault rotation\n\nRotate the database credentials every ninety days and "
    "record each rotation in the vault journal.\n",
}
GOOD_WORDS = {"alpha.txt": "lighthouse", "bravo.md": "credentials"}
WRITING_ACTIONS = ("new", "modified", "moved", "deleted", "metadata")
HANG_SECONDS = 30


# -- fixtures built in the test ---------------------------------------------------------------


def _pdf(text: str) -> bytes:
    """A minimal one-page PDF showing ``text`` (letters and spaces), with a correct xref."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf_file(objects)


def _pdf_with_stream(raw: bytes, pages: int = 1) -> bytes:
    """A PDF whose pages all draw one FlateDecode content stream ``raw``."""
    kids = b" ".join(b"%d 0 R" % (6 + i) for i in range(pages))
    page = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(raw) + raw + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        *([page] * pages),
    ]
    return _pdf_file(objects)


def _pdf_file(objects: list[bytes]) -> bytes:
    """A PDF file of numbered ``objects`` (the first is the catalog) with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def _operators_pdf() -> bytes:
    """50 pages drawing one 5 MB stream of text operators, deflated to a few kilobytes."""
    ops = b"BT /F1 12 Tf 72 720 Td\n" + b"(a) Tj\n" * 700_000 + b"ET\n"
    return _pdf_with_stream(zlib.compress(ops, 9), pages=50)


def _encrypted_pdf(text: str, user_password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf(text))))
    writer.encrypt(user_password=user_password, owner_password="owner-secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _kb(tmp_path: Path) -> Path:
    """A knowledge base whose folder source ``docs`` holds the two good documents."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in GOOD.items():
        (docs / name).write_text(text, encoding="utf-8")
    init_config(tmp_path, ["docs"])
    return docs


def _touch_later(path: Path) -> None:
    """Give the file a modification time an hour before now: later than the one it was
    settled with (so the stat gate sees a change even at the same size), and long enough
    ago for the stat not to be racy (a file being written is left for the next sync)."""
    when = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(when, when))


def _settle(docs: Path) -> None:
    """Every file of ``docs`` written an hour ago, as files are when a sync meets them: a
    stat as new as the sync is racy, and the next sync reads the file again."""
    for path in docs.rglob("*"):
        if path.is_file() and not path.is_symlink():
            _touch_later(path)


# -- running a sync and checking what every test checks ------------------------------------------


@dataclass
class Outcome:
    report: SyncResult
    second: SyncResult
    texts: dict[str, str]
    chunks: dict[str, int]
    failures: dict[str, str]
    warnings: list[str]
    found: dict[str, list[str]] = field(default_factory=dict)


def _failures(report: SyncResult) -> dict[str, str]:
    return {key: message for source in report.sources for key, message in source.failures}


def _found(engine: KnowledgeBase, word: str) -> list[str]:
    """Keys of the documents a full-text search for ``word`` finds."""
    return [hit.key for hit in engine.search(word, k=10, mode="text", context_tokens=0)]


def _stored(engine: KnowledgeBase) -> tuple[dict[str, str], dict[str, int]]:
    """Text and number of current chunks of every stored document of the source."""
    source = engine.sources[0].name
    manifest = engine.store.manifest(source)
    texts: dict[str, str] = {}
    for key in manifest:
        doc = engine.store.document(key, source)
        assert doc is not None, key
        texts[key] = doc.text
    chunks = {d.key: len(d.chunk_digests)
              for d in engine.store.with_digests(source, list(manifest.values()))}
    return texts, chunks


def _assert_readable(message: str) -> None:
    """A message for a person: words, not a traceback or a bare exception repr."""
    assert message.strip(), "empty failure message"
    assert "Traceback" not in message
    assert len(message) < 600, message
    assert re.search(r"[a-z]{3,} [a-z]{2,}", message), message


def _assert_good_documents_searchable(engine: KnowledgeBase) -> None:
    for key, word in GOOD_WORDS.items():
        assert key in _found(engine, word), (key, word)


def _sync(tmp_path: Path, queries: Iterable[str] = ()) -> Outcome:
    """Sync twice; check completion, the good documents, verify and idempotency.

    ``yes``: some of these files are estimated at millions of tokens (a 10 MB word),
    which a sync would otherwise ask to confirm before embedding.
    """
    _settle(tmp_path / "docs")
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync(yes=True)
        assert engine.verify().problems == ()
        _assert_good_documents_searchable(engine)
        found = {q: _found(engine, q) for q in queries}
        texts, chunks = _stored(engine)
        before = engine.store.total_changes
        second = engine.sync()
        assert engine.store.total_changes - before == 1, "a repeated sync wrote rows"
        for action in WRITING_ACTIONS:
            assert second.total(action) == 0, (action, second.sources[0].changes)
        # A repeated sync meets the same failures as before: still failing, none new.
        assert _failures(second) == {}
        assert {key for source in second.sources for key, _ in source.still_failing} == set(
            _failures(report))
        assert engine.verify().problems == ()
    for key in GOOD:
        assert key in texts, key
    return Outcome(report, second, texts, chunks, _failures(report),
                   list(report.sources[0].warnings), found)


def _expect_indexed(outcome: Outcome, key: str, *words: str) -> str:
    """The bad input was indexed as a third document holding ``words``; its text."""
    assert outcome.failures == {}, outcome.failures
    assert outcome.report.total("new") == 3
    assert key in outcome.texts, sorted(outcome.texts)
    for word in words:
        assert word in outcome.texts[key], (word, outcome.texts[key][:200])
    return outcome.texts[key]


def _expect_failed(outcome: Outcome, key: str, *words: str) -> str:
    """The bad input failed by its key with a readable message holding one of ``words``."""
    assert outcome.report.total("new") == 2
    assert outcome.report.total("failed") == 1
    assert outcome.report.failed
    assert set(outcome.failures) == {key}, outcome.failures
    message = outcome.failures[key]
    _assert_readable(message)
    assert any(w.lower() in message.lower() for w in words), message
    assert key not in outcome.texts
    # The second sync meets it as it was: still failing, not a new failure.
    assert outcome.second.total("failed") == 0
    assert outcome.second.still_failing == 1
    return message


def _expect_skipped(outcome: Outcome, *words: str) -> str:
    """The bad input was neither indexed nor failed, and a warning says why; the warning."""
    assert outcome.failures == {}, outcome.failures
    assert outcome.report.total("new") == 2
    assert sorted(outcome.texts) == sorted(GOOD)
    matching = [w for w in outcome.warnings if all(word in w for word in words)]
    assert matching, outcome.warnings
    _assert_readable(matching[0])
    return matching[0]


def _bad(tmp_path: Path, name: str, data: bytes) -> Path:
    docs = _kb(tmp_path)
    path = docs / name
    path.write_bytes(data)
    return path


def _keeps_old_version(
    tmp_path: Path,
    key: str,
    good: bytes,
    word: str,
    spoil: Callable[[Path], None],
    *message_words: str,
    settings: str = "",
) -> KnowledgeBase:
    """Index ``good`` under ``key``, spoil the file, sync: the failure is reported by key
    and the old version stays searchable. Returns the still open engine. ``settings``
    are appended to kbsync.toml."""
    docs = _kb(tmp_path)
    config = tmp_path / "kbsync.toml"
    config.write_text(config.read_text() + settings)
    path = docs / key
    path.write_bytes(good)
    _settle(docs)
    engine = KnowledgeBase.open(tmp_path)
    try:
        first = engine.sync()
        assert first.total("new") == 3
        assert key in _found(engine, word)
        old = engine.store.document(key)
        assert old is not None
        spoil(path)
        report = engine.sync()
        failures = _failures(report)
        assert set(failures) == {key}, failures
        _assert_readable(failures[key])
        assert any(w.lower() in failures[key].lower() for w in message_words), failures[key]
        assert report.total("failed") == 1
        for action in ("deleted", "modified", "metadata"):
            assert report.total(action) == 0, report.sources[0].changes
        kept = engine.store.document(key)
        assert kept is not None
        assert kept.text == old.text
        assert key in _found(engine, word)
        _assert_good_documents_searchable(engine)
        assert engine.verify().problems == ()
    except BaseException:
        engine.close()
        raise
    return engine


def _spoil_with(data: bytes) -> Callable[[Path], None]:
    def spoil(path: Path) -> None:
        path.write_bytes(data)
        _touch_later(path)

    return spoil


def _assert_second_sync_writes_nothing(engine: KnowledgeBase) -> None:
    with engine:
        before = engine.store.total_changes
        again = engine.sync()
        assert engine.store.total_changes - before == 1
        assert again.total("failed") + again.still_failing == 1
        for action in WRITING_ACTIONS:
            assert again.total(action) == 0


def _in_thread(target: Callable[[], object], release: Callable[[], None]) -> None:
    """Run ``target`` with a timeout; a hang fails the test (and is released)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    if thread.is_alive():
        release()
        thread.join(5)
        pytest.fail(f"the sync hung for {HANG_SECONDS} s")
    if errors:
        raise errors[0]


def _release_fifo(path: Path) -> Callable[[], None]:
    def release() -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.close(fd)

    return release


# -- empty and blank documents --------------------------------------------------------------------


def test_an_empty_text_file_is_indexed_as_an_empty_document_without_chunks(
    tmp_path: Path,
) -> None:
    _bad(tmp_path, "empty.txt", b"")
    outcome = _sync(tmp_path)
    assert _expect_indexed(outcome, "empty.txt") == ""
    assert outcome.chunks["empty.txt"] == 0


def test_a_file_of_only_whitespace_is_indexed_without_chunks(tmp_path: Path) -> None:
    _bad(tmp_path, "blank.md", b"   \n\t\n  \r\n\x0b\x0c\n")
    outcome = _sync(tmp_path)
    assert _expect_indexed(outcome, "blank.md").strip() == ""
    assert outcome.chunks["blank.md"] == 0


def test_a_file_of_only_control_characters_fails_as_binary(tmp_path: Path) -> None:
    _bad(tmp_path, "controls.txt", b"\x01\x02\x03\x04\x05\x06\x07\x08" * 4)
    _expect_failed(_sync(tmp_path), "controls.txt", "binary", "control")


def test_a_file_of_only_zero_width_spaces_is_indexed_and_breaks_nothing(tmp_path: Path) -> None:
    _bad(tmp_path, "zwsp.txt", "\u200b\u200b\u200b\u200b".encode())
    outcome = _sync(tmp_path)
    _expect_indexed(outcome, "zwsp.txt")
    assert outcome.texts["zwsp.txt"].strip("\u200b\n ") == ""


# -- PDFs -----------------------------------------------------------------------------------------


def test_a_zero_byte_pdf_fails_saying_it_is_not_a_pdf(tmp_path: Path) -> None:
    _bad(tmp_path, "empty.pdf", b"")
    _expect_failed(_sync(tmp_path), "empty.pdf", "not a PDF", "empty")


def test_a_truncated_pdf_fails_as_damaged(tmp_path: Path) -> None:
    data = _pdf("Truncated manual about harbour cranes")
    _bad(tmp_path, "truncated.pdf", data[: len(data) // 2])
    _expect_failed(_sync(tmp_path), "truncated.pdf", "damaged", "unreadable")


def test_a_damaged_pdf_is_reported_once_and_pypdf_prints_nothing_of_its_own(
        tmp_path: Path) -> None:
    data = _pdf("Truncated manual about harbour cranes")
    (tmp_path / "truncated.pdf").write_bytes(data[: len(data) // 2])
    # A fresh interpreter: pytest's own log handlers would hide logging's last resort.
    script = ("import sys; from kbsync.extract.pdf import PdfExtractor\n"
              "try:\n"
              "    PdfExtractor().extract(open(sys.argv[1], 'rb').read(), locator='t.pdf')\n"
              "except Exception as exc:\n"
              "    print(type(exc).__name__)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "truncated.pdf")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "ExtractionError"
    assert done.stderr == ""


def test_a_pdf_with_a_broken_xref_table_is_recovered_and_indexed(tmp_path: Path) -> None:
    data = _pdf("Broken xref lighthouse almanac")
    shifted = re.sub(rb"(\d{10}) 00000 n", lambda m: b"%010d 00000 n" % (int(m[1]) + 7), data)
    assert shifted != data
    _bad(tmp_path, "xref.pdf", shifted)
    outcome = _sync(tmp_path, ["almanac"])
    _expect_indexed(outcome, "xref.pdf", "almanac")
    assert "xref.pdf" in outcome.found["almanac"]


def test_a_pdf_whose_startxref_points_nowhere_is_recovered_and_indexed(tmp_path: Path) -> None:
    data = re.sub(rb"startxref\n\d+", b"startxref\n99999", _pdf("Misplaced startxref atlas"))
    _bad(tmp_path, "startxref.pdf", data)
    _expect_indexed(_sync(tmp_path), "startxref.pdf", "atlas")


def test_an_encrypted_pdf_fails_saying_it_needs_a_password(tmp_path: Path) -> None:
    _bad(tmp_path, "locked.pdf", _encrypted_pdf("Secret merger memo", "hunter2"))
    outcome = _sync(tmp_path)
    message = _expect_failed(outcome, "locked.pdf", "encrypted")
    assert "password" in message
    assert not any("merger" in text for text in outcome.texts.values())


def test_a_pdf_encrypted_with_an_empty_user_password_is_opened_and_indexed(
    tmp_path: Path,
) -> None:
    _bad(tmp_path, "owner-only.pdf", _encrypted_pdf("Owner locked timetable", ""))
    _expect_indexed(_sync(tmp_path), "owner-only.pdf", "timetable")


# -- binary posing as text ------------------------------------------------------------------------


def test_a_png_renamed_to_markdown_fails_naming_the_image_type(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(500)
    _bad(tmp_path, "diagram.md", png)
    _expect_failed(_sync(tmp_path), "diagram.md", "PNG")


def test_random_bytes_in_a_text_file_fail_as_binary(tmp_path: Path) -> None:
    _bad(tmp_path, "noise.txt", random.Random(2).randbytes(4096))
    _expect_failed(_sync(tmp_path), "noise.txt", "binary", "cannot be decoded")


def test_nul_bytes_inside_text_are_rejected_as_binary_or_removed(tmp_path: Path) -> None:
    data = b"Hello world, one stray NUL here:\x00 and the end of the line."
    assert len(data) % 2 == 0
    _bad(tmp_path, "nul.txt", data)
    outcome = _sync(tmp_path)
    if outcome.failures:
        _expect_failed(outcome, "nul.txt", "NUL", "binary")
    else:
        text = _expect_indexed(outcome, "nul.txt", "one stray NUL here")
        assert "\x00" not in text


# -- encodings ------------------------------------------------------------------------------------


def test_utf16_with_a_byte_order_mark_is_decoded(tmp_path: Path) -> None:
    _bad(tmp_path, "utf16.txt", "Zebra crossings painted in UTF sixteen, café.".encode("utf-16"))
    outcome = _sync(tmp_path, ["zebra"])
    _expect_indexed(outcome, "utf16.txt", "Zebra crossings", "café")
    assert "utf16.txt" in outcome.found["zebra"]


def test_utf16_without_a_byte_order_mark_is_decoded(tmp_path: Path) -> None:
    text = "Walrus colonies counted in little endian UTF sixteen without a mark."
    _bad(tmp_path, "utf16le.txt", text.encode("utf-16-le"))
    outcome = _sync(tmp_path, ["walrus"])
    assert _expect_indexed(outcome, "utf16le.txt") == text
    assert "utf16le.txt" in outcome.found["walrus"]


def test_latin1_text_is_decoded_without_mojibake(tmp_path: Path) -> None:
    text = "Le café crème et la crêpe brûlée à la française, près de la façade."
    _bad(tmp_path, "latin1.txt", text.encode("latin-1"))
    assert _expect_indexed(_sync(tmp_path), "latin1.txt") == text


def test_invalid_utf8_in_the_middle_of_a_utf8_file_is_indexed_with_replacements_and_a_warning(
    tmp_path: Path,
) -> None:
    good = "Résumé of the naïve café owner, déjà vu at the crêperie. ".encode() * 4
    _bad(tmp_path, "mixed.txt", good + b"\xff\xfe broken \xe9 bytes " + good)
    outcome = _sync(tmp_path)
    text = _expect_indexed(outcome, "mixed.txt", "naïve café", "\ufffd\ufffd broken \ufffd bytes")
    assert text.count("\ufffd") == 3
    assert [w for w in outcome.warnings if w.startswith("mixed.txt: ")] == [
        "mixed.txt: 3 bytes that are not UTF-8 replaced by U+FFFD (strict_decoding = true "
        "refuses such files)"], outcome.warnings


def test_with_strict_decoding_invalid_utf8_fails_the_file_by_name(tmp_path: Path) -> None:
    good = "Résumé of the naïve café owner, déjà vu at the crêperie. ".encode() * 4
    _bad(tmp_path, "mixed.txt", good + b"\xff\xfe broken \xe9 bytes " + good)
    config = tmp_path / "kbsync.toml"
    config.write_text(config.read_text() + "\n[index]\nstrict_decoding = true\n")
    _expect_failed(_sync(tmp_path), "mixed.txt", "UTF-8")


def test_a_short_run_of_invalid_utf8_never_turns_the_whole_file_into_mojibake(
    tmp_path: Path,
) -> None:
    data = (
        "The café on the quay opens early. ".encode()
        + b"\x80\x81\x82"
        + b" The rest of the file is plain ASCII about harbours and lights."
    )
    _bad(tmp_path, "stray.txt", data)
    outcome = _sync(tmp_path)
    _expect_indexed(outcome, "stray.txt", "The café on the quay", "early. \ufffd\ufffd\ufffd The")
    assert any(w.startswith("stray.txt: 3 bytes that are not UTF-8") for w in outcome.warnings)


def test_surrogate_escapes_in_utf8_text_never_turn_the_file_into_mojibake(
    tmp_path: Path,
) -> None:
    emoji = "\ud83d\ude00".encode("utf-8", "surrogatepass")
    data = "Our naïve café review: ".encode() + emoji + b" and a smile."
    _bad(tmp_path, "surrogates.txt", data)
    outcome = _sync(tmp_path)
    if outcome.failures:
        _expect_failed(outcome, "surrogates.txt", "UTF-8", "surrogate")
    else:
        text = _expect_indexed(outcome, "surrogates.txt", "Our naïve café review:", "smile")
        assert not re.search("[\ud800-\udfff]", text)


# -- huge and degenerate text ---------------------------------------------------------------------


def test_a_ten_megabyte_single_line_without_whitespace_is_indexed(tmp_path: Path) -> None:
    line = random.Random(3).randbytes(5_000_000).hex().encode()
    _bad(tmp_path, "oneline.txt", line)
    outcome = _sync(tmp_path)
    assert len(_expect_indexed(outcome, "oneline.txt")) == 10_000_000
    assert outcome.chunks["oneline.txt"] >= 1


def test_a_five_megabyte_file_of_one_repeated_character_is_indexed(tmp_path: Path) -> None:
    _bad(tmp_path, "aaaa.txt", b"a" * 5_000_000)
    outcome = _sync(tmp_path)
    assert len(_expect_indexed(outcome, "aaaa.txt")) == 5_000_000


def test_a_file_of_a_hundred_thousand_tiny_lines_is_indexed_in_many_chunks(
    tmp_path: Path,
) -> None:
    _bad(tmp_path, "lines.txt", b"w\n" * 100_000)
    outcome = _sync(tmp_path)
    _expect_indexed(outcome, "lines.txt")
    assert outcome.chunks["lines.txt"] > 100


def test_a_markdown_file_of_a_million_and_a_half_blank_lines_does_not_stall_the_sync(
    tmp_path: Path,
) -> None:
    _bad(tmp_path, "blank-lines.md", b"\n" * 1_500_000 + b"Finally a sentence about otters.\n")
    script = (
        "import sys\n"
        "from kbsync.app.knowledge_base import KnowledgeBase\n"
        "with KnowledgeBase.open(sys.argv[1]) as engine:\n"
        "    print(engine.sync().total('new'))\n"
    )
    # A child process, so that a stall can be killed; linear work takes about two seconds.
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True, text=True, timeout=12, check=True,
    )
    assert done.stdout.split() == ["3"]
    with KnowledgeBase.open(tmp_path) as engine:
        assert any(h.key == "blank-lines.md" for h in engine.search("otters", mode="text"))


# -- hostile Markdown and HTML --------------------------------------------------------------------


def test_markdown_with_ten_thousand_nested_blockquotes_is_indexed(tmp_path: Path) -> None:
    _bad(tmp_path, "quotes.md", b">" * 10_000 + b" the deepest quote about otters\n")
    _expect_indexed(_sync(tmp_path), "quotes.md", "otters")


def test_markdown_with_an_unclosed_five_megabyte_code_fence_is_indexed(tmp_path: Path) -> None:
    body = b"# Setup\n\nInstall the tidewater tool first.\n\n```python\n" + b"x = 1\n" * 850_000
    _bad(tmp_path, "fence.md", body)
    outcome = _sync(tmp_path, ["tidewater"])
    _expect_indexed(outcome, "fence.md", "tidewater", "x = 1")
    assert "fence.md" in outcome.found["tidewater"]


def test_html_with_fifty_thousand_nested_divs_is_indexed(tmp_path: Path) -> None:
    page = (b"<html><body>" + b"<div>" * 50_000 + b"<p>Nested pelican sighting report.</p>"
            + b"</div>" * 50_000 + b"</body></html>")
    _bad(tmp_path, "divs.html", page)
    _expect_indexed(_sync(tmp_path), "divs.html", "pelican")


def test_html_with_a_huge_attribute_is_indexed_without_the_attribute(tmp_path: Path) -> None:
    page = (b'<html><body><p data-blob="' + b"Q" * 2_000_000
            + b'">Paragraph about the walrus census.</p></body></html>')
    _bad(tmp_path, "attr.html", page)
    text = _expect_indexed(_sync(tmp_path), "attr.html", "walrus census")
    assert "QQQQ" not in text


def test_html_declaring_a_wrong_meta_charset_over_utf8_bytes_is_read_as_utf8(
    tmp_path: Path,
) -> None:
    page = ('<html><head><meta charset="shift_jis"><title>Menu</title></head><body>'
            "<p>The café serves crème brûlée and déjà vu.</p></body></html>").encode()
    _bad(tmp_path, "meta.html", page)
    _expect_indexed(_sync(tmp_path), "meta.html", "café serves crème brûlée")


def test_html_declaring_utf8_over_latin1_bytes_is_decoded_by_detection(tmp_path: Path) -> None:
    page = ('<html><head><meta charset="utf-8"></head><body>'
            "<p>The café serves crème brûlée at the façade.</p></body></html>").encode("latin-1")
    _bad(tmp_path, "meta-latin1.html", page)
    _expect_indexed(_sync(tmp_path), "meta-latin1.html", "café serves crème brûlée")


def test_html_declaring_a_non_text_codec_as_charset_is_decoded_or_fails_alone(
    tmp_path: Path,
) -> None:
    # rot13, hex, base64 are Python codecs but not text encodings: the declaration is no use.
    page = ('<html><head><meta charset="rot13"></head><body>'
            "<p>Caf\xe9 cr\xe8me menu.</p></body></html>").encode("latin-1")
    _bad(tmp_path, "rot13.html", page)
    outcome = _sync(tmp_path)
    if outcome.failures:
        _expect_failed(outcome, "rot13.html", "rot13", "rot-13", "charset", "encoding")
    else:
        _expect_indexed(outcome, "rot13.html", "Café crème menu")


def test_html_declaring_the_undefined_codec_as_charset_is_decoded_or_fails_alone(
    tmp_path: Path,
) -> None:
    page = ('<html><head><meta charset="undefined"></head><body>'
            "<p>Caf\xe9 cr\xe8me menu.</p></body></html>").encode("latin-1")
    _bad(tmp_path, "undefined.html", page)
    outcome = _sync(tmp_path)
    if outcome.failures:
        _expect_failed(outcome, "undefined.html", "undefined", "charset", "encoding")
    else:
        _expect_indexed(outcome, "undefined.html", "Café crème menu")


def test_html_of_only_scripts_and_styles_is_indexed_without_their_code(tmp_path: Path) -> None:
    page = (b"<html><head><style>body { color: red }</style><script>var secret = 42;</script>"
            b"</head><body><script>alert('tracking')</script><noscript></noscript>"
            b"</body></html>")
    _bad(tmp_path, "scripts.html", page)
    outcome = _sync(tmp_path)
    text = _expect_indexed(outcome, "scripts.html")
    assert "secret" not in text
    assert "alert" not in text
    assert outcome.chunks["scripts.html"] == 0


# -- line endings and scripts ---------------------------------------------------------------------


def test_a_file_with_lone_cr_line_endings_is_indexed_line_by_line(tmp_path: Path) -> None:
    _bad(tmp_path, "mac.txt", b"alpha line one\rbravo harpoon two\rcharlie line three\r")
    outcome = _sync(tmp_path, ["harpoon"])
    _expect_indexed(outcome, "mac.txt", "alpha line one", "charlie line three")
    assert "mac.txt" in outcome.found["harpoon"]


def test_markdown_with_mixed_line_endings_keeps_its_headings(tmp_path: Path) -> None:
    _bad(tmp_path, "mixed.md", b"# Tides\r\nHigh water at noon.\n\r## Ebb\rLow water at dusk.\n")
    outcome = _sync(tmp_path, ["dusk"])
    _expect_indexed(outcome, "mixed.md", "High water at noon", "Low water at dusk")
    assert "mixed.md" in outcome.found["dusk"]


def test_right_to_left_text_is_indexed_and_searchable(tmp_path: Path) -> None:
    _bad(tmp_path, "rtl.txt", "שלום עולם. مرحبا بالعالم. Mixed with English words.".encode())
    outcome = _sync(tmp_path, ["שלום", "بالعالم"])
    _expect_indexed(outcome, "rtl.txt", "שלום עולם", "مرحبا بالعالم")
    assert "rtl.txt" in outcome.found["שלום"]
    assert "rtl.txt" in outcome.found["بالعالم"]


def test_emoji_and_combining_characters_are_indexed_in_nfc(tmp_path: Path) -> None:
    text = "Family 👩\u200d👩\u200d👧 visit the cafe\u0301 and eat man\u0303ana pastries."
    _bad(tmp_path, "emoji.txt", text.encode())
    outcome = _sync(tmp_path, ["café", "pastries"])
    _expect_indexed(outcome, "emoji.txt", "👩\u200d👩\u200d👧")
    assert "emoji.txt" in outcome.found["café"]
    assert "emoji.txt" in outcome.found["pastries"]


# -- names ----------------------------------------------------------------------------------------


def test_a_file_name_with_invalid_utf8_bytes_is_skipped_with_a_warning_naming_it(
    tmp_path: Path,
) -> None:
    docs = _kb(tmp_path)
    with open(os.path.join(os.fsencode(docs), b"bad\xffname.md"), "wb") as f:
        f.write(b"Content behind an undecodable name.")
    warning = _expect_skipped(_sync(tmp_path), "bad", "not valid UTF-8")
    assert "name.md" in warning


def test_a_file_name_with_a_newline_is_indexed_under_that_key(tmp_path: Path) -> None:
    _bad(tmp_path, "two\nlines.md", b"A notebook named across two lines.")
    outcome = _sync(tmp_path, ["notebook"])
    _expect_indexed(outcome, "two\nlines.md", "notebook")
    assert "two\nlines.md" in outcome.found["notebook"]


def test_a_file_named_like_a_glob_is_indexed_under_its_literal_name(tmp_path: Path) -> None:
    _bad(tmp_path, "[abc].md", b"A gazebo in a file named like a glob.")
    (tmp_path / "docs" / "a.md").write_text("Another file, an aqueduct, that the glob matches.")
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync()
        assert report.total("new") == 4
        assert _failures(report) == {}
        assert "[abc].md" in _found(engine, "gazebo")
        assert "gazebo" in engine.diff("[abc].md").text
        before = engine.store.total_changes
        engine.sync()
        assert engine.store.total_changes - before == 1
        assert engine.verify().problems == ()


# -- links, special files and directories ---------------------------------------------------------


def test_a_symlink_loop_is_skipped_with_a_warning(tmp_path: Path) -> None:
    docs = _kb(tmp_path)
    os.symlink("loop-b.md", docs / "loop-a.md")
    os.symlink("loop-a.md", docs / "loop-b.md")
    _expect_skipped(_sync(tmp_path), "loop-a.md", "loop")


def test_a_directory_symlink_back_to_the_root_is_not_walked_twice(tmp_path: Path) -> None:
    docs = _kb(tmp_path)
    os.symlink(".", docs / "again")
    _expect_skipped(_sync(tmp_path), "again", "loop")


def test_a_symlink_to_etc_passwd_is_never_read(tmp_path: Path) -> None:
    docs = _kb(tmp_path)
    os.symlink("/etc/passwd", docs / "passwd.md")
    outcome = _sync(tmp_path)
    _expect_skipped(outcome, "passwd.md", "outside the root")
    assert outcome.report.sources[0].bytes_read == sum(len(t.encode()) for t in GOOD.values())
    assert not any("root:" in text for text in outcome.texts.values())


def test_a_fifo_named_like_a_document_is_skipped_and_never_opened(tmp_path: Path) -> None:
    docs = _kb(tmp_path)
    fifo = docs / "x.md"
    os.mkfifo(fifo)
    outcomes: list[Outcome] = []
    _in_thread(lambda: outcomes.append(_sync(tmp_path)), _release_fifo(fifo))
    _expect_skipped(outcomes[0], "x.md", "FIFO")


def test_a_directory_named_like_a_document_is_not_a_document(tmp_path: Path) -> None:
    docs = _kb(tmp_path)
    (docs / "x.md").mkdir()
    outcome = _sync(tmp_path)
    assert outcome.failures == {}
    assert outcome.report.total("new") == 2
    assert sorted(outcome.texts) == sorted(GOOD)


# -- files that change between the listing and the read -------------------------------------------


def _patch_read(monkeypatch: pytest.MonkeyPatch, key: str,
                change: Callable[[Path], None]) -> list[str]:
    """Make FilesystemSource.read apply ``change`` to ``key``'s file just before reading it."""
    original = FilesystemSource.read
    changed: list[str] = []

    def read(self: FilesystemSource, item: SourceItem) -> bytes:
        if item.key == key and not changed:
            changed.append(item.key)
            change(Path(item.locator))
        return original(self, item)

    monkeypatch.setattr(FilesystemSource, "read", read)
    return changed


def test_a_file_removed_between_listing_and_reading_fails_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _bad(tmp_path, "gone.md", b"Here one moment, gone the next.")
    changed = _patch_read(monkeypatch, "gone.md", Path.unlink)
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync()
        assert changed == ["gone.md"]
        assert report.total("new") == 2
        failures = _failures(report)
        assert set(failures) == {"gone.md"}
        _assert_readable(failures["gone.md"])
        assert "no longer exists" in failures["gone.md"]
        assert engine.verify().problems == ()
        before = engine.store.total_changes
        again = engine.sync()
        assert engine.store.total_changes - before == 2  # and the failure forgotten
        assert _failures(again) == {}  # it is gone for good now: nothing to report
        assert again.total("unchanged") == 2


def test_a_file_replaced_by_a_directory_between_listing_and_reading_fails_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def to_directory(path: Path) -> None:
        path.unlink()
        path.mkdir()

    _bad(tmp_path, "x.md", b"About to become a directory.")
    _patch_read(monkeypatch, "x.md", to_directory)
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync()
        assert report.total("new") == 2
        failures = _failures(report)
        assert set(failures) == {"x.md"}
        _assert_readable(failures["x.md"])
        assert "directory" in failures["x.md"]
        assert engine.verify().problems == ()
        before = engine.store.total_changes
        engine.sync()
        # The run row, and the failure forgotten: the file it was met with is gone.
        assert engine.store.total_changes - before == 2


def test_a_file_replaced_by_a_fifo_between_listing_and_reading_is_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def to_fifo(path: Path) -> None:
        path.unlink()
        os.mkfifo(path)

    path = _bad(tmp_path, "pipe.md", b"About to become a FIFO.")
    _patch_read(monkeypatch, "pipe.md", to_fifo)
    reports: list[SyncResult] = []

    def run() -> None:
        with KnowledgeBase.open(tmp_path) as engine:
            reports.append(engine.sync())
            assert engine.verify().problems == ()

    _in_thread(run, _release_fifo(path))
    failures = _failures(reports[0])
    assert reports[0].total("new") == 2
    assert set(failures) == {"pipe.md"}
    assert "FIFO" in failures["pipe.md"]
    assert "not read" in failures["pipe.md"]


def test_a_file_swapped_for_a_symlink_to_etc_passwd_before_reading_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def to_link(path: Path) -> None:
        path.unlink()
        os.symlink("/etc/passwd", path)

    _bad(tmp_path, "swap.md", b"Innocent at listing time.")
    _patch_read(monkeypatch, "swap.md", to_link)
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync()
        failures = _failures(report)
        assert set(failures) == {"swap.md"}
        assert "outside the source root" in failures["swap.md"]
        assert report.total("new") == 2
        assert not any("root:" in hit.text for hit in engine.search("root", mode="text"))
        assert engine.verify().problems == ()


# -- the size cap (a FilesystemSource setting the engine does not expose) -------------------------


def _capped_sync(docs: Path, store: SqliteStore, max_bytes: int) -> SyncResult:
    source = FilesystemSource(docs, name="docs", max_bytes=max_bytes)
    return sync_sources([source], store, HashingEmbedder(), extractor_for, Chunker())


def _capped_verify(store: SqliteStore) -> list[str]:
    chunker = Chunker()
    return store.verify(HashingEmbedder().identity,
                        identity_for(chunker.strategy, **chunker.params))


def test_a_file_over_the_size_cap_fails_by_name_with_its_size_and_the_cap(
    tmp_path: Path,
) -> None:
    docs = _bad(tmp_path, "big.txt", b"huge " * 1_000).parent
    store = SqliteStore(tmp_path / "capped.db")
    try:
        report = _capped_sync(docs, store, max_bytes=1_000)
        assert report.total("new") == 2
        failures = _failures(report)
        assert set(failures) == {"big.txt"}
        _assert_readable(failures["big.txt"])
        assert "5,000 bytes" in failures["big.txt"]
        assert "cap of 1,000 bytes" in failures["big.txt"]
        assert _capped_verify(store) == []
        before = store.total_changes
        again = _capped_sync(docs, store, max_bytes=1_000)
        assert store.total_changes - before == 1
        assert set(_failures(again)) == {"big.txt"}
    finally:
        store.close()


def test_a_document_that_grows_over_the_size_cap_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    path = _bad(tmp_path, "grows.txt", b"A modest note about puffins on the cliffs.")
    store = SqliteStore(tmp_path / "capped.db")
    try:
        assert _capped_sync(path.parent, store, max_bytes=1_000).total("new") == 3
        path.write_bytes(b"A modest note about puffins on the cliffs. " * 100)
        report = _capped_sync(path.parent, store, max_bytes=1_000)
        assert set(_failures(report)) == {"grows.txt"}
        assert report.total("deleted") == 0
        assert [h.key for h in store.search_text("puffins", 5)] == ["grows.txt"]
        assert _capped_verify(store) == []
        before = store.total_changes
        _capped_sync(path.parent, store, max_bytes=1_000)
        assert store.total_changes - before == 1
    finally:
        store.close()


# -- nothing already indexed is lost --------------------------------------------------------------

GOOD_PDF = _pdf("Quarterly report on the kelp harvest")
GOOD_TEXT = b"The otter sanctuary opens at nine and closes at dusk every day.\n"


def test_a_pdf_truncated_after_indexing_keeps_its_indexed_version(tmp_path: Path) -> None:
    engine = _keeps_old_version(tmp_path, "report.pdf", GOOD_PDF, "kelp",
                                _spoil_with(GOOD_PDF[:200]), "damaged", "unreadable")
    _assert_second_sync_writes_nothing(engine)


def test_a_pdf_emptied_to_zero_bytes_after_indexing_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    engine = _keeps_old_version(tmp_path, "report.pdf", GOOD_PDF, "kelp", _spoil_with(b""),
                                "not a PDF", "empty")
    _assert_second_sync_writes_nothing(engine)


def test_a_pdf_encrypted_after_indexing_keeps_its_indexed_version(tmp_path: Path) -> None:
    locked = _encrypted_pdf("Quarterly report on the kelp harvest", "hunter2")
    engine = _keeps_old_version(tmp_path, "report.pdf", GOOD_PDF, "kelp", _spoil_with(locked),
                                "encrypted")
    _assert_second_sync_writes_nothing(engine)


def test_a_text_file_overwritten_with_binary_keeps_its_indexed_version(tmp_path: Path) -> None:
    noise = random.Random(4).randbytes(2048)
    engine = _keeps_old_version(tmp_path, "notes.txt", GOOD_TEXT, "otter", _spoil_with(noise),
                                "binary", "cannot be decoded")
    _assert_second_sync_writes_nothing(engine)


def test_a_markdown_file_overwritten_with_a_png_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(300)
    engine = _keeps_old_version(tmp_path, "notes.md", GOOD_TEXT, "otter", _spoil_with(png),
                                "PNG")
    _assert_second_sync_writes_nothing(engine)


def test_with_strict_decoding_a_text_file_damaged_by_mixed_encodings_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    damaged = "Résumé: the otter sanctuary café, déjà vu. ".encode() * 3 + b"\xff\xfe\xfd"
    engine = _keeps_old_version(tmp_path, "notes.txt", GOOD_TEXT, "otter",
                                _spoil_with(damaged), "UTF-8",
                                settings="\n[index]\nstrict_decoding = true\n")
    _assert_second_sync_writes_nothing(engine)


def test_a_text_file_overwritten_with_control_characters_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    engine = _keeps_old_version(tmp_path, "notes.txt", GOOD_TEXT, "otter",
                                _spoil_with(b"\x01\x02\x03" * 30), "binary", "control")
    _assert_second_sync_writes_nothing(engine)


def test_an_edited_file_removed_before_it_is_read_keeps_its_indexed_version_until_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def edit_then_vanish(path: Path) -> None:
        path.write_bytes(GOOD_TEXT + b"An edit nobody will read.\n")
        _patch_read(monkeypatch, "notes.txt", Path.unlink)

    engine = _keeps_old_version(tmp_path, "notes.txt", GOOD_TEXT, "otter", edit_then_vanish,
                                "no longer exists")
    with engine:
        monkeypatch.undo()
        gone = engine.sync()  # now the listing shows it is gone: it is deleted, as it should be
        assert gone.total("deleted") == 1
        assert "notes.txt" not in _found(engine, "otter")
        assert engine.verify().problems == ()


# -- names that differ only in Unicode normalization ----------------------------------------------

NFC_NAME = unicodedata.normalize("NFC", "café.md")
NFD_NAME = unicodedata.normalize("NFD", "café.md")


def _twins(tmp_path: Path, order: tuple[str, ...]) -> tuple[str, dict[str, str], list[str]]:
    """Sync a folder holding both spellings of café.md, created in ``order``.

    Returns the text indexed under the key, the failures and the warnings.
    """
    tmp_path.mkdir()
    docs = _kb(tmp_path)
    texts = {NFC_NAME: "Composed name: the espresso menu.",
             NFD_NAME: "Decomposed name: the tea menu."}
    for name in order:
        (docs / name).write_text(texts[name], encoding="utf-8")
    outcome = _sync(tmp_path)
    return outcome.texts[NFC_NAME], outcome.failures, outcome.warnings


def test_two_names_that_differ_only_in_normalization_index_one_and_report_the_other(
    tmp_path: Path,
) -> None:
    assert NFC_NAME != NFD_NAME
    first = _twins(tmp_path / "a", (NFC_NAME, NFD_NAME))
    second = _twins(tmp_path / "b", (NFD_NAME, NFC_NAME))
    # Whichever was created first, the same file wins: the first raw name in code-point order.
    assert first[0] == second[0] == "Decomposed name: the tea menu."
    for _, failures, warnings in (first, second):
        assert failures == {}
        [warning] = [w for w in warnings if "same key" in w]
        _assert_readable(warning)
        assert warning.startswith(f"{NFC_NAME}: ")
        assert "NFC" in warning


# -- errors injected where a root user cannot make them --------------------------------------------


def _deny(monkeypatch: pytest.MonkeyPatch, name: str, what: str = "open") -> list[str]:
    """Make ``os.open`` (or ``os.scandir``) fail with EACCES for paths ending in ``name``.

    Tests run as root, for whom chmod denies nothing, so the error is injected
    where the operating system would raise it.
    """
    real = getattr(os, what)
    denied: list[str] = []

    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if text == name or text.endswith(os.sep + name):
            denied.append(text)
            raise PermissionError(errno.EACCES, "Permission denied", text)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, what, guarded)
    return denied


def test_a_file_that_cannot_be_opened_fails_by_name_saying_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _bad(tmp_path, "locked.md", b"A ledger nobody may read.")
    denied = _deny(monkeypatch, "locked.md")
    message = _expect_failed(_sync(tmp_path), "locked.md", "permission denied")
    assert denied
    assert "ledger" not in message


def test_a_file_that_becomes_unreadable_keeps_its_indexed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def lock(path: Path) -> None:
        path.write_bytes(GOOD_TEXT + b"An edit behind a lock.\n")
        _deny(monkeypatch, path.name)

    engine = _keeps_old_version(tmp_path, "notes.txt", GOOD_TEXT, "otter", lock,
                                "permission denied")
    _assert_second_sync_writes_nothing(engine)


def test_an_unreadable_folder_makes_the_listing_incomplete_and_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = _kb(tmp_path)
    (docs / "vault").mkdir()
    (docs / "vault" / "keys.md").write_text("The vault holds the harbour master's keys.")
    with KnowledgeBase.open(tmp_path) as engine:
        assert engine.sync().total("new") == 3
        denied = _deny(monkeypatch, "vault", "scandir")
        report = engine.sync()
        assert denied
        assert report.total("deleted") == 0
        failures = _failures(report)
        assert set(failures) == {"vault"}, failures
        _assert_readable(failures["vault"])
        assert "Permission denied" in failures["vault"]
        assert "nothing will be deleted" in failures["vault"]
        assert "vault/keys.md" in _found(engine, "harbour")
        _assert_good_documents_searchable(engine)
        assert engine.verify().problems == ()


def test_a_file_rewritten_between_listing_and_reading_is_left_for_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _bad(tmp_path, "draft.md", b"First draft about walruses.")
    _settle(path.parent)

    def rewrite(p: Path) -> None:
        p.write_bytes(b"Second draft, much longer, about narwhals and their tusks.")
        _touch_later(p)

    _patch_read(monkeypatch, "draft.md", rewrite)
    with KnowledgeBase.open(tmp_path) as engine:
        report = engine.sync()
        # Not the bytes read under the listing's stat, which describes the first draft:
        # held, with a warning, and not a failure.
        assert (report.total("new"), report.total("held")) == (2, 1)
        assert _failures(report) == {}
        assert any(w.startswith("draft.md: ") and "changed after it was listed" in w
                   for w in report.sources[0].warnings)
        assert "draft.md" not in _found(engine, "walruses")
        assert engine.verify().problems == ()
        # The next sync lists the second draft's stat and indexes it; after that nothing
        # is written.
        again = engine.sync()
        assert again.total("new") == 1
        assert "draft.md" in _found(engine, "narwhals")
        before = engine.store.total_changes
        engine.sync()
        assert engine.store.total_changes - before == 1
        assert path.read_bytes().startswith(b"Second draft")


def test_a_pdf_replaced_by_a_decompression_bomb_keeps_its_indexed_version(
    tmp_path: Path,
) -> None:
    engine = _keeps_old_version(tmp_path, "report.pdf", GOOD_PDF, "kelp",
                                _spoil_with(_operators_pdf()), "decompression bomb")
    _assert_second_sync_writes_nothing(engine)


def test_html_with_an_unknown_marked_section_is_indexed(tmp_path: Path) -> None:
    """Found by fuzzing: the standard library's parser asserted on ``<![FOO[``."""
    _bad(tmp_path, "marked.html", b"<html><body><p>Before the storm.</p><![NheadTITY [ x ]]>"
         b"<p>After the calm, the harbour reopened.</p></body></html>")
    _expect_indexed(_sync(tmp_path), "marked.html", "harbour reopened")
