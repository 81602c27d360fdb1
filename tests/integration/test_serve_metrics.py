"""The dashboard's plots per run, its /metrics in the Prometheus text format, and links to
documents that moved since."""

from __future__ import annotations

import shutil
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from kbsync import KnowledgeBase
from kbsync.serve import create_app
from tests.conftest import CORPUS
from tests.integration.serve_corpus import changed_knowledge_base

BASE = "http://127.0.0.1:8765"


def test_metrics_are_the_dashboards_figures_in_the_prometheus_text_format(
        tmp_path: Path) -> None:
    own = changed_knowledge_base(tmp_path)
    with KnowledgeBase.open(own.folder) as kb, \
            TestClient(create_app(kb), base_url=BASE) as client:
        response = client.get("/metrics")
        overview = client.get("/api/overview").json()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.text)
               for s in family.samples}
    assert samples[("kbsync_documents", ())] == own.documents
    assert samples[("kbsync_runs", ())] == 2
    assert samples[("kbsync_last_sync_documents", (("action", "modified"),))] == 1
    assert samples[("kbsync_last_sync_still_failing", ())] == 1  # controls.txt, as before
    assert samples[("kbsync_last_sync_problems", ())] == 0
    last = overview["embeddings_per_run"][-1]
    assert samples[("kbsync_last_sync_chunks_computed", ())] == last["computed"] > 0
    assert samples[("kbsync_last_sync_tokens_saved", ())] == last["tokens_saved"] > 0
    assert ("kbsync_last_sync_seconds", (("stage", "read"),)) in samples


def test_the_overview_plots_changes_tokens_and_stage_times_per_run(tmp_path: Path) -> None:
    own = changed_knowledge_base(tmp_path)
    with KnowledgeBase.open(own.folder) as kb, \
            TestClient(create_app(kb), base_url=BASE) as client:
        page = client.get("/").text
        series = client.get("/api/overview").json()["embeddings_per_run"]
    for title in ("Documents changed per run", "Tokens embedded and saved per run",
                  "Sync time by stage", "Embeddings computed, reused and kept per run"):
        assert f">{title}</title>" in page
    assert [p["changed"] for p in series] == [own.documents, 1]
    assert series[1]["tokens_embedded"] < series[1]["tokens_saved"]  # one paragraph added
    assert series[1]["seconds_saved"] is not None


def test_a_link_to_a_document_that_moved_since_leads_to_where_it_is(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path in sorted(CORPUS.glob("a-harbormaster-*.md"))[:3]:
        shutil.copy(path, docs / path.name)
    with KnowledgeBase.create(tmp_path, ["docs"]) as kb:
        kb.sync()
        first = sorted(p.name for p in docs.iterdir())[0]
        (docs / first).rename(docs / "renamed.md")
        kb.sync()
        (docs / "renamed.md").rename(docs / "renamed-again.md")
        assert kb.sync().total("moved") == 1
        with TestClient(create_app(kb), base_url=BASE) as client:
            moved = client.get(f"/document?key={first}", follow_redirects=False)
            assert moved.status_code == 307
            assert moved.headers["location"].endswith(
                "/document?key=renamed-again.md&source=docs")
            assert client.get(f"/document?key={first}").status_code == 200
            api = client.get(f"/api/document?key={first}")
            assert api.json()["key"] == "renamed-again.md"
            assert client.get("/document?key=never-there.md").status_code == 404
