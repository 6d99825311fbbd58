"""The dashboard's details a new user tripped over, on every engine: the limit that binds a queue,
every state's column, the progress label, the recorded result instead of its raw encoding, times
that name their zone, workflow steps in dependency order, and tracebacks of failed jobs (process
jobs too) that start at the job's own code."""

from __future__ import annotations

import base64
import pickle
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor import Conveyor, JobRequest, Workflow
from conveyor.cron import AnnouncedEntry, CronEntry
from conveyor.engine.base import Engine
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from conveyor.job import Job, JobState
from conveyor.testing import drain_queue
from conveyor.web.dashboard import dashboard_app
from tests.conformance.conftest import started_node
from tests.dashboard import dash_jobs
from tests.dashboard.client import browser_like
from tests.helpers import poll

TIME = re.compile(r'<time datetime="([^"]+)"(?: title="([^"]+)")?>([^<]*)</time>')


def queue_row(page: str, queue: str) -> str:
    return page[page.index(f'<tr data-queue="{queue}">') :].split("</tr>")[0]


@pytest.fixture
def conveyor(any_engine: Engine) -> Conveyor:
    return Conveyor(engine=any_engine, testing="manual", jobs=[dash_jobs.tally, dash_jobs.explode])


async def test_queue_table_names_the_limit_that_binds_and_counts_every_state(
    engine_name: str, tmp_path: Path
) -> None:
    queues = {"capped": {"limit": 3, "global_limit": 2}, "default": 4}
    async with started_node(engine_name, tmp_path, queues=queues, heartbeat_interval=0.1) as app:

        async def announced() -> bool:
            found = {q.queue: q for q in await app.queues()}
            return "capped" in found and found["capped"].global_limit is not None and "default" in found

        await poll(announced, lambda ok: ok, timeout=10, what="both queues' heartbeats", every=0.05)
        later = datetime.now(UTC) + timedelta(hours=1)
        workflow = Workflow(name="held")
        workflow.add("first", JobRequest(worker="app.first", args={}, queue="held", scheduled_at=later))
        workflow.add("second", JobRequest(worker="app.second", args={}, queue="held"), deps=["first"])
        await app.enqueue_many(workflow)
        dropped = await app.enqueue(JobRequest(worker="app.third", args={}, queue="held"))
        assert await app.cancel_jobs(ids=[dropped]) == [dropped]
        async with browser_like(dashboard_app(app)) as client:
            page = (await client.get("/")).text

    for state in ("suspended", "cancelled"):
        assert f'<th class="count">{state}</th>' in page
    capped, default, held = (queue_row(page, q) for q in ("capped", "default", "held"))
    # The global limit of 2 binds, not the local 3.
    assert 'data-limit-kind="global"' in capped and "0 / 2" in capped and ">global</small>" in capped
    assert "local limits add up to 3; global limit 2 across the fleet" in capped
    assert 'data-limit-kind="local"' in default and "0 / 4" in default and ">local</small>" in default
    assert '<td data-count="suspended">1</td>' in held and '<td data-count="cancelled">1</td>' in held
    assert '<td data-count="scheduled">1</td>' in held
    assert '<td class="paused" data-paused="0">—</td>' in held  # no node runs it: not "paused"
    assert 'data-limit-kind="">—</td>' in held


async def test_job_page_labels_progress_decodes_results_and_names_the_zone(conveyor: Conveyor) -> None:
    workflow = Workflow(name="report")
    workflow.add("zeta", dash_jobs.tally.new(3))
    workflow.add("beta", dash_jobs.tally.new(1))
    workflow.add("alpha", dash_jobs.tally.new(2), deps=["zeta"])
    workflow.add("mid", dash_jobs.tally.new(4), deps=["alpha", "beta"])
    ids = await conveyor.enqueue_many(workflow)
    failing = await conveyor.enqueue(dash_jobs.explode.new("no"))
    await drain_queue(app=conveyor, with_safety=True)
    done = await conveyor.get_job(ids[0])
    assert done is not None and done.state is JobState.COMPLETED
    async with browser_like(dashboard_app(conveyor)) as client:
        page = (await client.get(f"/jobs/{ids[0]}")).text
        failed = (await client.get(f"/jobs/{failing}")).text

    # The bar says how far: done of total.
    assert '<progress max="6.0" value="3.0"' in page and "data-progress-label>3 / 6</span>" in page
    # Meta tells of the recorded result, decoded above it, instead of showing its base64.
    raw = done.meta["return"]
    meta = page[page.index('data-block="meta"') :].split("</pre>")[0]
    assert raw not in page
    assert f"recorded result, {len(base64.b64decode(raw + '=' * (-len(raw) % 4)))} bytes" in meta
    assert "decoded under Recorded result" in meta and "&#34;counted&#34;: 3" in page
    # Every time is a <time> in UTC, named so in the text.
    found = TIME.findall(page)
    assert len(found) >= 3
    for machine, _, shown in found:
        assert machine.endswith("Z") and shown.endswith(" UTC")
        assert datetime.fromisoformat(machine).tzinfo is not None
    inserted = datetime.fromisoformat(found[0][0])
    assert inserted == done.inserted_at and found[0][2] == inserted.strftime("%Y-%m-%d %H:%M:%S UTC")
    head = failed[failed.index('class="error-head"') :].split("</div>")[0]
    assert TIME.search(head) is not None and " UTC</time>" in head  # an error's own time too
    # Steps in the order they run (ties by when they were added), not by name.
    assert re.findall(r'<tr data-step="([^"]+)"', page) == ["zeta", "beta", "alpha", "mid"]


def _pickled() -> str:
    return base64.b64encode(pickle.dumps({"a": 1})).decode()


@pytest.mark.parametrize("stored", ["!!not base64!!", _pickled()])
async def test_a_result_that_cannot_be_decoded_is_sized_not_shown(conveyor: Conveyor, stored: str) -> None:
    job_id = await conveyor.enqueue(
        JobRequest(worker="app.x", args={}, meta={"recorded": True, "return": stored})
    )
    plain = await conveyor.enqueue(JobRequest(worker="app.x", args={}, meta={"return": "home"}))
    async with browser_like(dashboard_app(conveyor)) as client:
        page = (await client.get(f"/jobs/{job_id}")).text
        other = (await client.get(f"/jobs/{plain}")).text
    assert stored not in page
    meta = page[page.index('data-block="meta"') :].split("</pre>")[0]
    assert re.search(r"recorded result, \d+ bytes: not shown, it cannot be decoded", meta)
    assert "Recorded result" in page and 'class="problems"' in page  # and why, above
    # Meta that merely has a "return" key (no "recorded": true) is the enqueuer's, shown as it is.
    assert "&#34;return&#34;: &#34;home&#34;" in other and "recorded result," not in other


async def _failed(app: Conveyor, job_id: int) -> Job:
    async def found() -> Job | None:
        return await app.get_job(job_id)

    job = await poll(
        found,
        lambda j: j is not None and j.state is JobState.DISCARDED,
        timeout=30,
        what=f"job {job_id} to fail",
        every=0.05,
    )
    assert job is not None
    return job


async def test_tracebacks_start_at_the_jobs_own_code(node_app: Conveyor) -> None:
    ids = {
        "process": await node_app.enqueue(dash_jobs.explode_in_process.new("in a process")),
        "async process": await node_app.enqueue(dash_jobs.explode_async_in_process.new("async, far")),
        "thread": await node_app.enqueue(dash_jobs.explode_in_thread.new("in a thread")),
        "loop": await node_app.enqueue(dash_jobs.explode.new("on the loop")),
        "exit": await node_app.enqueue(dash_jobs.exit_in_process.new("leaving")),
    }
    source = dash_jobs.__file__
    for kind, job_id in ids.items():
        job = await _failed(node_app, job_id)
        text = job.errors[-1]["error"]
        first_frame = text.splitlines()[:2]
        assert first_frame[0] == "Traceback (most recent call last):", (kind, text)
        assert first_frame[1].startswith(f'  File "{source}", line '), (kind, text)
        assert "conveyor/_runtime" not in text and "asyncio" not in text, (kind, text)
        last = text.rstrip().splitlines()[-1]
        assert last.endswith(("in a process", "async, far", "in a thread", "on the loop")) or (
            last == "SystemExit: leaving" and "BaseExceptionRaised" not in text  # shown as raised
        ), (kind, text)
    async with browser_like(dashboard_app(node_app)) as client:
        page = (await client.get(f"/jobs/{ids['process']}")).text
    shown = page[page.index('data-block="error"') :].split("</pre>")[0]
    assert "dash_jobs.py" in shown and "process_worker.py" not in shown


async def test_cron_page_lists_what_the_nodes_announce_without_importing_jobs(
    engine_name: str, tmp_path: Path
) -> None:
    crontab = [
        CronEntry.build("*/10 * * * *", dash_jobs.nap, {"seconds": 0}, name="tidy", queue="default"),
        CronEntry.build("30 2 * * *", "app.reports.nightly", timezone="Europe/Paris", name="nightly"),
    ]
    options = {"crontab": crontab, "leadership": True, "heartbeat_interval": 0.1}
    async with started_node(engine_name, tmp_path, **options) as node:
        engine = await node.engine()

        async def announced() -> list[AnnouncedEntry]:
            return await node.fleet_crontab()

        found = await poll(announced, lambda a: len(a) == 2, timeout=10, what="the crontab announced")
        assert [(a.entry.name, a.nodes) for a in found] == [
            ("nightly", (node.settings.node,)),
            ("tidy", (node.settings.node,)),
        ]
        assert (
            found[0].entry.timezone == "Europe/Paris"
            and found[0].entry.request.worker == "app.reports.nightly"
        )
        # Kept in the producer row's meta (Oban's schema has no room elsewhere), one row per node.
        rows = [p for p in await engine.list_producers() if "crontab" in p.meta]
        assert len(rows) == 1 and {e["name"] for e in rows[0].meta["crontab"]} == {"tidy", "nightly"}
        # A row some other client wrote: its junk is left out, its good entry listed.
        good = {"name": "other", "expr": "@hourly", "tz": "UTC", "worker": "app.other", "queue": "q"}
        # It also runs "tidy", in a newer version (a deploy under way): the newest node's is shown.
        newer = {**good, "name": "tidy", "worker": "app.tidy.v2"}
        junk = [1, {"name": "no expression"}, {**good, "name": "bad", "expr": "61 * * * *"}, good, newer]
        meta = {**OWN_PRODUCER, "local_limit": 1, "crontab": junk}
        await engine.record_producers("conveyor", "elsewhere", [ProducerBeat(str(uuid.uuid4()), "q", meta)])

        # The web process's app: no crontab, no job modules imported; one entry of its own.
        web = Conveyor(engine=engine)
        assert web.crontab() == []
        own = CronEntry.build("@daily", "app.only.here", name="only-here")
        async with browser_like(dashboard_app(web)) as client:
            page = (await client.get("/cron")).text
        async with browser_like(dashboard_app(web, crontab=[own, crontab[0]])) as client:
            with_own = (await client.get("/cron")).text

    assert re.findall(r'<tr data-entry="([^"]+)">', page) == ["nightly", "other", "tidy"]
    tidy = page[page.index('<tr data-entry="tidy">') :].split("</tr>")[0]
    assert "app.tidy.v2" in tidy and "<code>@hourly</code>" in tidy
    assert f'data-nodes="2">{", ".join(sorted(["elsewhere", node.settings.node]))}</td>' in tidy
    assert "(Europe/Paris)" in page and 'data-nodes="1">elsewhere</td>' in page
    assert re.findall(r'<tr data-entry="([^"]+)">', with_own) == ["nightly", "other", "tidy", "only-here"]
    assert 'data-nodes="0"' in with_own.split('<tr data-entry="only-here">')[1]
