"""An interrupted sync keeps every embedding it computed, and says it was interrupted.

A real ``python`` process syncs the sample corpus with an embedder that writes a
line to a progress file after each batch and then, at its fifth batch, says so and
stalls; the test waits for that line (not for a time) and sends SIGTERM or SIGKILL.
A stopped sync commits what it computed on its way out; a killed one keeps what the
cache had committed, which is every batch when ``cache_seconds`` is 0 (the model
computes in its own thread, so the test waits until the store holds the batches
before the stall, as a reader of the file sees them). Either way the resume embeds
only the rest.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kbsync.engine import DEFAULT_CHUNKER, init_config
from kbsync.extract.registry import extractor_for
from kbsync.sources.files import FilesystemSource
from kbsync.store.sqlite import SqliteStore
from kbsync.sync import SyncOptions, sync_sources
from kbsync.sync.embedding import EMBED_BATCH
from kbsync.testing import CountingEmbedder
from tests.conftest import CORPUS

STALL_AT = 5  # the embedder's call that never returns
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kbsync.engine import DEFAULT_CHUNKER
    from kbsync.extract.registry import extractor_for
    from kbsync.sources.files import FilesystemSource
    from kbsync.store.sqlite import SqliteStore
    from kbsync.sync import BatchLimits, SyncOptions, sync_sources
    from kbsync.testing import CountingEmbedder

    corpus, store_path, progress, stall_at, cache_seconds = sys.argv[1:6]

    class Signalling(CountingEmbedder):
        def embed(self, texts):
            if self.calls + 1 == int(stall_at):
                with open(progress, "a") as f:
                    f.write("stalled\\n")
                while True:
                    time.sleep(3600)
            out = super().embed(texts)
            with open(progress, "a") as f:
                f.write("batch\\n")
            return out

    import kbsync.sync.embedding
    kbsync.sync.embedding._STOP_WAIT = 1.0  # the stalled model batch is not waited for long

    store = SqliteStore(Path(store_path))
    sync_sources([FilesystemSource(corpus, name="docs")], store, Signalling(32),
                 extractor_for, DEFAULT_CHUNKER,
                 SyncOptions(scratch_dir=Path(store_path).parent,
                             batch=BatchLimits(cache_seconds=float(cache_seconds))))
""")


def _wait(child: subprocess.Popen[bytes], done: Callable[[], bool], never: str) -> None:
    """Wait until ``done()`` holds, failing if the child ends first."""
    deadline = time.monotonic() + 300  # a bound for a broken run, not a synchronization
    while time.monotonic() < deadline:
        if done():
            return
        if child.poll() is not None:
            raise AssertionError(f"the sync ended early: {child.communicate()}")
        time.sleep(0.05)
    raise AssertionError(never)


def _stalled(progress: Path, child: subprocess.Popen[bytes]) -> None:
    """Wait until the child's embedder says it stalled."""
    _wait(child, lambda: progress.exists() and "stalled" in progress.read_text(),
          "the embedder never stalled")


def _committed(store_path: Path, count: int, child: subprocess.Popen[bytes]) -> None:
    """Wait until another reader of the store sees ``count`` embeddings committed."""
    def seen() -> int:
        with contextlib.closing(sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)) as db:
            return int(db.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    _wait(child, lambda: seen() >= count, f"the store never held {count} embeddings")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_an_interrupted_sync_keeps_its_embeddings_and_the_resume_embeds_only_the_rest(
        tmp_path: Path, signum: int) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    store_path, progress = tmp_path / "kb.db", tmp_path / "progress"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    # Stopped: the default commits (once a second) happen on the way out as well.
    cache_seconds = 0 if signum == signal.SIGKILL else 3600
    child = subprocess.Popen([sys.executable, str(script), str(CORPUS), str(store_path),
                              str(progress), str(STALL_AT), str(cache_seconds)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kept = (STALL_AT - 1) * EMBED_BATCH
    try:
        _stalled(progress, child)
        if signum == signal.SIGKILL:
            _committed(store_path, kept, child)
        child.send_signal(signum)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0
    if signum == signal.SIGTERM:
        assert b"Terminated: terminated (SIGTERM)" in err  # a clean stop, as by Ctrl-C

    store = SqliteStore(store_path)
    try:
        assert store.status().embeddings == kept
        runs = store.runs(5)
        if signum == signal.SIGTERM:
            assert [r.report.get("interrupted") for r in runs] == [True]
        else:
            assert runs == []  # nothing could be recorded; the embeddings are there all the same
        embedder = CountingEmbedder(32)
        resumed = sync_sources([FilesystemSource(CORPUS, name="docs")], store, embedder,
                               extractor_for, DEFAULT_CHUNKER,
                               options=SyncOptions(scratch_dir=tmp_path))
        source = resumed.sources[0]
        assert source.embeddings_computed == embedder.texts == source.embeddings_to_compute
        assert source.embeddings_reused == kept
        assert store.status().embeddings == kept + embedder.texts
        assert store.status().last_run is not None
    finally:
        store.close()


NATIVE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import torch
    from kbsync.engine import DEFAULT_CHUNKER
    from kbsync.extract.registry import extractor_for
    from kbsync.sources.files import FilesystemSource
    from kbsync.store.sqlite import SqliteStore
    from kbsync.sync import SyncOptions, sync_sources
    from kbsync.testing import CountingEmbedder

    corpus, store_path, progress = sys.argv[1:4]
    # One thread: torch's threads spinning against a loaded machine's other work can stretch
    # a batch past the sync's stop wait, which this test is not about.
    torch.set_num_threads(1)

    class Native(CountingEmbedder):
        def embed(self, texts):
            with open(progress, "a") as f:
                f.write("stalled\\n")
            a = torch.randn(256, 256)
            for _ in range(400):  # a model's work: native code, a while
                a = torch.tanh(a @ a)
            return super().embed(texts)

    store = SqliteStore(Path(store_path))
    sync_sources([FilesystemSource(corpus, name="docs")], store, Native(32),
                 extractor_for, DEFAULT_CHUNKER,
                 SyncOptions(scratch_dir=Path(store_path).parent))
""")


def test_a_sync_stopped_while_its_model_computes_ends_cleanly(tmp_path: Path) -> None:
    # A process that ended while the embedding thread was inside torch was aborted on its
    # way out ("terminate called without an active exception", SIGABRT) after its clean stop.
    pytest.importorskip("torch")
    script = tmp_path / "child.py"
    script.write_text(NATIVE, encoding="utf-8")
    store_path, progress = tmp_path / "kb.db", tmp_path / "progress"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen([sys.executable, str(script), str(CORPUS), str(store_path),
                              str(progress)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _stalled(progress, child)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert b"Terminated: terminated (SIGTERM)" in err  # the clean stop
    assert b"terminate called" not in err
    assert child.returncode != -signal.SIGABRT


CLI = textwrap.dedent("""
    import sys, time
    import kbsync.sync.embedding
    from kbsync.cli import main
    from kbsync.embed.hashing import HashingEmbedder

    progress, *arguments = sys.argv[1:]
    real, calls = HashingEmbedder.embed, []

    def stalling(self, texts):
        calls.append(len(texts))
        if len(calls) == 3:
            with open(progress, "a") as f:
                f.write("stalled\\n")
            while True:
                time.sleep(3600)
        return real(self, texts)

    HashingEmbedder.embed = stalling
    kbsync.sync.embedding._STOP_WAIT = 1.0  # the stalled batch is not waited for long
    sys.argv = ["kbsync", *arguments]
    main()
""")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_kbsync_sync_stopped_by_ctrl_c_exits_130_and_by_sigterm_143_recording_the_run(
        tmp_path: Path, signum: int, code: int) -> None:
    config = init_config(tmp_path / "kb", [str(CORPUS)])
    script, progress = tmp_path / "child.py", tmp_path / "progress"
    script.write_text(CLI, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen([sys.executable, str(script), str(progress), "sync", "-c",
                              str(config.file)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _stalled(progress, child)
        child.send_signal(signum)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == code, err
    assert b"interrupted: what was applied stays" in err
    assert b"Traceback" not in err
    store = SqliteStore(Path(config.store_location))
    try:
        assert [r.report.get("interrupted") for r in store.runs(5)] == [True]
    finally:
        store.close()
