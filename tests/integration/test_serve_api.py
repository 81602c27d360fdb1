"""The dashboard over HTTP: its JSON API and pages, refusals, actions, the OpenAPI description."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from kbsync import KnowledgeBase
from kbsync.cli import app as cli_app
from kbsync.serve import create_app, is_loopback
from kbsync.serve.guard import Guard
from tests.integration.serve_corpus import ADDED, KnowledgeBaseOnDisk, changed_knowledge_base

BASE = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBaseOnDisk:
    return changed_knowledge_base(tmp_path_factory.mktemp("kb"))


@pytest.fixture(scope="module")
def client(kb: KnowledgeBaseOnDisk) -> Iterator[TestClient]:
    """A read-only dashboard over the shared knowledge base."""
    with KnowledgeBase.open(kb.folder) as opened, \
            TestClient(create_app(opened), base_url=BASE) as c:
        yield c


@pytest.fixture
def acting(tmp_path: Path) -> Iterator[tuple[TestClient, KnowledgeBaseOnDisk, str]]:
    """A dashboard with actions allowed over a knowledge base of its own, and its token."""
    own = changed_knowledge_base(tmp_path)
    guard = Guard()
    with KnowledgeBase.open(own.folder) as opened, \
            TestClient(create_app(opened, allow_actions=True, guard=guard), base_url=BASE) as c:
        assert c.get(f"/?token={guard.login}").status_code == 200  # signed in, as a browser
        token = c.get("/api/actions").json()["csrf_token"]
        assert token == guard.token
        yield c, own, token


def _get(client: TestClient, url: str, status: int = 200) -> Any:
    response = client.get(url)
    assert response.status_code == status, response.text
    return response.json()


def test_the_overview_says_a_source_the_last_sync_could_not_list_keeps_its_documents(
        tmp_path: Path) -> None:
    own = changed_knowledge_base(tmp_path)
    (own.folder / "docs").rename(own.folder / "docs-moved-away")
    with KnowledgeBase.open(own.folder) as opened:
        assert opened.sync().failed
        with TestClient(create_app(opened), base_url=BASE) as c:
            (docs,) = _get(c, "/api/overview")["sources"]
            page = c.get("/").text
    assert docs == {"name": "docs", "kind": "folder", "location": "docs",
                    "documents": own.documents, "unlisted": True}
    assert "kept: the last sync could not list this source" in page


def test_the_overview_counts_what_the_store_holds_and_embeddings_per_run(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    data = _get(client, "/api/overview")
    assert data["documents"] == kb.documents
    assert data["chunks"] > 0
    assert data["runs"] == 2
    assert data["last_sync"]
    assert data["sources"] == [{"name": "docs", "kind": "folder", "location": "docs",
                                "documents": kb.documents, "unlisted": False}]
    first, second = data["embeddings_per_run"]  # oldest first, as the chart draws them
    assert first["run"] < second["run"]
    assert first["computed"] > 0
    assert second["computed"] < first["computed"]  # the edit re-embedded only a few chunks
    assert second["kept"] > second["computed"]
    assert {"source": "docs", "key": kb.changed, "action": "modified"}.items() <= next(
        c for c in data["recent_changes"] if c["key"] == kb.changed).items()


def test_reused_on_the_dashboard_is_the_reports_embeddings_reused(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    with KnowledgeBase.open(kb.folder) as opened:
        reports = {r.id: r.report for r in opened.runs()}
    runs = _get(client, "/api/runs")
    assert runs[0]["embeddings"]["kept"] > 0  # so counting kept chunks as reused would show
    for run in runs:
        sources = reports[run["id"]]["sources"]
        assert run["embeddings"]["reused"] == sum(s["embeddings_reused"] for s in sources)
    for point in _get(client, "/api/overview")["embeddings_per_run"]:
        sources = reports[point["run"]]["sources"]
        assert point["reused"] == sum(s["embeddings_reused"] for s in sources)


def test_runs_are_listed_newest_first_with_counts_and_failures(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    runs = _get(client, "/api/runs")
    assert [r["id"] for r in runs] == sorted((r["id"] for r in runs), reverse=True)
    newest, oldest = runs
    assert oldest["documents"] == {"new": kb.documents, "failed": 1}
    # The file that failed before failed the same way again: still failing, no new failure.
    assert newest["documents"] == {"modified": 1, "unchanged": kb.documents - 1}
    assert (newest["failures"], newest["still_failing"]) == (0, 1)
    assert newest["embeddings"]["computed"] < newest["embeddings"]["kept"]
    assert oldest["embeddings"] == {"computed": oldest["embeddings"]["computed"], "reused": 0,
                                    "kept": 0}
    assert [r["id"] for r in _get(client, "/api/runs?limit=1")] == [newest["id"]]
    assert "error" in _get(client, "/api/runs?limit=zero", 400)


def test_a_run_shows_its_report_its_failures_with_reasons_and_its_changes(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    newest = _get(client, "/api/runs")[0]["id"]
    run = _get(client, f"/api/runs/{newest}")
    assert run["failure_list"] == []  # it failed as it did in the run before
    assert [(f["source"], f["key"]) for f in run["still_failing_list"]] == [
        ("docs", kb.failing)]
    assert "binary" in run["still_failing_list"][0]["message"]
    assert [(c["key"], c["action"]) for c in run["changes"]] == [(kb.changed, "modified")]
    assert run["report"]["sources"][0]["source"] == "docs"
    assert _get(client, "/api/runs/9999", 404) == {"error": "no run 9999"}


def test_a_document_shows_its_last_change_highlighted_and_its_history(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    doc = _get(client, f"/api/document?key={kb.changed}&source=docs")
    assert doc["verdict"] == "reprocess"
    assert (doc["kind"], doc["reason"].split()[1:]) == ("substantive", ["words", "added"])
    assert 0.0 < doc["similarity"] < 1.0
    assert not doc["first_version"]
    marked = next(r["text"] for r in doc["added"] if ADDED in r["text"])
    assert len(marked) < len(ADDED) + 200  # about the paragraph, not a 2 KB block around it
    assert all(doc["text"][r["offset"]: r["offset"] + r["length"]] == r["text"]
               for r in doc["added"])
    assert ADDED not in doc["previous"]
    assert [(h["action"], h["verdict"] is None, h["kind"]) for h in doc["history"]] == [
        ("modified", False, "substantive"), ("new", True, None)]
    untouched = _get(client, "/api/document?key=a-harbormaster-cli.md")
    assert untouched["first_version"]
    assert untouched["verdict"] is None
    assert untouched["similarity"] is None
    assert [h["action"] for h in untouched["history"]] == ["new"]


def test_an_unknown_document_is_404_and_a_missing_key_is_400(client: TestClient) -> None:
    assert "no such document" in _get(client, "/api/document?key=nope.md", 404)["error"]
    assert "key" in _get(client, "/api/document", 400)["error"]
    assert client.get("/document?key=nope.md").status_code == 404


def test_search_returns_heading_score_and_text(client: TestClient) -> None:
    hits = _get(client, "/api/search?q=retry+backoff&k=3")
    assert len(hits) == 3
    assert {"source", "key", "title", "heading", "index", "rank", "relevance", "score", "text",
            "context"} == set(hits[0])
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert all(0 <= h["relevance"] <= 1 for h in hits)
    assert all(h["context"] for h in hits)
    assert any("retr" in h["text"].lower() for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    text_hits = _get(client, "/api/search?q=lighthouse+keepers&mode=text")
    assert text_hits[0]["key"] == "a-harbormaster-configuration.md"
    assert "mode" in _get(client, "/api/search?q=x&mode=fuzzy", 400)["error"]
    assert "q" in _get(client, "/api/search", 400)["error"]


def test_search_where_parameters_filter_and_a_malformed_one_is_400(client: TestClient) -> None:
    everything = _get(client, "/api/search?q=retry+backoff&k=20")
    one = everything[-1]["key"]
    hits = _get(client, f"/api/search?q=retry+backoff&k=5&where=path={one}&where=path=none.md")
    assert hits
    assert {h["key"] for h in hits} == {one}
    assert _get(client, "/api/search?q=retry&where=lang=xx") == []
    assert "'lang'" in _get(client, "/api/search?q=retry&where=lang", 400)["error"]
    page = client.get(f"/search?q=retry+backoff&where=path={one}&where=")
    assert page.status_code == 200
    assert f'name="where" value="path={one}"' in page.text
    assert "relevance" in page.text


def test_search_where_parameters_take_inequalities_and_ranges(client: TestClient) -> None:
    everything = _get(client, "/api/search?q=retry+backoff&k=20&mode=text")
    one = everything[0]["key"]
    others = _get(client, f"/api/search?q=retry+backoff&k=20&mode=text&where=path!={one}")
    assert others
    assert one not in {h["key"] for h in others}
    assert {h["key"] for h in others} == {h["key"] for h in everything} - {one}
    assert _get(client, "/api/search?q=retry&where=version%3E1") == []  # no such number
    error = _get(client, "/api/search?q=retry&where=date%3E%3Dsoon", 400)["error"]
    assert "'date>=soon'" in error
    assert "number or a date" in error


def test_the_openapi_description_is_valid_and_covers_every_api_route(
        client: TestClient) -> None:
    spec = _get(client, "/api/openapi.json")
    validate(spec)  # raises on an invalid OpenAPI document
    assert spec["openapi"].startswith("3.")
    app = client.app
    routes = {re.sub(r"\{(\w+):int\}", r"{\1}", r.path): set(r.methods or ()) - {"HEAD"}
              for r in app.routes if isinstance(r, Route)  # type: ignore[attr-defined]
              and r.path.startswith("/api/")}
    assert set(spec["paths"]) == set(routes)
    for path, methods in routes.items():
        assert {m.lower() for m in methods} == set(spec["paths"][path]), path


def test_the_pages_render_the_same_data(client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    overview = client.get("/")
    assert overview.status_code == 200
    assert "<svg" in overview.text
    assert "Sync now" not in overview.text  # read-only: no action forms
    assert client.get("/runs").status_code == 200
    newest = _get(client, "/api/runs")[0]["id"]
    run = client.get(f"/runs/{newest}")
    assert "binary" in run.text
    page = client.get(f"/document?key={kb.changed}")
    marks = re.findall(r"<mark>(.*?)</mark>", page.text, re.S)
    assert any(ADDED in m for m in marks)
    search = client.get("/search?q=lighthouse+keepers")
    assert 'class="hit"' in search.text
    assert "<script>alert" not in client.get("/search?q=%3Cscript%3Ealert(1)%3C/script%3E").text


def test_a_read_only_dashboard_refuses_every_action(
        client: TestClient, kb: KnowledgeBaseOnDisk) -> None:
    assert _get(client, "/api/actions") == {"enabled": False, "csrf_token": None}
    runs = _get(client, "/api/overview")["runs"]
    for response in (client.post("/api/sync"),
                     client.post("/api/erase", json={"key": kb.changed}),
                     client.post("/actions/sync", data={"csrf_token": "anything"}),
                     client.post("/actions/erase", data={"key": kb.changed})):
        assert response.status_code == 403
        assert "--allow-actions" in response.text
    assert _get(client, "/api/overview")["runs"] == runs
    assert _get(client, f"/api/document?key={kb.changed}")["key"] == kb.changed


def test_actions_refuse_cross_site_requests_and_requests_without_the_token(
        acting: tuple[TestClient, KnowledgeBaseOnDisk, str]) -> None:
    client, _, token = acting
    refused = [
        client.post("/api/sync"),
        client.post("/api/sync", headers={"X-CSRF-Token": "wrong"}),
        client.post("/api/sync", headers={"X-CSRF-Token": token,
                                          "Origin": "https://evil.example"}),
        client.post("/api/sync", headers={"X-CSRF-Token": token, "Origin": "null"}),
        client.post("/api/sync", headers={"X-CSRF-Token": token,
                                          "Sec-Fetch-Site": "cross-site"}),
        client.post("/actions/sync", data={"csrf_token": "wrong"}),
        client.post("/actions/sync", data={"csrf_token": token},
                    headers={"Origin": "http://localhost.evil.example:8765"}),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert all("refused" in r.text for r in refused)
    assert _get(client, "/api/overview")["runs"] == 2  # nothing ran


def test_sync_now_runs_with_a_same_origin_request_and_the_token(
        acting: tuple[TestClient, KnowledgeBaseOnDisk, str]) -> None:
    client, own, token = acting
    page = client.post("/actions/sync", data={"csrf_token": token},
                       headers={"Origin": BASE, "Sec-Fetch-Site": "same-origin"},
                       follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/runs/3"
    (own.folder / "docs" / "a-harbormaster-cli.md").unlink()
    response = client.post("/api/sync", headers={"X-CSRF-Token": token})
    assert response.status_code == 200
    data = response.json()
    assert data["run"] == 4
    assert data["report"]["documents"]["deleted"] == 1
    assert _get(client, "/api/overview")["runs"] == 4


def test_erase_removes_a_document_by_its_exact_key(
        acting: tuple[TestClient, KnowledgeBaseOnDisk, str]) -> None:
    client, own, token = acting
    # A glob in the request is a key, not a pattern: it matches no document.
    response = client.post("/api/erase", json={"key": "a-harbormaster-*"},
                           headers={"X-CSRF-Token": token})
    assert response.json() == {"erased": []}
    response = client.post("/api/erase", json={"key": own.changed},
                           headers={"X-CSRF-Token": token})
    assert response.json() == {"erased": [{"source": "docs", "key": own.changed}]}
    assert client.get(f"/api/document?key={own.changed}").status_code == 404
    page = client.post("/actions/erase", data={"csrf_token": token,
                                               "key": "a-harbormaster-cli.md"},
                       follow_redirects=False)
    assert page.status_code == 303
    assert _get(client, "/api/overview")["documents"] == own.documents - 2
    assert client.post("/api/erase", json=["x"],
                       headers={"X-CSRF-Token": token}).status_code == 400


def test_requests_naming_another_host_are_refused(client: TestClient) -> None:
    # A name that resolves to 127.0.0.1 (DNS rebinding) must not read the knowledge base.
    response = client.get("/api/overview", headers={"Host": "rebound.evil.example:8765"})
    assert response.status_code == 403
    assert client.get("/api/overview", headers={"Host": "localhost:8765"}).status_code == 200


def test_binding_to_all_interfaces_accepts_any_host_name_but_still_needs_the_token() -> None:
    guard = Guard(bound="0.0.0.0", token="t", login="l")
    assert guard.host_allowed({"host": "kb.lan:8765"})
    assert guard.refusal({"host": "kb.lan:8765"}, "t", "l") is None
    assert guard.refusal({"host": "kb.lan:8765"}, None, "l") == "missing or wrong CSRF token"
    assert (guard.refusal({"host": "kb.lan:8765"}, "t", None) or "").startswith("not signed in")
    assert repr(guard) == "Guard(bound='0.0.0.0')"  # the secrets stay out of logs
    assert not Guard(bound="127.0.0.1").host_allowed({"host": "kb.lan:8765"})
    assert [is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.1.2.3",
                                     "0.0.0.0", "192.168.1.4", "kb.lan")] == [
        True, True, True, True, False, False, False]


def test_kbsync_serve_warns_when_listening_beyond_this_machine(
        kb: KnowledgeBaseOnDisk, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("kbsync.serve.serve",
                        lambda kb, **kwargs: calls.append(kwargs))
    runner = CliRunner()
    result = runner.invoke(cli_app, ["serve", "-c", str(kb.folder), "--host", "0.0.0.0",
                                     "--port", "9000"])
    assert result.exit_code == 0, result.output
    assert "warning: 0.0.0.0 is reachable from other machines" in result.stderr
    assert "serving http://0.0.0.0:9000/ (read-only)" in result.stderr
    result = runner.invoke(cli_app, ["serve", "-c", str(kb.folder), "--allow-actions"])
    assert "warning" not in result.stderr
    guards = [call.pop("guard") for call in calls]
    assert calls == [{"host": "0.0.0.0", "port": 9000, "allow_actions": False},
                     {"host": "127.0.0.1", "port": 8765, "allow_actions": True}]
    # The address that signs a browser in is printed, to the terminal only.
    assert f"serving http://127.0.0.1:8765/?token={guards[1].login} " in result.stderr


def _signed_in_client(kb: KnowledgeBaseOnDisk) -> Iterator[tuple[TestClient, TestClient, Guard]]:
    """A browser that opened the printed address and a local process that did not, over
    one dashboard with actions allowed."""
    guard = Guard()
    with KnowledgeBase.open(kb.folder) as opened:
        app = create_app(opened, allow_actions=True, guard=guard)
        with TestClient(app, base_url=BASE) as browser, TestClient(app, base_url=BASE) as other:
            yield browser, other, guard


@pytest.fixture
def two_clients(tmp_path: Path) -> Iterator[tuple[TestClient, TestClient, Guard]]:
    yield from _signed_in_client(changed_knowledge_base(tmp_path))


def test_the_write_token_goes_only_to_the_browser_that_opened_the_printed_address(
        two_clients: tuple[TestClient, TestClient, Guard]) -> None:
    browser, other, guard = two_clients
    # Any local process can ask: it learns that actions exist, not the token they need.
    assert _get(other, "/api/actions") == {"enabled": True, "csrf_token": None}
    assert guard.token not in other.get("/").text
    assert "Sync now" not in other.get("/").text
    assert 'id="sign-in"' in other.get("/").text
    wrong = other.get("/?token=guessed")
    assert wrong.status_code == 403
    assert "not this server's" in wrong.text
    assert other.get(f"/api/actions?token={guard.login}").status_code == 400
    signed = browser.get(f"/search?q=harbour&token={guard.login}", follow_redirects=False)
    assert signed.status_code == 303
    assert signed.headers["location"] == "/search?q=harbour"  # the secret leaves the address
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith(f"kbsync-dashboard-8765={guard.login};")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert _get(browser, "/api/actions") == {"enabled": True, "csrf_token": guard.token}
    assert "Sync now" in browser.get("/").text
    assert _get(other, "/api/actions")["csrf_token"] is None


def test_an_action_with_the_write_token_but_without_the_cookie_is_refused(
        two_clients: tuple[TestClient, TestClient, Guard]) -> None:
    _, other, guard = two_clients
    runs = _get(other, "/api/overview")["runs"]
    for response in (other.post("/api/sync", headers={"X-CSRF-Token": guard.token}),
                     other.post("/actions/sync", data={"csrf_token": guard.token}),
                     # The secret signs in a page opened in a browser, not a form's POST.
                     other.post(f"/actions/sync?token={guard.login}",
                                data={"csrf_token": guard.token})):
        assert response.status_code == 403
        assert "not signed in" in response.text
    assert _get(other, "/api/overview")["runs"] == runs


def test_every_response_carries_the_content_security_policy_and_nosniff(
        two_clients: tuple[TestClient, TestClient, Guard]) -> None:
    browser, other, guard = two_clients
    responses = [
        other.get("/"), other.get("/runs"), other.get("/search?q=tides"),
        other.get("/api/overview"), other.get("/api/openapi.json"),
        other.get("/static/dashboard.css"), other.get("/static/dashboard.js"),
        other.get("/document?key=nothing"), other.get("/no/such/page"),
        other.get("/", headers={"Host": "rebound.evil.example:8765"}),
        other.get("/?token=wrong"),
        browser.get(f"/?token={guard.login}", follow_redirects=False),
        other.post("/api/sync"),
    ]
    assert [r.status_code for r in responses] == [
        200, 200, 200, 200, 200, 200, 200, 404, 404, 403, 403, 303, 403]
    for response in responses:
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "default-src 'none'" in policy
        assert "unsafe-inline" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_pages_hold_no_inline_script_or_style_the_policy_would_block(
        two_clients: tuple[TestClient, TestClient, Guard]) -> None:
    browser, _, guard = two_clients
    browser.get(f"/?token={guard.login}")
    key = _get(browser, "/api/overview")["recent_changes"][0]["key"]
    for page in ("/", "/runs", "/runs/1", f"/document?key={key}", "/search?q=harbour"):
        text = browser.get(page).text
        assert "<style" not in text
        assert " style=" not in text
        assert re.search(r"<script(?![^>]*\ssrc=)", text) is None, page
        assert re.search(r"\son[a-z]+=", text) is None, page
