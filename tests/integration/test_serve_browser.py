"""The dashboard's pages in headless Chromium, against `kbsync serve` started on 127.0.0.1.

Needs Debian's chromium (``KBSYNC_CHROMIUM`` names another binary) and the Playwright
package, never Playwright's own browser downloads. Without them the tests skip,
except under CI (the ``CI`` variable set), where they fail. Screenshots of each page
go to ``test-artifacts/`` (or ``KBSYNC_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import ROOT
from tests.integration.serve_corpus import ADDED, KnowledgeBaseOnDisk, changed_knowledge_base

CHROMIUM = Path(os.environ.get("KBSYNC_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("KBSYNC_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
_STARTUP_LIMIT_S = 60.0


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'kbsync[dev]')")
    if not CHROMIUM.is_file():
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium, or set "
                     "KBSYNC_CHROMIUM)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                              args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served(NamedTuple):
    base: str
    kb: KnowledgeBaseOnDisk
    sign_in: str
    """The address `kbsync serve` printed: opening it lets that browser sync and erase."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`kbsync serve --allow-actions` in a child process over a knowledge base with history."""
    kb = changed_knowledge_base(tmp_path_factory.mktemp("kb"))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (kb.folder / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "kbsync", "serve", "-c", str(kb.folder), "--port", str(port),
         "--allow-actions"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + _STARTUP_LIMIT_S
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/actions", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    pytest.fail("kbsync serve did not start:\n"
                                + (kb.folder / "serve.log").read_text(errors="replace"))
                time.sleep(0.1)
        printed = re.search(r"serving (http://\S+\?token=\S+)",
                            (kb.folder / "serve.log").read_text(errors="replace"))
        assert printed is not None, "kbsync serve printed no address to sign in with"
        yield Served(base, kb, printed.group(1))
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    yield tab
    context.close()


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_overview_shows_counts_sources_the_chart_and_the_latest_changes(
        page: Any, server: Served) -> None:
    base, kb, _ = server
    page.goto(base + "/")
    assert page.inner_text("#count-documents") == str(kb.documents)
    assert int(page.inner_text("#count-chunks")) > 0
    assert page.locator("svg.chart rect").count() >= 4  # two runs, two bars each
    assert "docs" in page.inner_text("table")
    assert page.get_by_role("link", name=kb.changed).count() >= 1
    _shot(page, "overview")


def test_the_overview_plots_each_run_in_the_browser(page: Any, server: Served) -> None:
    base, _, _ = server
    page.goto(base + "/")
    charts = page.locator("svg.chart")
    assert charts.count() == 4
    for title in ("Documents changed per run", "Tokens embedded and saved per run",
                  "Sync time by stage"):
        chart = page.locator("svg.chart", has=page.locator(f"title:text-is('{title}')"))
        box = chart.bounding_box()
        assert box is not None
        assert box["width"] > 300
        assert box["height"] > 80
        # Drawn bars: every run has one with a height.
        heights = [float(h) for h in chart.locator("rect[height]").evaluate_all(
            "rects => rects.map(r => r.getAttribute('height'))")]
        assert sum(1 for h in heights if h > 0) >= 2
    _shot(page, "overview-plots")


def test_the_changed_document_highlights_the_added_paragraph(
        page: Any, server: Served) -> None:
    base, kb, _ = server
    page.goto(base + "/")
    page.get_by_role("link", name=kb.changed).first.click()
    page.wait_for_url(re.compile(r"/document\?"))
    marked = " ".join(page.locator("#current mark").all_inner_texts())
    assert ADDED in marked
    assert page.inner_text("#verdict") in ("cosmetic", "reprocess")
    assert 0.0 < float(page.inner_text("#similarity")) < 1.0
    assert ADDED not in page.inner_text("#previous")
    assert page.locator("#history tr").count() == 3  # a header, modified, new
    _shot(page, "document")


def test_a_search_shows_results_with_heading_relevance_and_text(
        page: Any, server: Served) -> None:
    base, _, _ = server
    page.goto(base + "/search")
    page.fill("input[name=q]", "lighthouse keepers logbooks")
    page.press("input[name=q]", "Enter")
    page.wait_for_selector("#results .hit")
    first = page.locator("#results .hit").first
    assert "lighthouse keepers" in first.locator("p.chunk").inner_text()
    assert first.locator(".heading").inner_text().strip()
    assert re.fullmatch(r"[01]\.\d{2}", first.locator(".relevance").inner_text())
    assert re.fullmatch(r"raw score -?\d+\.\d{4}",
                        first.locator(".relevance").get_attribute("title") or "")
    _shot(page, "search")


def test_the_runs_and_a_run_page_show_failures_with_their_reasons(
        page: Any, server: Served) -> None:
    base, kb, _ = server
    page.goto(base + "/runs")
    assert page.locator("table tr").count() >= 3
    _shot(page, "runs")
    page.locator("table a").first.click()
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    # The newest run met the file that failed before as it was: still failing, not new.
    failures = page.inner_text("#still-failing")
    assert kb.failing in failures
    assert "binary" in failures
    _shot(page, "run")


def test_sync_now_in_the_browser_records_a_run_with_the_new_change(
        page: Any, server: Served) -> None:
    base, kb, _ = server
    edited = kb.folder / "docs" / "a-harbormaster-cli.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n\nA closing note on tides.\n",
                      encoding="utf-8")
    page.goto(server.sign_in)  # signs this browser in, then shows the overview
    assert page.url == base + "/"
    page.click("#sync-now")
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    assert page.get_by_role("link", name="a-harbormaster-cli.md").count() == 1
    _shot(page, "after-sync-now")


def test_a_browser_that_did_not_open_the_printed_address_is_offered_no_action(
        page: Any, server: Served) -> None:
    blocked: list[str] = []
    page.on("console", lambda message: blocked.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.goto(server.base + "/")
    assert page.locator("#sync-now").count() == 0
    assert "opened the address" in page.inner_text("#sign-in")
    # The stylesheet is the dashboard's own file, which the Content Security Policy allows.
    assert page.eval_on_selector(".brand", "e => getComputedStyle(e).fontWeight") == "700"
    for path in ("/runs", "/search?q=harbour", "/runs/1"):
        page.goto(server.base + path)
    assert blocked == []  # nothing on the pages is refused by the policy


def test_erase_asks_first_through_the_dashboards_script_and_a_no_erases_nothing(
        page: Any, server: Served) -> None:
    base, kb, sign_in = server
    page.goto(sign_in)
    page.goto(base + "/document?" + urllib.parse.urlencode({"key": kb.changed}))
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("button.danger")
    assert asked == ["Erase this document and everything derived from it?"]
    page.goto(base + "/document?" + urllib.parse.urlencode({"key": kb.changed}))
    assert page.locator("button.danger").count() == 1  # still there: nothing was erased
