"""The local embedder's onnx-int8 backend: close to torch, its own identity, a cache it trusts
only when whole, and no heavy import before the first embedding.

The export (a few seconds) is done once per test run into a temporary cache folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kbsync.app.knowledge_base import KnowledgeBase
from kbsync.embed.providers.local import LocalEmbedder
from kbsync.engine import make_embedder
from kbsync.errors import ConfigError
from tests.integration.test_embedders import _kb

pytest.importorskip("sentence_transformers")
pytest.importorskip("onnxruntime")

TEXTS = [
    "A much longer text about harbour cranes, tides and the lanterns on the quay at night.",
    "Retry the request with exponential backoff, doubling the delay after each failure.",
    "Rotate the database password every ninety days and store it in the secrets manager.",
    "The ledger of ropes and gulls was kept by the harbour master. " * 30,
    "def connect(host: str, port: int = 5432) -> Connection:\n    return Connection(host, port)",
    "## Installation\n\nInstall the package with pip, then run `kbsync init` in the folder.",
]


def _onnx(cache: Path) -> LocalEmbedder:
    return LocalEmbedder(backend="onnx-int8", cache_dir=str(cache))


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A cache folder holding the export, and the backend's vectors of TEXTS."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    return cache, _onnx(cache).embed(TEXTS)


def _files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.onnx"))


def test_onnx_vectors_are_close_to_the_torch_backend_s(exported: tuple[Path, np.ndarray]) -> None:
    _, vectors = exported
    torch_vectors = LocalEmbedder(batch_size=4).embed(TEXTS)
    assert vectors.shape == torch_vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines.min() >= 0.97, cosines


def test_the_onnx_backend_has_its_own_identity_and_the_same_shape_and_tokens(
        exported: tuple[Path, np.ndarray]) -> None:
    onnx, torch = _onnx(exported[0]), LocalEmbedder()
    assert onnx.identity != torch.identity
    assert "onnx-int8" in onnx.identity
    assert onnx.dimension == torch.dimension == 384
    assert onnx.max_input_tokens == torch.max_input_tokens == 256
    assert onnx.token_counter == torch.token_counter is not None
    assert onnx.count_tokens(TEXTS) == torch.count_tokens(TEXTS)
    assert onnx.embed([]).shape == (0, 384)


def test_a_second_embedder_reuses_the_cached_export(
        exported: tuple[Path, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    from kbsync.embed.providers import onnx_int8

    cache, vectors = exported
    (before,) = _files(cache)
    seen = before.stat()

    def no_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_int8, "_export", no_export)
    again = _onnx(cache).embed(TEXTS)
    assert np.array_equal(again, vectors)
    (after,) = _files(cache)
    assert after == before
    assert (after.stat().st_ino, after.stat().st_mtime_ns) == (seen.st_ino, seen.st_mtime_ns)


def test_a_cut_short_or_damaged_cache_file_is_built_again(
        exported: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    cache, vectors = exported
    (good,) = _files(cache)
    cut = tmp_path / good.name
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # a write cut short
    damaged = tmp_path / good.name.replace(good.name.split(".")[1], "0" * 32)
    shutil.copy(good, damaged)
    with damaged.open("r+b") as f:  # same length, a few bytes changed
        f.seek(good.stat().st_size // 3)
        f.write(b"\xff" * 64)
    embedder = _onnx(tmp_path)
    rebuilt = embedder.embed(TEXTS)
    (kept,) = _files(tmp_path)
    assert kept == embedder._onnx.file
    assert kept.stat().st_size == good.stat().st_size
    assert np.allclose(rebuilt, vectors, atol=1e-5)
    assert not list(tmp_path.glob(".export-*"))  # the private build folder is gone


def test_an_unknown_backend_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r'backend: expected one of "torch", "onnx-int8", '
                                          r'got "onnx"'):
        make_embedder({"kind": "local", "backend": "onnx"})


def test_commands_that_embed_nothing_import_neither_onnxruntime_nor_torch(
        exported: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    cache, _ = exported
    kb = _kb(tmp_path, f'kind = "local"\nbackend = "onnx-int8"\ncache_dir = "{cache.as_posix()}"\n',
             files="a-harbormaster-[rs]*")
    script = textwrap.dedent("""
        import sys
        from typer.testing import CliRunner
        from kbsync.cli import app
        from kbsync.app.knowledge_base import KnowledgeBase
        for args in (["status"], ["plan"], ["search", "retry", "--mode", "text"]):
            result = CliRunner().invoke(app, [*args, "-c", sys.argv[1]])
            assert result.exit_code in (0, 4), (args, result.output)
        with KnowledgeBase.open(sys.argv[2]) as engine:
            engine.embedder.count_tokens(["a harbour light"])
            print(engine.embedder.identity)
        print(*(name in sys.modules for name in ("onnxruntime", "torch", "sentence_transformers")))
    """)
    done = subprocess.run([sys.executable, "-c", script, str(kb), str(kb)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    identity, imported = done.stdout.strip().splitlines()[-2:]
    assert "+onnx-int8." in identity
    assert imported.split() == ["False", "False", "False"], done.stderr
    with KnowledgeBase.open(kb) as engine:  # and a sync embeds with it
        report = engine.sync()
        assert report.sources[0].embeddings_computed > 5
        hits = engine.search("how is the delay between retries computed", k=3, mode="vector")
        assert any("retries-backoff" in h.key for h in hits)


def test_the_onnx_backend_runs_on_cuda_when_asked_or_found_and_says_when_it_cannot() -> None:
    from kbsync.embed.providers.onnx_int8 import OnnxInt8Model, Pooling
    from kbsync.errors import EmbeddingError

    def providers(device: str, available: list[str]) -> list[object]:
        model = OnnxInt8Model(Path("."), "w", window=256, pooling=Pooling("mean", True),
                              normalize=True, device=device, cache_dir=Path("."))
        return model._providers(available)

    cpu, gpu = ["CPUExecutionProvider"], ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert providers("cpu", gpu) == cpu
    assert providers("auto", cpu) == cpu
    assert providers("auto", gpu) == [("CUDAExecutionProvider", {"device_id": "0"}), *cpu]
    assert providers("cuda:1", gpu) == [("CUDAExecutionProvider", {"device_id": "1"}), *cpu]
    with pytest.raises(EmbeddingError, match="onnxruntime-gpu"):
        providers("cuda", cpu)


def test_weights_that_cannot_be_exported_are_an_embedding_error_naming_the_folder(
        tmp_path: Path) -> None:
    from kbsync.errors import EmbeddingError

    source = Path(LocalEmbedder().token_counter.removeprefix("tokenizer:")).parent
    model = tmp_path / "model"
    shutil.copytree(source, model)
    (model / "model.safetensors").write_bytes(b"not weights")
    embedder = LocalEmbedder(str(model), backend="onnx-int8", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(EmbeddingError, match=str(model)):
        embedder.embed(["a harbour light"])
    assert not list((tmp_path / "cache").glob("*.onnx"))
    assert not list((tmp_path / "cache").glob(".export-*"))
