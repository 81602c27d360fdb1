"""The local model's query encoder: the fp32 ONNX export of the torch backend's weights
embeds search queries to the torch vectors within the stated tolerance, a sync exports
it, and a one-shot search then never imports torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.embed.providers.file_digests import remembered
from kbsync.embed.providers.local import LocalEmbedder
from kbsync.embed.providers.onnx_int8 import FP32_TOLERANCE, cached_file
from tests.integration.test_embedders import _kb

QUERIES = [
    "how do retries work",
    "What is a trait object in Rust?",
    "rotate the database password every ninety days",
    "x",
    "The ledger of ropes and gulls was kept by the harbour master. " * 40,  # past the window
    "déjà vu: naïve café, 日本語のテキスト",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("onnxruntime")
    return tmp_path_factory.mktemp("query-encoder")


def test_query_vectors_equal_the_torch_vectors_within_the_stated_tolerance(cache: Path) -> None:
    queries = LocalEmbedder(cache_dir=str(cache)).embed_query(QUERIES)
    documents = LocalEmbedder(cache_dir=str(cache)).embed(QUERIES)
    assert queries.shape == documents.shape == (len(QUERIES), 384)
    assert queries.dtype == np.float32
    assert float(np.abs(queries - documents).max()) <= FP32_TOLERANCE
    assert cached_file(LocalEmbedder(cache_dir=str(cache))._weights, cache,
                       quantized=False) is not None


def test_a_sync_exports_the_query_encoder_and_a_one_shot_search_imports_no_torch(
        tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("onnxruntime")
    folder = tmp_path / "cache"
    kb = _kb(tmp_path, f'kind = "local"\ncache_dir = "{folder.as_posix()}"\n',
             files="a-harbormaster-[rs]*")
    with KnowledgeBase.open(kb) as engine:
        engine.sync()
        assert engine.embedder.queries_ready  # type: ignore[attr-defined]
        in_process = engine.search("how is the delay between retries computed", k=3,
                                   mode="vector")
    script = ("import sys\nfrom kbsync.cli import main\nsys.argv = ['kbsync', 'search', "
              "'how is the delay between retries computed', '-k', '3', '--mode', 'vector', "
              "'--json', '-c', sys.argv[1]]\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(*(n in sys.modules for n in ('torch', 'sentence_transformers')), "
              "file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script, str(kb)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False False", done.stderr
    assert "loading the local model" not in done.stderr
    assert in_process[0].key in done.stdout


def test_a_digest_is_computed_again_when_its_file_is_rewritten_with_the_same_stat(
        tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 1000)
    time.sleep(2.1)  # a digest is trusted once taken 2 s after the file last changed
    calls: list[bytes] = []

    def digest() -> str:
        calls.append(weights.read_bytes())
        return str(len(set(calls[-1])))

    assert remembered("w", [weights], digest, tmp_path) == "1"
    assert remembered("w", [weights], digest, tmp_path) == "1"
    assert len(calls) == 1
    stat = weights.stat()
    weights.write_bytes(b"ab" * 500)  # same size, and the mtime put back: the ctime moves
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert remembered("w", [weights], digest, tmp_path) == "2"
    assert len(calls) == 2
