"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a real server
(uvicorn) whose app runs a node, on every engine. Screenshots go to $CONVEYOR_ARTIFACTS (default: a
directory under pytest's tmp dir).

These tests are plain functions (Playwright's sync API runs its own loop); the database is reached
through the blocking twins of a second app, as any other process would."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from conveyor import JobRequest
from conveyor.job import JobState
from tests.dashboard import dash_jobs
from tests.dashboard.serving import ENGINE_NAMES, dashboard_server
from tests.helpers import poll_sync

CHROMIUM = os.environ.get("CONVEYOR_CHROMIUM", "/usr/bin/chromium")
#: How long the browser waits for a live update to show a change.
SEEN_WITHIN = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless chromium for the module (so at most one per xdist worker)."""
    assert Path(CHROMIUM).exists(), f"no chromium at {CHROMIUM}: run scripts/ensure-chromium.sh"
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield found
        finally:
            found.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("CONVEYOR_ARTIFACTS")
    folder = Path(chosen) / "dashboard" if chosen else tmp_path_factory.mktemp("dashboard-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    opened.set_default_timeout(SEEN_WITHIN)
    try:
        yield opened
    finally:
        context.close()


def shoot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def wait_until(probe: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    poll_sync(probe, timeout=timeout, what=what, every=0.1)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_browse_filter_open_and_act(engine: str, page: Page, artifacts: Path, tmp_path: Path) -> None:
    with dashboard_server(engine, tmp_path) as served:
        app = served.client
        later = datetime.now(UTC) + timedelta(hours=1)
        report = app.enqueue_sync(dash_jobs.tally.new(4).with_options(scheduled_at=later))
        mail = [
            app.enqueue_sync(
                JobRequest(worker="app.mail.send", args={"to": f"u{i}@x.io"}, queue="mail", tags=["welcome"])
            )
            for i in range(3)
        ]
        app.enqueue_sync(JobRequest(worker="app.bill.charge", args={"cents": 990}, queue="billing"))
        failed = app.enqueue_sync(dash_jobs.explode.new("card declined"))
        wait_until(lambda: app.get_job_sync(failed).state is JobState.DISCARDED, "the failing job ran")

        page.goto(f"{served.url}/")
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator('tr[data-queue="default"]')).to_be_visible()
        shoot(page, artifacts, f"overview-{engine}")

        page.click("nav >> text=Jobs")
        expect(page.locator("tr[data-job]")).to_have_count(6)
        page.fill('input[name="queue"]', "mail")
        page.click('form.filters button[type="submit"]')
        expect(page.locator("tr[data-job]")).to_have_count(3)
        assert "queue=mail" in page.url
        shoot(page, artifacts, f"jobs-filtered-{engine}")

        # Cancel one job from its page and see the state change.
        page.click(f'a[href="/jobs/{mail[0]}"]')
        expect(page.locator('[data-field="state"]')).to_have_text("available")
        page.click('button[data-action="cancel"]')
        expect(page.locator(".notice")).to_have_text("Cancelled 1 job(s).")
        expect(page.locator('[data-field="state"]')).to_have_text("cancelled")

        # Retry a scheduled job: the node runs it and the open page shows it done, without a reload.
        page.goto(f"{served.url}/jobs/{report}")
        expect(page.locator('[data-field="state"]')).to_have_text("scheduled")
        page.click('button[data-action="retry"]')
        expect(page.locator('[data-field="state"]')).to_have_text("completed")
        expect(page.locator('[data-block="result"]')).to_contain_text('"counted": 4')
        expect(page.locator("progress")).to_have_attribute("value", "4.0")
        shoot(page, artifacts, f"job-completed-{engine}")

        page.goto(f"{served.url}/jobs/{failed}")
        expect(page.locator('[data-block="error"]')).to_contain_text("RuntimeError: card declined")
        shoot(page, artifacts, f"job-error-{engine}")

        # Deleting asks first (the browser's dialog), then goes back to the jobs.
        asked: list[str] = []

        def accept(dialog: Dialog) -> None:
            asked.append(dialog.message)
            dialog.accept()

        page.on("dialog", accept)
        page.goto(f"{served.url}/jobs/{mail[1]}")
        page.click('button[data-action="delete"]')
        expect(page.locator(".notice")).to_have_text("Deleted 1 job(s).")
        assert asked == [f"Delete job {mail[1]}?"]
        assert app.get_job_sync(mail[1]) is None

        # Every job a filter matches: the count first, then the action once confirmed.
        page.goto(f"{served.url}/jobs?queue=mail&state=available")
        page.click('button[data-bulk="cancel"]')
        expect(page.locator("[data-count]")).to_have_text("1")
        shoot(page, artifacts, f"confirm-bulk-{engine}")
        page.click("button[data-confirm-action]")
        expect(page.locator(".notice")).to_have_text("Cancelled 1 job(s).")
        assert app.get_job_sync(mail[2]).state is JobState.CANCELLED  # type: ignore[union-attr]

        page.goto(f"{served.url}/nodes")
        expect(page.locator("section.node")).to_have_count(1)
        shoot(page, artifacts, f"nodes-{engine}")
        page.goto(f"{served.url}/cron")
        expect(page.locator('tr[data-entry="tidy"]')).to_be_visible()
        shoot(page, artifacts, f"cron-{engine}")


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_pausing_a_queue_stops_the_node_fetching(
    engine: str, page: Page, artifacts: Path, tmp_path: Path
) -> None:
    with dashboard_server(engine, tmp_path) as served:
        app = served.client
        page.goto(f"{served.url}/")
        row = page.locator('tr[data-queue="default"]')
        expect(row).to_be_visible()
        row.locator('button[data-action="pause-default"]').click()
        expect(page.locator(".notice")).to_have_text("Pause sent for queue default.")
        expect(row.locator("td.paused")).to_have_text("paused")  # the heartbeat says so, live

        ids = [app.enqueue_sync(dash_jobs.nap.new(0)) for _ in range(3)]
        time.sleep(1.5)  # several polls of the node: none may fetch
        assert {app.get_job_sync(i).state for i in ids} == {JobState.AVAILABLE}  # type: ignore[union-attr]
        page.goto(f"{served.url}/jobs?queue=default")
        expect(page.locator('tr[data-job][data-state="available"]')).to_have_count(3)
        page.goto(f"{served.url}/")
        shoot(page, artifacts, f"overview-paused-{engine}")

        page.locator('button[data-action="resume-default"]').click()
        expect(page.locator(".notice")).to_have_text("Resume sent for queue default.")
        page.goto(f"{served.url}/jobs?queue=default")
        expect(page.locator('tr[data-job][data-state="completed"]')).to_have_count(3)  # live, no reload


def test_xss_payloads_stay_text(page: Page, artifacts: Path, tmp_path: Path) -> None:
    script, attribute, svg = dash_jobs.PAYLOADS
    with dashboard_server("sqlite", tmp_path) as served:
        app = served.client
        job_id = app.enqueue_sync(
            JobRequest(
                worker=f"app.{attribute}",
                args={"note": script, "html": svg},
                meta={"label": attribute},
                tags=[script],
                queue="mail",
            )
        )
        failed = app.enqueue_sync(dash_jobs.explode.new(attribute))
        wait_until(lambda: app.get_job_sync(failed).state is JobState.DISCARDED, "the failing job ran")
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        for path in ("/jobs", f"/jobs/{job_id}", f"/jobs/{failed}", f"/jobs?tag={script}"):
            page.goto(f"{served.url}{path}")
            page.wait_for_timeout(700)  # a live refresh swaps the region in once more
            assert page.evaluate("typeof window.__xss") == "undefined", path
            assert page.locator('img[src="x"]').count() == 0, path
            assert page.locator("svg[onload]").count() == 0, path
            assert page.locator("script").count() == 1, path  # ours, from /static
        page.goto(f"{served.url}/jobs/{job_id}")
        expect(page.locator('[data-block="args"]')).to_contain_text(script)
        shoot(page, artifacts, "xss-inert")
    assert dialogs == []
