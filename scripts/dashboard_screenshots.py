"""Make the guide's dashboard screenshots (docs/images/dashboard-*.png) from a demo database.

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/images]

A SQLite file in a temporary directory gets a few queues of jobs (mail sent, some failing, a report
workflow with progress and results), a node runs them, and headless chromium (Debian's, driven by
Playwright) photographs the pages of a dashboard served on a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from conveyor import Conveyor, Workflow, job, progress
from conveyor.cron import CronEntry
from conveyor.web.dashboard.server import server

CHROMIUM = "/usr/bin/chromium"


@job(queue="mail")
async def send_welcome(to: str) -> None:
    await asyncio.sleep(random.uniform(0.01, 0.05))
    if to.startswith("bounce"):
        raise ConnectionRefusedError(f"smtp.example.com refused {to}")


@job(queue="reports", record=True)
async def build_section(name: str, pages: int) -> dict[str, object]:
    for page in range(1, pages + 1):
        await progress(done=page, total=pages, phase="rendering")
        await asyncio.sleep(0.02)
    return {"section": name, "pages": pages}


@job(queue="reports", record=True)
async def publish(title: str) -> str:
    await progress(percent=100)
    return f"https://reports.example.com/{title}"


JOBS = [send_welcome, build_section, publish]


def seed(app: Conveyor) -> int:
    """Enqueue the demo jobs; return the id of the workflow step the job page shows."""
    for n in range(40):
        to = f"bounce{n}@example.org" if n % 9 == 4 else f"user{n}@example.com"
        app.enqueue_sync(send_welcome.new(to).with_options(tags=["welcome"], max_attempts=1 if n % 2 else 3))
    later = datetime.now(UTC) + timedelta(hours=2)
    for n in range(3):
        app.enqueue_sync(send_welcome.new(f"later{n}@example.com").with_options(scheduled_at=later))
    flow = Workflow(name="monthly-report")
    flow.add("intro", build_section.new("intro", 3))
    flow.add("sales", build_section.new("sales", 12))
    flow.add("costs", build_section.new("costs", 8))
    flow.add("publish", publish.new("2026-11"), deps=["intro", "sales", "costs"])
    ids = app.enqueue_many_sync(flow)
    return int(ids[1])


def shoot(page: Page, out: Path, name: str, height: int = 760) -> None:
    page.set_viewport_size({"width": 1200, "height": height})
    page.screenshot(path=str(out / f"dashboard-{name}.png"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="docs/images", type=Path)
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/demo.db"
        client = Conveyor(url, jobs=JOBS)
        client.install_sync()
        step = seed(client)
        crontab = [
            CronEntry.build("0 6 * * *", send_welcome, {"to": "digest@example.com"}, name="daily-digest")
        ]
        node_app = Conveyor(
            url,
            jobs=JOBS,
            queues={"mail": {"limit": 5, "global_limit": 3}, "reports": 2, "default": 10},
            crontab=crontab,
            poll_interval=0.2,
        )
        found = server(node_app, host="127.0.0.1", port=0, refresh=0)
        thread = threading.Thread(target=found.run, daemon=True)
        thread.start()
        while not found.started:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{found.servers[0].sockets[0].getsockname()[1]}"
        time.sleep(4)  # the node runs the demo jobs
        client.pause_queue_sync("default")
        time.sleep(2.5)  # a heartbeat tells the fleet
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 760})
            page.goto(f"{base}/")
            shoot(page, out, "overview", 720)
            page.goto(f"{base}/jobs?queue=mail&limit=25")
            shoot(page, out, "jobs", 560)
            page.goto(f"{base}/jobs/{step}")
            shoot(page, out, "job", 1000)
            page.goto(f"{base}/jobs?queue=mail&state=discarded")
            page.click('button[data-bulk="retry"]')
            shoot(page, out, "confirm", 300)
            browser.close()
        found.should_exit = True
        thread.join(10)
        client.close_sync()
    for image in sorted(out.glob("dashboard-*.png")):
        print(image, image.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
