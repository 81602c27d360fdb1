"""Every example under examples/ runs, against a copy of the sample corpus, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# What each example must print, so that an example that runs but does nothing fails.
EXPECTED = {
    "api_quickstart.py": ["synced: 28 new documents", "re-synced: 1 modified", "verify: ok"],
    "langchain_retriever.py": ["a-harbormaster-cli.md: 17 chunks", "a-harbormaster-"],
    "llamaindex_retriever.py": ["a-harbormaster-cli.md: 17 nodes", "a-harbormaster-"],
}


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_runs_on_a_copy_of_the_sample_corpus(example: Path, tmp_path: Path) -> None:
    docs = tmp_path / "corpus"
    shutil.copytree(CORPUS, docs)
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(example), str(docs)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[example.name]:
        assert line in done.stdout, (line, done.stdout)
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before  # examples only read


def test_the_readme_api_example_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The Python API"):]
    start = section.index("```python\n") + len("```python\n")
    code = section[start : section.index("\n```", start)]
    docs = tmp_path / "kb" / "docs"
    shutil.copytree(CORPUS, docs)
    (docs / "guide").mkdir()
    (docs / "guide" / "secrets.md").write_text(
        "# Secrets\n\nRotate secrets every ninety days; keep them in the vault.\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for _ in range(2):  # a second run opens the knowledge base the first one made
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "guide/secrets.md > Secrets" in done.stdout
        assert done.stdout.splitlines()[-2:] == ["True",
                                                 f"{len(list(CORPUS.iterdir())) + 1} True"]
