from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.cli import app
from kbsync.core.identity import embedding_text_key
from kbsync.core.plan import Action
from kbsync.embed import Vectors
from kbsync.engine import init_config, load_config, writer_lock
from kbsync.errors import LockedError
from kbsync.extract.registry import extractor_for
from kbsync.store.postgres import PostgresStore
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import Chunker, SyncOptions, sync_sources
from kbsync.testing import CountingEmbedder, MemorySource, MemoryStore
from tests.conftest import CORPUS, Backend

Store = SqliteStore | PostgresStore

SENTENCE = " A new sentence about the night shift and the harbour lights."


HOUR_NS = 3600 * 10**9


@pytest.fixture
def kb(tmp_path: Path, backend: Backend) -> Path:
    """A knowledge base of 12 files, on each kind of store.

    The files were last written an hour ago: a stat as new as the sync that takes it
    is racy, and the next sync reads the file again rather than trust it.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    an_hour_ago = time.time_ns() - HOUR_NS
    for path in sorted(CORPUS.iterdir())[:12]:
        shutil.copy(path, docs / path.name)
        os.utime(docs / path.name, ns=(an_hour_ago, an_hour_ago))
    init_config(tmp_path, ["docs"])
    backend.configure(tmp_path)
    return tmp_path


def _engine(kb: Path) -> KnowledgeBase:
    return KnowledgeBase.open(kb)


def _edit(path: Path, text: str | None = None) -> None:
    body = path.read_text()
    at = body.index(". ", len(body) // 2) + 1
    path.write_text(text if text is not None else body[:at] + SENTENCE + body[at:])


def test_a_first_sync_adds_every_document_and_the_store_verifies(kb: Path) -> None:
    with _engine(kb) as engine:
        report = engine.sync()
        assert report.total("new") == 12
        assert report.sources[0].embeddings_computed > 0
        assert engine.verify().problems == ()
        assert engine.status().documents == 12


def test_a_second_identical_sync_writes_nothing_but_its_run_report(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        before = engine.store.total_changes
        report = engine.sync()
        assert report.total("unchanged") == 12
        assert report.sources[0].bytes_read == 0
        assert report.sources[0].embeddings_computed == 0
        assert engine.store.total_changes - before == 1  # the runs row


def test_the_stat_gate_skips_reading_and_verify_mode_reads_everything(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        assert engine.sync().sources[0].bytes_read == 0
        forced = engine.sync(verify=True)
        assert forced.sources[0].bytes_read > 0
        assert forced.total("unchanged") == 12


def test_a_same_stat_edit_is_caught_only_by_verify_mode(kb: Path) -> None:
    path = kb / "docs" / "a-essay-city-at-night.txt"
    with _engine(kb) as engine:
        engine.sync()
        st = path.stat()
        body = path.read_text()
        path.write_text(body.replace("night", "NIGHT", 1))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert engine.sync().total("modified") == 0
        assert engine.sync(verify=True).total("modified") == 1


def test_a_touched_file_is_unchanged_and_its_stat_refreshed(kb: Path) -> None:
    path = kb / "docs" / "a-essay-lighthouses.txt"
    with _engine(kb) as engine:
        documents = engine.sync().total("new")
        touched = path.stat().st_mtime_ns + 5_000_000_000  # a touch, long enough ago
        os.utime(path, ns=(touched, touched))
        report = engine.sync()
        assert report.total("metadata-only") == 0
        assert report.total("unchanged") == documents
        assert report.sources[0].changes == ()
        assert report.sources[0].bytes_read == path.stat().st_size
        assert report.sources[0].embeddings_computed == 0
        assert report.sources[0].chunks["added"] == 0
        assert engine.sync().sources[0].bytes_read == 0  # the stat was refreshed


def test_a_changed_title_alone_is_metadata_only(kb: Path) -> None:
    path = kb / "docs" / "retitled.md"
    path.write_text("---\ntitle: Lighthouses\n---\nKeepers trimmed the wicks every night.\n")
    with _engine(kb) as engine:
        engine.sync()
        path.write_text("---\ntitle: Old lighthouses\n---\nKeepers trimmed the wicks every "
                        "night.\n")
        report = engine.sync()
        assert report.total("metadata-only") == 1
        assert [(c.key, c.action) for c in report.sources[0].changes] == [
            ("retitled.md", "metadata-only")]
        assert engine.document("retitled.md").title == "Old lighthouses"


def test_a_new_extractor_version_that_drops_markup_rechunks_and_modifies_nothing(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbsync.extract import markdown

    path = kb / "docs" / "traits.md"
    path.write_text("# Traits\n\nA [trait object][objects] points to an instance of a type "
                    "that implements a trait.\n\n[objects]: https://example.org/trait-objects\n")
    with monkeypatch.context() as old:  # the extractor before it dropped markup
        old.setattr(markdown, "strip_noise", lambda lines, tokens, env: lines)
        old.setattr(markdown.MarkdownExtractor, "identity", property(lambda self: "markdown-v2"))
        with _engine(kb) as engine:
            engine.sync()
            assert "https://example.org" in engine.document("traits.md").text
    with _engine(kb) as engine:
        report = engine.sync()
        assert report.total("modified") == 0
        assert report.total("rechunked") >= 1
        assert "https://example.org" not in engine.document("traits.md").text
        hits = engine.search("trait object instance", k=3, mode="text")
        assert hits
        assert hits[0].key == "traits.md"
        assert "example.org" not in hits[0].context
        assert "A trait object points to an instance" in hits[0].context
        assert engine.verify().problems == ()


def test_whitespace_only_edits_pass_the_bytes_gate_but_not_the_text_gate(kb: Path) -> None:
    path = kb / "docs" / "a-essay-lighthouses.txt"
    with _engine(kb) as engine:
        engine.sync()
        path.write_text(path.read_text().replace(". ", ".  ", 3))
        report = engine.sync()
        assert report.total("metadata-only") == 0
        assert report.sources[0].changes == ()
        assert report.sources[0].chunks["added"] == 0


def test_a_one_sentence_edit_re_embeds_only_the_chunks_around_it(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        _edit(kb / "docs" / "a-essay-learning-to-bake-bread.txt")
        report = engine.sync()
        src = report.sources[0]
        assert report.total("modified") == 1
        assert 1 <= src.embeddings_computed <= 3
        assert src.chunks["kept"] + src.chunks["moved"] > 0
        assert engine.verify().problems == ()
        change = engine.diff("a-essay-learning-to-bake-bread.txt")
        assert change.regions
        assert any(SENTENCE.strip()[:20] in r.text for r in change.regions)
        assert all(r.text == change.text[r.offset : r.offset + r.length] for r in change.regions)


def test_a_deleted_file_is_removed_with_its_chunks(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        (kb / "docs" / "a-essay-lighthouses.txt").unlink()
        report = engine.sync()
        assert report.total("deleted") == 1
        assert engine.status().documents == 11
        assert engine.verify().problems == ()


def test_a_renamed_file_is_moved_and_nothing_is_re_embedded(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        docs = kb / "docs"
        before = engine.diff("a-essay-lighthouses.txt")
        assert before.moved_from is None
        (docs / "a-essay-lighthouses.txt").rename(docs / "lighthouses-renamed.txt")
        report = engine.sync()
        assert report.total("moved") == 1
        assert report.total("deleted") == 0
        assert report.sources[0].embeddings_computed == 0
        assert engine.store.document("lighthouses-renamed.txt") is not None
        assert engine.verify().problems == ()
        after = engine.diff("lighthouses-renamed.txt")
        assert after.moved_from == "a-essay-lighthouses.txt"
        assert after.moved is not None
        assert after.last_changed == before.last_changed  # the text did not change
    result = CliRunner().invoke(app, ["diff", "lighthouses-renamed.txt", "-c", str(kb)])
    assert "moved from a-essay-lighthouses.txt" in result.output


def test_a_failed_listing_deletes_nothing(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        shutil.move(kb / "docs", kb / "elsewhere")
        report = engine.sync()
        assert report.total("deleted") == 0
        assert report.failed
        assert engine.status().documents == 12


def test_deleting_more_than_half_needs_allow_mass_delete(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        for path in sorted((kb / "docs").iterdir())[:8]:
            path.unlink()
        blocked = engine.sync()
        assert blocked.sources[0].deletions_blocked
        assert engine.status().documents == 12
        allowed = engine.sync(allow_mass_delete=True)
        assert allowed.total("deleted") == 8


def test_a_bad_document_fails_alone_and_keeps_its_old_version(kb: Path) -> None:
    path = kb / "docs" / "a-essay-lighthouses.txt"
    with _engine(kb) as engine:
        engine.sync()
        path.write_bytes(b"\x00\x01\x02binary\x00" * 200)
        _edit(kb / "docs" / "a-essay-city-at-night.txt")
        report = engine.sync()
        assert report.total("failed") == 1
        assert report.total("modified") == 1
        assert any("a-essay-lighthouses.txt" in key for key, _ in report.sources[0].failures)
        assert engine.store.document("a-essay-lighthouses.txt") is not None
        assert engine.search("lighthouse keeper", k=3, mode="text")


def test_search_finds_text_by_vector_full_text_and_both(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        for mode in ("vector", "text", "hybrid"):
            hits = engine.search("retry backoff delay", k=5, mode=mode)  # type: ignore[arg-type]
            assert hits, mode
            assert any("retr" in h.text.lower() for h in hits), mode


def _synced_then_rechunked(kb: Path) -> None:
    """Sync the knowledge base, then change its chunker's ``max_tokens``."""
    with _engine(kb) as engine:
        engine.sync()
    config = (kb / "kbsync.toml").read_text().replace("max_tokens = 192", "max_tokens = 160")
    (kb / "kbsync.toml").write_text(config)


def test_a_changed_chunker_is_planned_as_re_derivation(kb: Path) -> None:
    _synced_then_rechunked(kb)
    with _engine(kb) as engine:
        planned = engine.plan()
        assert planned.total("rechunked") == 12
        assert planned.sources[0].embedding_tokens > 0
        assert engine.status().runs == 1  # plan wrote nothing


def test_verify_after_a_chunker_change_finds_nothing_before_or_after_the_sync(kb: Path) -> None:
    _synced_then_rechunked(kb)
    with _engine(kb) as engine:
        # Chunks made with the old settings wait for the sync: they are not damage.
        assert engine.verify().problems == ()
        assert engine.sync().total("rechunked") == 12
        assert engine.verify().problems == ()


def test_erase_and_gc_leave_no_byte_of_the_erased_text(kb: Path, backend: Backend) -> None:
    canary = "CanaryXyzzyPlugh"
    (kb / "docs" / "secret.txt").write_text(f"This file holds the {canary} passphrase. " * 20)
    with _engine(kb) as engine:
        engine.sync()
        assert engine.search(canary, mode="text")
        assert [d.key for d in engine.erase("secret.*").documents] == ["secret.txt"]
        engine.gc()
        assert engine.verify().problems == ()
        if isinstance(engine.store, PostgresStore):
            # Every row of every table, as text (the tables were rewritten by VACUUM FULL).
            conn = engine.store._conn
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
            assert "texts" in tables
            for table in tables:
                rows = conn.execute(f"SELECT t::text FROM {table} t").fetchall()
                assert not any(canary in r[0] for r in rows), table
    (kb / "docs" / "secret.txt").unlink()
    if backend.name == "sqlite":
        for path in (kb / ".kbsync").iterdir():
            assert canary.encode() not in path.read_bytes(), path.name


def test_verify_repair_of_a_sound_store_without_a_vector_store_takes_no_lock(kb: Path) -> None:
    # Nothing to repair and no vectors outside the records: nothing to wait for.
    with _engine(kb) as engine:
        engine.sync()
        with writer_lock(engine.config):
            checked = engine.verify(repair=True, wait=False)
        assert checked.problems == checked.remaining == ()
        assert engine.reconcile(repair=True, wait=False) is None


def test_verify_catches_a_corrupted_store(kb: Path, backend: Backend) -> None:
    current = ("SELECT min(c.digest) FROM chunks c JOIN documents d ON c.doc_id = d.id "
               "AND c.generation = d.generation")
    with _engine(kb) as engine:
        engine.sync()
        backend.execute(engine.store, "UPDATE chunk_texts SET text = text || ' tampered' "
                                      f"WHERE digest = ({current})")
        backend.execute(engine.store, f"DELETE FROM embeddings WHERE digest = ({current})")
    with _engine(kb) as engine:
        problems = engine.verify().problems
    assert any("does not match its text" in p for p in problems)
    assert any("has no vector" in p for p in problems)


def test_a_store_from_a_newer_kbsync_is_refused_without_writes(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    before = path.read_bytes()
    from kbsync.errors import SchemaError

    with pytest.raises(SchemaError, match="newer"):
        SqliteStore(path)
    assert path.read_bytes() == before


def test_a_second_writer_waits_or_fails_fast_with_no_wait(kb: Path) -> None:
    config = load_config(kb)
    with writer_lock(config):
        with pytest.raises(LockedError):
            _engine(kb).sync(wait=False)
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "kbsync", "sync", "--no-wait", "-c", str(kb)],
                             capture_output=True, text=True)
        assert out.returncode == 3
        assert time.monotonic() - started < 10
        assert "another kbsync process" in out.stderr


def test_a_failing_embedder_leaves_documents_as_they_were_and_retries_only_the_rest(
    store: Store,
) -> None:
    source = MemorySource({"a.txt": b"alpha words " * 200, "b.txt": b"beta words " * 200})
    chunker = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
    good = CountingEmbedder()
    sync_sources([source], store, good, extractor_for, chunker)
    source.documents["a.txt"] = b"alpha words " * 200 + b"POISON appears here."
    source.documents["b.txt"] = b"beta words " * 200 + b"fine change."
    bad = CountingEmbedder(fail_on=["POISON"])
    report = sync_sources([source], store, bad, extractor_for, chunker)
    assert report.total("failed") == 1
    assert "POISON" not in (store.document("a.txt").text)  # type: ignore[union-attr]
    assert store.verify(bad.identity, None) == []
    counter = CountingEmbedder()
    again = sync_sources([source], store, counter, extractor_for, chunker)
    assert again.total("modified") == 1
    assert counter.texts == again.sources[0].embeddings_computed <= 2
    assert again.sources[0].documents[Action.UNCHANGED.value] == 1


def _memory_sync(source: MemorySource, store: Store, embedder: CountingEmbedder):
    chunker = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
    return sync_sources([source], store, embedder, extractor_for, chunker)


def test_a_not_modified_answer_skips_reading_and_validators_are_kept(store: Store) -> None:
    source = MemorySource({"https://x.test/a": b"alpha words " * 50}, http=True)
    embedder = CountingEmbedder()
    _memory_sync(source, store, embedder)
    source.reads.clear()
    before = store.total_changes
    report = _memory_sync(source, store, embedder)
    assert report.total("unchanged") == 1
    assert source.reads == []
    assert store.total_changes - before == 1
    assert store.manifest("memory")["https://x.test/a"].validators is not None


def test_a_404_deletes_only_when_the_next_check_confirms_it(store: Store) -> None:
    from kbsync.model import ItemError

    key = "https://x.test/a"
    source = MemorySource({key: b"alpha words " * 50, "https://x.test/b": b"beta " * 50},
                          http=True)
    embedder = CountingEmbedder()
    _memory_sync(source, store, embedder)
    source.errors[key] = ItemError(key, "HTTP 404", missing=True)
    first = _memory_sync(source, store, embedder)
    assert first.total("failed") == 1
    assert store.manifest("memory")[key].missing == 1
    assert store.document(key) is not None
    del source.errors[key]
    del source.documents[key]  # the second check finds it gone for good
    second = _memory_sync(source, store, embedder)
    assert second.total("deleted") == 1


def test_a_page_back_after_a_404_clears_its_missing_count(store: Store) -> None:
    from kbsync.model import ItemError

    key = "https://x.test/a"
    source = MemorySource({key: b"alpha words " * 50, "https://x.test/b": b"beta " * 50},
                          http=True)
    embedder = CountingEmbedder()
    _memory_sync(source, store, embedder)
    source.errors[key] = ItemError(key, "HTTP 404", missing=True)
    _memory_sync(source, store, embedder)
    del source.errors[key]
    _memory_sync(source, store, embedder)
    assert store.manifest("memory")[key].missing == 0


def test_a_version_1_store_is_migrated_in_place(tmp_path: Path) -> None:
    from kbsync.store.sqlite import schema as sqlite_store

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for statement in sqlite_store.MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute(
        "INSERT INTO documents (source, key, locator, media_type, bytes_hash, text_hash, "
        "derivation, generation, first_seen, last_seen, last_changed) "
        "VALUES ('s', 'k', 'l', 'text/plain', 'b', 't', 'd', 1, 'now', 'now', 'now')"
    )
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert store.manifest("s")["k"].missing == 0
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == (
        sqlite_store.SCHEMA_VERSION
    )


class _Recording(CountingEmbedder):
    """The counting embedder, keeping every text it embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen += texts
        return super().embed(texts)


def _harbour_text(seed: int) -> bytes:
    rng = random.Random(seed)
    words = ["harbour", "light", "tide", "shift", "crane", "night", "pier", "rope", "gull"]
    sentences = (" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize()
                 + "." for _ in range(300))
    return " ".join(sentences).encode()


def test_a_chunker_setting_change_embeds_only_the_chunks_whose_text_is_new(store: Store) -> None:
    source = MemorySource({"a.txt": _harbour_text(1), "b.txt": _harbour_text(2)})
    embedder = _Recording()
    sync_sources([source], store, embedder, extractor_for,
                 Chunker("tttd", {"min_tokens": 16, "max_tokens": 64}))
    first = set(embedder.seen)
    embedder.seen.clear()
    report = sync_sources([source], store, embedder, extractor_for,
                          Chunker("tttd", {"min_tokens": 16, "max_tokens": 80}))
    tally = report.sources[0]
    # Every chunk has a new identity (the parameters are part of it); most kept their text.
    assert tally.chunks["added"] == tally.embeddings_computed + tally.embeddings_reused
    assert tally.embeddings_reused > 0 < tally.embeddings_computed
    assert set(embedder.seen).isdisjoint(first)
    assert tally.embeddings_computed == len(embedder.seen)
    assert store.verify(embedder.identity, None) == []
    hits = store.search_vector(embedder.identity, embedder.embed(["harbour light tide"])[0],
                               3).hits
    assert len(hits) == 3


def test_a_vector_is_adopted_by_its_text_and_written_only_when_asked(store: Store) -> None:
    for each in (store, MemoryStore()):
        embedder = CountingEmbedder()
        sync_sources([MemorySource({"a.txt": b"The harbour light turns at dusk. " * 9})], each,
                     embedder, extractor_for, Chunker("tttd"))
        (held,) = each.cached(embedder.identity, [c.digest for c in each.indexed_chunks()])
        (text,) = each.unembedded("memory", "another-model:64").values()
        wanted = {"new-1": embedding_text_key(text),
                  "new-2": embedding_text_key("a text never stored")}
        assert each.adopt_by_text(embedder.identity, wanted, write=False) == {"new-1"}
        assert each.cached(embedder.identity, ["new-1"]) == set()
        assert each.adopt_by_text("another-model:64", wanted) == set()
        assert each.adopt_by_text(embedder.identity, wanted) == {"new-1"}
        vectors = each.vectors(embedder.identity, [held, "new-1"])
        assert vectors["new-1"].tolist() == vectors[held].tolist()


def test_a_chunker_change_re_chunks_in_place_and_keeps_the_last_real_edit(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    times = iter(f"2026-01-01T00:00:{n:02d}+00:00" for n in range(60))
    monkeypatch.setattr("kbsync.sync.apply.utc_now", lambda: next(times))
    first, edited = _harbour_text(1), _harbour_text(1) + b" The crane sleeps at noon."
    for each in (store, MemoryStore()):
        embedder = CountingEmbedder()
        small, large = (Chunker("tttd", {"min_tokens": 16, "max_tokens": m}) for m in (64, 80))
        sync_sources([MemorySource({"a.txt": first, "b.txt": _harbour_text(2)})], each,
                     embedder, extractor_for, small)
        source = MemorySource({"a.txt": edited, "b.txt": _harbour_text(2)})
        sync_sources([source], each, embedder, extractor_for, small)
        before = each.document("a.txt")
        assert before is not None
        report = sync_sources([source], each, embedder, extractor_for, large)
        assert (report.total("rechunked"), report.total("modified")) == (2, 0)
        after = each.document("a.txt")
        assert after is not None
        # The edit stays the last change: same text, previous text, generation and time.
        assert (after.text, after.previous, after.generation, after.last_changed) == (
            before.text, before.previous, before.generation, before.last_changed)
        current = [(c.start, c.end) for c in each.indexed_chunks() if c.key == "a.txt"]
        assert current == [(c.start, c.end) for c in large.chunks(after.text)]
        assert len(current) < len(small.chunks(after.text))
        if each is store:  # a MemoryStore has no stored file whose invariants to check
            assert store.verify(embedder.identity, None) == []
        assert each.search_text("crane sleeps noon", 1)[0].key == "a.txt"
        again = sync_sources([source], each, embedder, extractor_for, large)
        assert again.total("unchanged") == 2


def test_the_store_names_each_embedder_and_its_dimension(store: Store) -> None:
    assert store.embedder_dimensions() == {}
    for embedder, dimension in (("b:8", 8), ("a:4", 4), ("c 'quoted' %_:2", 2)):
        store.put_vectors(embedder, {f"d{n}": np.ones(dimension, dtype=np.float32)
                                     for n in range(3)})
    assert store.embedder_dimensions() == {"a:4": 4, "b:8": 8, "c 'quoted' %_:2": 2}
    store.gc()  # no chunk holds those digests: the vectors go, and with them their embedders
    assert store.embedder_dimensions() == {}


def test_a_version_11_store_keys_its_chunk_texts_so_their_vectors_are_found_by_text(
    tmp_path: Path,
) -> None:
    from kbsync.store.sqlite import schema as sqlite_store

    path = tmp_path / "old.db"
    store = SqliteStore(path)
    embedder = CountingEmbedder()
    source = MemorySource({"a.txt": _harbour_text(3)})
    sync_sources([source], store, embedder, extractor_for, Chunker("tttd"))
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP INDEX chunk_texts_key")
    db.execute("ALTER TABLE chunk_texts DROP COLUMN text_key")
    db.execute("PRAGMA user_version = 11")
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == (
        sqlite_store.SCHEMA_VERSION)
    report = sync_sources([source], store, embedder, extractor_for,
                          Chunker("tttd", {"max_tokens": 256}))
    assert report.sources[0].embeddings_reused > 0  # found by the keys the migration made
    store.close()


def test_a_version_7_store_keeps_each_document_s_current_and_previous_text(
    tmp_path: Path,
) -> None:
    from kbsync.store.sqlite import schema as sqlite_store

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for migration in sqlite_store.MIGRATIONS[:7]:
        for statement in migration.split(";"):
            if statement.strip():
                db.execute(statement)
    for doc_id, key, generation, text, previous in ((1, "a", 3, "third", "second"),
                                                     (2, "b", 1, "only", None)):
        db.execute(
            "INSERT INTO documents (id, source, key, locator, media_type, bytes_hash, text_hash, "
            "derivation, generation, first_seen, last_seen, last_changed) "
            "VALUES (?, 's', ?, 'l', 'text/plain', 'b', 't', 'd', ?, 'now', 'now', 'now')",
            (doc_id, key, generation))
        db.execute("INSERT INTO texts (doc_id, text, previous) VALUES (?, ?, ?)",
                   (doc_id, text, previous))
    db.execute("PRAGMA user_version = 7")
    db.commit()
    db.close()
    store = SqliteStore(path)
    a, b = store.document("a", "s"), store.document("b", "s")
    assert a is not None
    assert b is not None
    assert (a.text, a.previous, b.text, b.previous) == ("third", "second", "only", None)


def test_verify_names_a_document_whose_current_text_is_gone_and_search_still_answers(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "kb.db")
    try:
        source = MemorySource({"a.txt": b"The harbour light turns at dusk. " * 60})
        sync_sources([source], store, CountingEmbedder(), extractor_for, Chunker())
        db = sqlite3.connect(tmp_path / "kb.db")
        with db:
            db.execute("DELETE FROM versions")
        db.close()
        problems = store.verify(CountingEmbedder().identity, None)
        assert problems == ["memory:a.txt: the text of its current version is missing"]
        hit = store.search_text("harbour", 1)[0]
        assert store.window(hit, 400).text == hit.text
    finally:
        store.close()


class _AskedStore(SqliteStore):
    """Counts the queries for chunks without a vector (every chunk against the cache)."""

    asked = 0

    def unembedded(self, source: str, embedder: str) -> dict[str, str]:
        self.asked += 1
        return super().unembedded(source, embedder)


class _OtherModel(CountingEmbedder):
    @property
    def identity(self) -> str:
        return "other-model:64"


def test_a_no_op_sync_does_not_query_every_chunk_for_its_vector_but_verify_does(
    tmp_path: Path,
) -> None:
    store = _AskedStore(tmp_path / "kb.db")
    try:
        source = MemorySource({f"d{i}.txt": f"Harbour note {i} about cranes and tides. ".encode()
                               * 30 for i in range(5)})
        chunker, embedder = Chunker(), CountingEmbedder()
        sync_sources([source], store, embedder, extractor_for, chunker)
        assert store.asked > 0
        store.asked = 0
        sync_sources([source], store, embedder, extractor_for, chunker)
        assert store.asked == 0
        db = sqlite3.connect(tmp_path / "kb.db")
        with db:
            db.execute("DELETE FROM embeddings WHERE rowid IN (SELECT rowid FROM embeddings "
                       "LIMIT 2)")
        db.close()
        checked = sync_sources([source], store, embedder, extractor_for, chunker,
                               options=SyncOptions(verify=True))
        assert checked.sources[0].embeddings_backfill == 2
        assert store.verify(embedder.identity, None) == []
        store.asked = 0
        other = _OtherModel()  # another embedder: every chunk needs its vector
        assert sync_sources([source], store, other, extractor_for, chunker).sources[
            0].embeddings_backfill > 0
        assert store.asked > 0
    finally:
        store.close()


def test_a_batch_inside_a_batch_joins_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "kb.db")
    try:
        with store.batch():
            with store.batch():
                store.set_meta("inner", "1")
            store.set_meta("outer", "2")
        assert (store.get_meta("inner"), store.get_meta("outer")) == ("1", "2")
    finally:
        store.close()


def test_boilerplate_shared_by_many_documents_is_neither_embedded_nor_searched(
    store: Store,
) -> None:
    disclaimer = ("Legal notice. Quarterly figures are unaudited and the zorblax clause "
                  "applies to every reader in every jurisdiction without exception. ") * 30
    docs = {f"doc{i}.txt": (f"Document {i} talks about topic {i} and unique word w{i}x. " * 40
                            + "\n\n" + disclaimer).encode() for i in range(12)}
    source = MemorySource(docs)
    chunker = Chunker("tttd", {"min_tokens": 16, "max_tokens": 64})
    embedder = CountingEmbedder()
    report = sync_sources([source], store, embedder, extractor_for, chunker)
    shared = store.boilerplate("memory")
    assert shared
    assert report.sources[0].boilerplate_chunks == len(shared)
    done = report.sources[0]
    # Every added chunk is embedded, reused or boilerplate, one of each per chunk.
    assert done.boilerplate_added >= 12  # each document adds the disclaimer's chunks
    assert done.chunks["added"] == (done.embeddings_computed + done.embeddings_reused
                                    + done.boilerplate_added)
    assert not any(h.digest in shared for h in store.search_text("zorblax clause", 50))
    assert store.verify(embedder.identity, None) == []
    kept = sync_sources([source], store, CountingEmbedder(), extractor_for, chunker,
                        options=SyncOptions(index_boilerplate=True))
    assert kept.sources[0].documents["unchanged"] == 12


def test_status_names_the_writer_that_holds_the_lock_without_taking_it(kb: Path) -> None:
    with _engine(kb) as engine:
        engine.sync()
        assert engine.status().writer is None
        lock = writer_lock(engine.config)
        with lock:
            writer = engine.status().writer
            shown = CliRunner().invoke(app, ["status", "-c", str(kb)]).output
            # The status asked without locking: a writer that does not wait still fails.
            with pytest.raises(LockedError):
                engine.sync(wait=False)
        assert writer is not None
        postgres = engine.config.store.kind == "postgres"
        assert writer.startswith("server process " if postgres else "pid ")
        assert f"{writer}) is running" in shown
        assert engine.status().writer is None
        assert "is running" not in CliRunner().invoke(app, ["status", "-c", str(kb)]).output
