"""The run page in a real browser (headless Chromium driven by Playwright), live from the
server and as report.html, on a real smoke run's directory."""

from __future__ import annotations

import contextlib

import pytest

from browser_env import INSTALL_HINT

try:
    from playwright.sync_api import expect
except ImportError:
    pytest.skip(f"Playwright is not installed: {INSTALL_HINT}", allow_module_level=True)

from foundry.store import EvaluationLog, read_evaluations
from foundry.view.model import RunReader
from foundry.view.report_html import write_report_html
from foundry.view.server import ViewServer
from view_run import ERROR_PAYLOAD, HOSTILE_TASK, SCRIPT_PAYLOAD

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 30_000


@contextlib.contextmanager
def live_server(run_dir, poll_s=3600.0):
    srv = ViewServer(RunReader(run_dir), host="127.0.0.1", port=0, poll_s=poll_s)
    srv.start_in_thread()
    try:
        yield srv.url
    finally:
        srv.shutdown()
        srv.server_close()


class Watched:
    """A page with every console error, uncaught exception, dialog and request noted."""

    def __init__(self, browser, url):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.problems, self.dialogs, self.requests = [], [], []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=WAIT_MS)

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open_kernel(self, selector):
        self.page.click(selector)
        self.page.wait_for_selector("#kernel[data-loaded]", timeout=WAIT_MS)
        return self.page.inner_text("#kernel-id")


@pytest.fixture(params=["live", "static"])
def page_of_run(request, browser, view_run_dir, tmp_path):
    run_dir, hostile = view_run_dir
    if request.param == "live":
        with live_server(run_dir) as url:
            watched = Watched(browser, url)
            yield watched, run_dir, hostile
            watched.page.close()
    else:
        path = write_report_html(run_dir, tmp_path / "report.html")
        watched = Watched(browser, path.as_uri())
        yield watched, run_dir, hostile
        watched.page.close()


def test_the_page_loads_cleanly_and_shows_every_task(page_of_run):
    w, run_dir, _ = page_of_run
    records = read_evaluations(run_dir)
    tasks = {r.candidate.task_id for r in records}
    shown = w.page.eval_on_selector_all("section.task", "s => s.map(x => x.dataset.taskId)")
    assert set(shown) == tasks and len(tasks) == 5
    assert w.page.get_attribute("body", "data-total") == str(len(records))
    summary = w.page.inner_text("#summary")
    assert all(t in summary for t in tasks)
    assert w.page.locator("svg.chart").count() == 2 * len(tasks)
    assert w.problems == [] and w.dialogs == []
    assert all(u.startswith(("file://", "http://127.0.0.1")) for u in w.requests), w.requests


def test_an_archive_cell_opens_that_kernels_source_and_verdict(page_of_run):
    w, run_dir, _ = page_of_run
    by_eval = {r.eval_id: r for r in read_evaluations(run_dir)}
    cells = w.page.eval_on_selector_all("button.cell", "b => b.map(x => x.dataset.evalId)")
    assert cells
    for eval_id in cells[:3]:
        record = by_eval[eval_id]
        shown = w.open_kernel(f"button.cell[data-eval-id='{eval_id}']")
        assert shown == record.candidate.candidate_id
        verdict = w.page.inner_text("#kernel-verdict")
        assert ("not correct" not in verdict) == record.result.correct
        source = w.page.text_content("#kernel-source")
        assert source == record.candidate.source.replace("\r\n", "\n")
        if "import" in source:  # keywords highlighted (a stage-0 candidate may have no code)
            assert w.page.locator("#kernel-source span.k").count() > 0
    assert any(by_eval[e].candidate.source for e in cells[:3])
    assert w.problems == []


def test_the_lineage_links_open_each_ancestor(page_of_run):
    w, run_dir, hostile = page_of_run
    task = w.page.locator(f"section[data-task-id='{HOSTILE_TASK}']")
    links = task.locator("button.lineage-link")
    ids = [links.nth(i).inner_text() for i in range(links.count())]
    assert len(ids) >= 2 and ids[1] == hostile["parent"]
    for i, candidate_id in enumerate(ids):
        links.nth(i).click()
        expect(w.page.locator("#kernel-id")).to_have_text(candidate_id, timeout=WAIT_MS)
    # the child's panel links to its parent's
    links.nth(0).click()
    expect(w.page.locator("#kernel-id")).to_have_text(ids[0], timeout=WAIT_MS)
    w.page.click("#kernel button.parent-link")
    expect(w.page.locator("#kernel-id")).to_have_text(ids[1], timeout=WAIT_MS)
    assert w.problems == []


def test_a_script_in_a_candidate_shows_as_text_and_runs_nothing(page_of_run):
    w, _, hostile = page_of_run
    scripts = w.page.evaluate("document.scripts.length")
    w.open_kernel(f"button.lineage-link[data-eval-id='{hostile['script']}']")
    assert SCRIPT_PAYLOAD in w.page.text_content("#kernel-source")
    w.page.click("button[data-tab='diff']")
    assert SCRIPT_PAYLOAD in w.page.text_content("#kernel-diff")
    w.page.click("button[data-tab='source']")
    w.page.evaluate(f"window.kfView.openKernel('{hostile['error']}')")
    w.page.wait_for_selector(f"#kernel[data-loaded='{hostile['error']}']", timeout=WAIT_MS)
    assert ERROR_PAYLOAD in w.page.text_content("#kernel-error")
    assert w.page.locator("#kernel img").count() == 0
    assert w.page.evaluate("document.scripts.length") == scripts
    w.page.wait_for_timeout(300)
    assert w.dialogs == [] and w.problems == []
    w.page.evaluate("setTimeout(() => alert('control'), 0)")  # the listener does see a dialog
    w.page.wait_for_timeout(300)
    assert w.dialogs == ["control"]


def test_a_refresh_fetches_only_the_new_evaluations(browser, run_copy):
    run_dir, _ = run_copy
    before = read_evaluations(run_dir)
    with live_server(run_dir) as url:
        w = Watched(browser, url)
        responses = []
        w.page.on("response", lambda r: "/api/update" in r.url and responses.append(r))
        log = EvaluationLog(run_dir)  # three more evaluations, as a resumed run would record them
        for record in before[:3]:
            log.append(record.candidate, record.result, evaluator="evaluator-0")
        log.close()
        total = str(len(before) + 3)
        for _ in range(200):  # the server reads the changed run in the background meanwhile
            w.page.evaluate("window.kfView.poll()")
            if w.page.get_attribute("body", "data-total") == total:
                break
            w.page.wait_for_timeout(100)
        assert w.page.get_attribute("body", "data-total") == total
        assert {r.url.split("?", 1)[1] for r in responses} == {f"since={len(before)}"}
        updates = [r.json() for r in responses]
        assert [len(u["rows"]) for u in updates if u["rows"]] == [3]
        assert not any(u["reset"] for u in updates)
        assert w.page.locator("section.task").count() == 5
        assert str(len(before) + 2) in w.page.inner_text("#recent")  # the newest evaluation's number
        assert w.problems == []
        w.page.close()
