"""A one-shot search asks a running `kbsync serve` for the query's vector instead of
loading the model; anything amiss with that server means the model is loaded instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import uvicorn

from kbsync import KnowledgeBase
from kbsync.app.served import announced, notice_path, served_query_vector
from kbsync.engine import init_config
from kbsync.serve import create_app
from tests.conftest import CORPUS


def _knowledge_base(folder: Path, embedder: str) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    for path in sorted(CORPUS.glob("a-harbormaster-*"))[:3]:
        shutil.copy(path, docs / path.name)
    init_config(folder, ["docs"])
    config = (folder / "kbsync.toml").read_text()
    head, _, tail = config.partition("[embedder]")
    rest = tail.split("\n[", 1)
    config = head + "[embedder]\n" + embedder + ("\n[" + rest[1] if len(rest) > 1 else "")
    (folder / "kbsync.toml").write_text(config)
    return folder


@contextmanager
def _serving(kb: KnowledgeBase) -> Iterator[str]:
    """The dashboard over ``kb`` on a free loopback port, announced as `kbsync serve` does."""
    server = uvicorn.Server(uvicorn.Config(create_app(kb), host="127.0.0.1", port=0,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):  # the server binds within moments; the loop only bounds a failure
        if server.started:
            break
        time.sleep(0.02)
    assert server.started, "the server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    try:
        with announced(kb.config, url, kb.embedder.identity):
            yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_served_vector_is_the_vector_the_knowledge_base_computes(tmp_path: Path) -> None:
    folder = _knowledge_base(tmp_path, 'kind = "hashing"\ndimension = 256\n')
    with KnowledgeBase.open(folder) as kb:
        kb.sync()
        identity = kb.embedder.identity
        assert served_query_vector(kb.config, identity, "tides") is None  # nothing announced
        with _serving(kb):
            notice = json.loads(notice_path(kb.config).read_text())
            assert notice["pid"] == os.getpid()
            served = served_query_vector(kb.config, identity, "how do  tides\nwork?")
            assert served is not None
            assert np.array_equal(served, kb.query_vector("how do tides work?"))
            assert served_query_vector(kb.config, identity + "-other", "tides") is None
            hits = kb.search("tides", mode="hybrid", query_vector=served)
            assert hits == kb.search("tides", mode="hybrid")
        assert not notice_path(kb.config).exists()  # the notice goes with the server


@pytest.mark.parametrize("notice", [
    {"url": "http://127.0.0.1:9/", "pid": 1 << 22, "embedder": "E"},  # no such process
    {"url": "http://192.0.2.1:80/", "pid": 0, "embedder": "E"},  # not this machine
    {"url": "http://127.0.0.1:9/", "pid": 0, "embedder": "E"},  # nothing listens there
    "not json at all",
])
def test_a_stale_or_foreign_notice_is_ignored(tmp_path: Path, notice: object) -> None:
    folder = _knowledge_base(tmp_path, 'kind = "hashing"\ndimension = 256\n')
    with KnowledgeBase.open(folder) as kb:
        path = notice_path(kb.config)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(notice, dict) and notice["pid"] == 0:
            notice = {**notice, "pid": os.getpid()}
        path.write_text(notice if isinstance(notice, str) else json.dumps(notice))
        assert served_query_vector(kb.config, "E", "tides", timeout=2.0) is None


def test_the_search_command_asks_a_running_server_and_never_loads_the_model(
    tmp_path: Path,
) -> None:
    pytest.importorskip("sentence_transformers")
    folder = _knowledge_base(tmp_path, 'kind = "local"\n')
    script = textwrap.dedent("""
        import json, sys
        from typer.testing import CliRunner
        from kbsync.cli import app
        result = CliRunner().invoke(app, ["search", "rotate the password", "--mode", "vector",
                                          "--json", "-c", sys.argv[1]])
        assert result.exit_code == 0, result.output
        print(json.dumps({"loaded": "torch" in sys.modules, "output": result.stdout}))
    """)
    with KnowledgeBase.open(folder) as kb:
        kb.sync()
        expected = kb.search("rotate the password", mode="vector")
        with _serving(kb):
            done = subprocess.run([sys.executable, "-c", script, str(folder)],
                                  capture_output=True, text=True, check=True, timeout=300)
    answer = json.loads(done.stdout)
    assert answer["loaded"] is False, done.stderr
    assert [h["key"] for h in json.loads(answer["output"])["hits"]] == [h.key for h in expected]
