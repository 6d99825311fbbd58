"""The dashboard on every engine, through HTTP as a browser sends it: pages, filters, keyset paging,
actions and their effect on the jobs, and the security rules (CSRF, authentication, the loopback
rule, read-only mode, escaping of every user value)."""

from __future__ import annotations

import asyncio
import base64
import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request

from conveyor import Conveyor, JobRequest, Workflow
from conveyor.cron import CronEntry
from conveyor.engine.base import Engine
from conveyor.job import JobState
from conveyor.testing import drain_queue
from conveyor.web.dashboard import dashboard_app, pages
from tests.dashboard import dash_jobs
from tests.dashboard.client import act, browser_like, csrf_of, token_for
from tests.helpers import poll

JOB_ROW = re.compile(r'<tr data-job="(\d+)" data-state="([a-z]+)">')


def rows(page: str) -> list[tuple[int, str]]:
    return [(int(i), s) for i, s in JOB_ROW.findall(page)]


@pytest.fixture
def conveyor(any_engine: Engine) -> Conveyor:
    return Conveyor(engine=any_engine, testing="manual", jobs=[dash_jobs.tally, dash_jobs.explode])


async def test_pages_filters_and_keyset_paging(conveyor: Conveyor) -> None:
    await conveyor.enqueue_many(
        [JobRequest(worker="app.mail", args={"n": i}, queue="mail") for i in range(60)]
    )
    await conveyor.enqueue_many(
        [JobRequest(worker="app.bill", args={"n": i}, queue="billing", tags=["vip"]) for i in range(5)]
    )
    async with browser_like(dashboard_app(conveyor)) as client:
        for path in ("/", "/jobs", "/nodes", "/cron"):
            page = await client.get(path)
            assert page.status_code == 200 and "<h1>" in page.text, path
        first = rows((await client.get("/jobs", params={"queue": "mail", "limit": 25})).text)
        assert len(first) == 25 and [i for i, _ in first] == sorted((i for i, _ in first), reverse=True)
        seen = [i for i, _ in first]
        before = seen[-1]
        while True:
            page = (await client.get("/jobs", params={"queue": "mail", "limit": 25, "before": before})).text
            found = [i for i, _ in rows(page)]
            seen += found
            if 'rel="next"' not in page:
                break
            before = found[-1]
        assert len(seen) == len(set(seen)) == 60
        assert sorted(seen, reverse=True) == seen

        suffix = rows((await client.get("/jobs", params={"worker": "bill"})).text)
        assert len(suffix) == 5  # the end of a worker's name finds it: "bill" in "app.bill"
        assert rows((await client.get("/jobs", params={"worker": "ill"})).text) == []
        now = datetime.now(UTC)
        window = {"time": "scheduled", "since": (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")}
        assert len(rows((await client.get("/jobs", params={**window, "limit": 100})).text)) == 65
        later = {"time": "scheduled", "since": (now + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")}
        assert rows((await client.get("/jobs", params=later)).text) == []
        assert rows((await client.get("/jobs", params={**window, "time": "completed"})).text) == []
        by_args = rows((await client.get("/jobs", params={"args": '{"n": 3}', "queue": "billing"})).text)
        assert len(by_args) == 1
        bad_args = await client.get("/jobs", params={"args": "[1]", "queue": "billing"})
        assert "args must be a JSON object" in html.unescape(bad_args.text) or "a list" in bad_args.text
        assert len(rows(bad_args.text)) == 5
        vip = rows((await client.get("/jobs", params={"tag": "vip"})).text)
        assert len(vip) == 5
        assert (
            len(rows((await client.get("/jobs", params={"worker": "app.bill", "queue": "billing"})).text))
            == 5
        )
        assert rows((await client.get("/jobs", params={"worker": "app.bill", "queue": "mail"})).text) == []
        both = await client.get("/jobs", params={"queue": "mail,billing", "limit": 100})
        assert len(rows(both.text)) == 65

        # Bad values are named and left out; the rest of the filter still applies.
        odd = await client.get("/jobs", params={"state": "nonsense", "queue": "billing", "before": "x1"})
        assert odd.status_code == 200
        assert "state &#39;nonsense&#39; is not a job state" in odd.text and "is not a job id" in odd.text
        assert len(rows(odd.text)) == 5

        assert (await client.get("/jobs/999999")).status_code == 404
        assert (await client.get("/jobs/abc")).status_code == 400


async def test_overview_counts_queues_and_charts_the_last_hour(conveyor: Conveyor) -> None:
    await conveyor.enqueue_many(
        [JobRequest(worker="app.mail", args={"n": i}, queue="mail") for i in range(3)]
    )
    await conveyor.enqueue_many([dash_jobs.tally.new(i) for i in range(4)])
    await conveyor.enqueue_many([dash_jobs.explode.new("no") for _ in range(2)])
    await drain_queue(app=conveyor, with_safety=True)
    async with browser_like(dashboard_app(conveyor)) as client:
        page = (await client.get("/")).text
    mail = page[page.index('<tr data-queue="mail">') :].split("</tr>")[0]
    assert '<td data-count="available">3</td>' in mail  # a queue no node runs is listed too
    default = page[page.index('<tr data-queue="default">') :].split("</tr>")[0]
    assert '<td data-count="completed">4</td>' in default and '<td data-count="discarded">2</td>' in default
    assert '<b data-total="available">3</b>' in page and '<b data-total="completed">4</b>' in page
    assert '<span class="value" data-stat="completed">4</span>' in page
    assert '<span class="value" data-stat="failed">2</span>' in page
    assert '<span class="value" data-stat="error-rate">33.3%</span>' in page
    assert page.count('<svg class="chart') == 2 and page.count('<rect class="bar"') == 120


async def test_a_filtered_page_looks_through_a_bounded_window_of_ids(
    conveyor: Conveyor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "SCAN_WINDOW", 10)
    ids = await conveyor.enqueue_many(
        [JobRequest(worker="app.x", args={}, queue="rare" if i in (1, 24) else "common") for i in range(30)]
    )
    async with browser_like(dashboard_app(conveyor)) as client:
        page = (await client.get("/jobs", params={"queue": "rare"})).text
        assert [i for i, _ in rows(page)] == [ids[24]]
        link = re.search(r'href="(/jobs\?[^"]+)" data-search-older', page)
        assert link is not None and "Looked through jobs" in page
        page = (await client.get(html.unescape(link.group(1)))).text
        assert rows(page) == [] and "none matches" in page
        link = re.search(r'href="(/jobs\?[^"]+)" data-search-older', page)
        assert link is not None
        page = (await client.get(html.unescape(link.group(1)))).text
        # (Older windows may still be offered: a reused schema's ids start above 1.)
        assert [i for i, _ in rows(page)] == [ids[1]]
        everything = (await client.get("/jobs", params={"limit": 100})).text  # no filter: no window
        assert len(rows(everything)) == 30 and "data-search-older" not in everything


async def test_job_detail_shows_result_progress_errors_and_workflow(conveyor: Conveyor) -> None:
    workflow = Workflow(name="report")
    workflow.add("count", dash_jobs.tally.new(3))
    workflow.add("fail", dash_jobs.explode.new("boom at step two"), deps=["count"])
    workflow.add("after", dash_jobs.tally.new(1), deps=["fail"])
    ids = await conveyor.enqueue_many(workflow)
    await drain_queue(app=conveyor, with_safety=True)
    assert (await conveyor.get_job(ids[1])).state is JobState.DISCARDED  # type: ignore[union-attr]
    async with browser_like(dashboard_app(conveyor)) as client:
        done = (await client.get(f"/jobs/{ids[0]}")).text
        assert 'data-block="result"' in done and "&#34;counted&#34;: 3" in done
        assert '<progress max="6.0" value="3.0"' in done and "halfway" in done
        assert '<svg class="workflow"' in done
        # The workflow as a whole: failed at its second step, every step final (100%).
        assert 'data-workflow-state="failed"' in done and "<span data-workflow-failed>fail</span>" in done
        assert 'aria-label="workflow progress"></progress> 100%' in done
        for step in ids:  # every step is drawn as a link to its job
            assert f'href="/jobs/{step}"' in done
        failed = (await client.get(f"/jobs/{ids[1]}")).text
        assert 'data-block="error"' in failed and "RuntimeError: boom at step two" in failed
        assert 'data-field="state"><span class="state state-discarded">' in failed
        assert "Retry</button>" in failed and "Cancel</button>" not in failed


async def test_actions_change_jobs_and_need_confirmation_in_bulk(conveyor: Conveyor) -> None:
    ids = await conveyor.enqueue_many(
        [JobRequest(worker="app.mail", args={"n": i}, queue="mail") for i in range(4)]
        + [JobRequest(worker="app.bill", args={}, queue="billing") for _ in range(3)]
    )
    async with browser_like(dashboard_app(conveyor)) as client:
        cancelled = await act(
            client, "/actions/jobs", action="cancel", ids=str(ids[0]), confirmed="yes", next=f"/jobs/{ids[0]}"
        )
        assert cancelled.status_code == 303
        assert cancelled.headers["location"] == f"/jobs/{ids[0]}?done=cancel&n=1"
        assert (await conveyor.get_job(ids[0])).state is JobState.CANCELLED  # type: ignore[union-attr]
        landed = await client.get(cancelled.headers["location"])
        assert "Cancelled 1 job(s)." in landed.text

        retried = await act(client, "/actions/jobs", action="retry", ids=str(ids[0]), confirmed="yes")
        assert retried.status_code == 303
        assert (await conveyor.get_job(ids[0])).state is JobState.AVAILABLE  # type: ignore[union-attr]

        # A bulk action by filter shows how many jobs it will touch, and acts only once confirmed.
        asked = await act(client, "/actions/jobs", action="delete", queue="mail", next="/jobs?queue=mail")
        assert asked.status_code == 200 and re.search(r"<b data-count>4</b>", asked.text)
        assert len(await conveyor.list_jobs(queues=["mail"])) == 4
        confirm_form = dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', asked.text))
        assert confirm_form["confirmed"] == "yes" and confirm_form["queue"] == "mail"
        deleted = await client.post("/actions/jobs", data=confirm_form)
        assert (
            deleted.status_code == 303 and deleted.headers["location"] == "/jobs?queue=mail&done=delete&n=4"
        )
        assert await conveyor.list_jobs(queues=["mail"]) == []
        assert len(await conveyor.list_jobs(queues=["billing"])) == 3

        # Only the states an action can change count: billing jobs are available, none retryable.
        nothing = await act(client, "/actions/jobs", action="retry", state="available", queue="billing")
        assert re.search(r"<b data-count>0</b>", nothing.text) and "Nothing to do." in nothing.text

        # Picked jobs: the same confirmation, then the action on those ids only.
        picked = await act(client, "/actions/jobs", action="cancel", ids=[str(ids[4]), str(ids[5])])
        assert re.search(r"<b data-count>2</b>", picked.text)
        await act(client, "/actions/jobs", action="cancel", ids=[str(ids[4]), str(ids[5])], confirmed="yes")
        states = {j.id: j.state for j in await conveyor.list_jobs(queues=["billing"])}
        assert states == {ids[4]: JobState.CANCELLED, ids[5]: JobState.CANCELLED, ids[6]: JobState.AVAILABLE}

        # "next" only ever leads back into the dashboard.
        for target in ("https://evil.example/x", "//evil.example/", "/\\evil.example", "javascript:alert(1)"):
            moved = await act(
                client, "/actions/jobs", action="cancel", ids=str(ids[6]), confirmed="yes", next=target
            )
            assert moved.headers["location"].startswith("/jobs?"), target
        bad = await act(client, "/actions/jobs", action="explode", ids=str(ids[6]))
        assert bad.status_code == 400


async def test_queue_actions_reach_the_node(node_app: Conveyor) -> None:
    assert node_app.node is not None
    producer = node_app.node.targets("default")[0]
    async with browser_like(dashboard_app(node_app)) as client:
        paused = await act(client, "/actions/queues", action="pause", queue="default", next="/")
        assert paused.status_code == 303 and paused.headers["location"] == "/?done=pause&subject=default"
        assert producer.paused
        assert "Pause sent for queue default." in (await client.get(paused.headers["location"])).text
        await _until(lambda: _paused(node_app), True)  # the next heartbeat tells the fleet
        page = (await client.get("/")).text
        assert 'data-paused="1"' in page and "Resume</button>" in page

        scaled = await act(client, "/actions/queues", action="scale", queue="default", limit="7")
        assert scaled.status_code == 303 and producer.limit == 7
        await act(client, "/actions/queues", action="resume", queue="default")
        assert not producer.paused
        for wrong in ({"limit": "0"}, {"limit": "many"}, {}):
            refused = await act(client, "/actions/queues", action="scale", queue="default", **wrong)
            assert refused.status_code == 400
        assert (await act(client, "/actions/queues", action="pause", queue="no such")).status_code == 400


async def _paused(app: Conveyor) -> bool:
    return all(q.paused for q in await app.queues())


async def _until(probe, expected, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    await poll(probe, lambda found: found == expected, timeout=timeout, what=repr(expected), every=0.05)


POST_ROUTES = ("/actions/jobs", "/actions/queues", "/login", "/logout")


async def test_every_action_needs_the_sessions_csrf_token(conveyor: Conveyor) -> None:
    job_id = await conveyor.enqueue(JobRequest(worker="app.mail", args={}))
    dashboard = dashboard_app(conveyor, token="s3cret-token")
    bearer = {"authorization": "Bearer s3cret-token"}
    async with browser_like(dashboard, headers=bearer) as client:
        token = await token_for(client)
        form = {"action": "cancel", "ids": str(job_id), "confirmed": "yes"}
        for path in POST_ROUTES:
            assert (await client.post(path, data=form)).status_code == 403, path  # no token
            wrong = await client.post(path, data={**form, "csrf_token": "0" * 64})
            assert wrong.status_code == 403, path
        async with browser_like(dashboard, headers=bearer) as other:  # another session's token
            await token_for(other)
            stolen = await other.post("/actions/jobs", data={**form, "csrf_token": token})
            assert stolen.status_code == 403
        assert (await conveyor.get_job(job_id)).state is JobState.AVAILABLE  # type: ignore[union-attr]
        by_header = await client.post("/actions/jobs", data=form, headers={"x-csrf-token": token})
        assert by_header.status_code == 303
        assert (await conveyor.get_job(job_id)).state is JobState.CANCELLED  # type: ignore[union-attr]


async def test_authentication_basic_token_and_hook(conveyor: Conveyor) -> None:
    basic = dashboard_app(conveyor, basic_auth=("ops", "pa:ss word"))
    async with browser_like(basic, base_url="http://dash.example") as client:
        refused = await client.get("/jobs")
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
        assert (await client.get("/jobs", auth=("ops", "wrong"))).status_code == 401
        assert (await client.get("/jobs", auth=("ops", "pa:ss word"))).status_code == 200
        garbled = {"authorization": "Basic " + base64.b64encode(b"\xff\xfe").decode()}
        assert (await client.get("/jobs", headers=garbled)).status_code == 401
        assert (await client.get("/static/dashboard.css")).status_code == 200  # assets are public

    token = dashboard_app(conveyor, token="t0ken-for-ops")
    async with browser_like(token, base_url="http://dash.example") as client:
        to_login = await client.get("/jobs", headers={"accept": "text/html"})
        assert to_login.status_code == 303 and to_login.headers["location"] == "/login"
        assert (await client.get("/jobs")).status_code == 401
        login_page = await client.get("/login")
        failed = await client.post("/login", data={"csrf_token": csrf_of(login_page.text), "token": "nope"})
        assert failed.status_code == 401 and "not the dashboard" in failed.text
        signed_in = await client.post(
            "/login", data={"csrf_token": csrf_of(login_page.text), "token": "t0ken-for-ops"}
        )
        assert signed_in.status_code == 303
        assert (await client.get("/jobs")).status_code == 200  # the session cookie now
        await client.post("/logout", data={"csrf_token": await token_for(client)})
        assert (await client.get("/jobs")).status_code == 401
        assert (
            await client.get("/jobs", headers={"authorization": "Bearer t0ken-for-ops"})
        ).status_code == 200

    def staff_only(request: Request) -> bool:
        if request.headers.get("x-user") == "mallory":
            raise HTTPException(status_code=418, detail="go away")
        return request.headers.get("x-user") == "staff"

    async def async_staff(request: Request) -> bool:
        await asyncio.sleep(0)
        return staff_only(request)

    for hook in (staff_only, async_staff):
        hooked = dashboard_app(conveyor, auth=hook)
        async with browser_like(hooked, base_url="http://dash.example") as client:
            assert (await client.get("/")).status_code == 403
            assert (await client.get("/", headers={"x-user": "staff"})).status_code == 200
            assert (await client.get("/", headers={"x-user": "mallory"})).status_code == 418


async def test_without_auth_only_loopback_is_served(conveyor: Conveyor) -> None:
    open_dashboard = dashboard_app(conveyor)
    for base in ("http://127.0.0.1", "http://localhost", "http://[::1]"):
        async with browser_like(open_dashboard, base_url=base) as client:
            assert (await client.get("/")).status_code == 200, base
    for base in ("http://10.1.2.3", "http://dash.example", "http://0.0.0.0"):
        async with browser_like(open_dashboard, base_url=base) as client:
            refused = await client.get("/")
            assert refused.status_code == 403 and "no authentication configured" in refused.text, base
            assert (await client.post("/actions/jobs", data={})).status_code == 403


async def test_read_only_hides_and_refuses_actions(conveyor: Conveyor) -> None:
    job_id = await conveyor.enqueue(JobRequest(worker="app.mail", args={}))
    async with browser_like(dashboard_app(conveyor, read_only=True)) as client:
        await conveyor.add_cron("nightly", "0 2 * * *", "app.nightly", foreign=True)
        for path in ("/", "/jobs", f"/jobs/{job_id}", "/cron"):
            page = (await client.get(path)).text
            assert "read-only" in page and 'action="/actions/' not in page, path
        await client.get("/jobs")
        token = "0" * 64  # no page of a read-only dashboard holds a form; refused before checking it
        for path, form in (
            ("/actions/jobs", {"action": "cancel", "ids": str(job_id), "confirmed": "yes"}),
            ("/actions/queues", {"action": "pause", "queue": "default"}),
            ("/actions/cron", {"action": "delete", "name": "nightly"}),
        ):
            refused = await client.post(path, data={**form, "csrf_token": token})
            assert refused.status_code == 403 and "read-only" in refused.text
    assert (await conveyor.get_job(job_id)).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert [c.name for c in await conveyor.stored_crons()] == ["nightly"]


async def test_user_data_is_rendered_inert(conveyor: Conveyor) -> None:
    script, attribute, svg = dash_jobs.PAYLOADS
    job_id = await conveyor.enqueue(
        JobRequest(
            worker=f"app.{svg}",
            args={"note": script, attribute: attribute},
            meta={"who": attribute, "workflow_id": script, "name": svg, "deps": [script]},
            tags=[script, attribute],
            queue="mail",
        )
    )
    failing = await conveyor.enqueue(dash_jobs.explode.new(script))
    await drain_queue(app=conveyor, with_safety=True)
    async with browser_like(dashboard_app(conveyor)) as client:
        pages = [
            (await client.get("/jobs")).text,
            (await client.get(f"/jobs/{job_id}")).text,
            (await client.get(f"/jobs/{failing}")).text,
            (await client.get("/jobs", params={"tag": script, "worker": f"app.{svg}"})).text,
        ]
    for page in pages:
        for payload in dash_jobs.PAYLOADS:
            assert payload not in page
        assert "<script>window" not in page and "<img src=x" not in page and "<svg onload" not in page
    assert html.escape(script, quote=True) in pages[1] or "&lt;script&gt;" in pages[1]
    assert "RuntimeError: &lt;script&gt;" in pages[2]


async def test_mounted_under_a_prefix(conveyor: Conveyor) -> None:
    job_id = await conveyor.enqueue(JobRequest(worker="app.mail", args={}))
    from fastapi import FastAPI  # here: only this test needs it, and importing it costs 0.4 s of CPU

    api = FastAPI()
    api.mount("/ops/queue", dashboard_app(conveyor), name="dashboard")
    async with browser_like(api) as client:
        page = (await client.get("/ops/queue/jobs")).text
        assert 'href="/ops/queue/static/dashboard.css"' in page
        assert f'href="/ops/queue/jobs/{job_id}"' in page and 'action="/ops/queue/actions/jobs"' in page
        moved = await act(
            client,
            "/ops/queue/actions/jobs",
            action="cancel",
            ids=str(job_id),
            confirmed="yes",
            next="/elsewhere",
            page="/ops/queue/jobs",
        )
        assert moved.headers["location"] == "/ops/queue/jobs?done=cancel&n=1"
        assert (await client.get("/ops/queue/static/dashboard.js")).status_code == 200

    # A plain ASGI dispatcher that passes the prefix as root_path (as the guide's Django asgi.py does).
    dashboard = dashboard_app(conveyor, basic_auth=("ops", "pw"))

    async def dispatcher(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and scope["path"].startswith("/jobs/"):
            await dashboard(dict(scope, root_path="/jobs"), receive, send)
        else:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async with browser_like(dispatcher, auth=("ops", "pw")) as client:
        page = await client.get("/jobs/jobs")
        assert page.status_code == 200
        assert f'href="/jobs/jobs/{job_id}"' in page.text and 'href="/jobs/static/dashboard.css"' in page.text
        assert (await client.get("/jobs/static/dashboard.css", auth=None)).status_code == 200
        assert (await client.get("/jobs/jobs", auth=None)).status_code == 401


async def test_cron_page_lists_entries_with_next_run(conveyor: Conveyor) -> None:
    entry = CronEntry.build("*/15 * * * *", "app.report", {"kind": "<b>daily</b>"}, name="report-<i>")
    hourly = CronEntry.build("@hourly", "app.sweep", name="sweep")
    async with browser_like(dashboard_app(conveyor, crontab=[entry, hourly])) as client:
        page = (await client.get("/cron")).text
    assert "report-&lt;i&gt;" in page and "<code>*/15 * * * *</code>" in page
    found = re.findall(r'data-next="([^"]+)"', page)
    assert len(found) == 2
    now = datetime.now(UTC)
    for text in found:
        moment = datetime.fromisoformat(text)
        assert now < moment and (moment - now).total_seconds() <= 3600
    assert datetime.fromisoformat(found[0]).minute % 15 == 0 and datetime.fromisoformat(found[1]).minute == 0


async def test_cron_page_lists_stored_entries_over_the_configured_ones(conveyor: Conveyor) -> None:
    hourly = CronEntry.build("@hourly", "app.sweep", name="sweep")
    await conveyor.add_cron("nightly", "0 2 * * *", "app.nightly", foreign=True)
    await conveyor.add_cron("sweep", "*/5 * * * *", "app.sweep", foreign=True, paused=True)
    async with browser_like(dashboard_app(conveyor, crontab=[hourly])) as client:
        page = (await client.get("/cron")).text
    rows = dict(re.findall(r'<tr data-entry="([^"]+)">(.*?)</tr>', page, re.S))
    assert set(rows) == {"sweep", "nightly"}
    assert 'data-state="paused"' in rows["sweep"] and "<code>*/5 * * * *</code>" in rows["sweep"]
    assert 'data-next=""' in rows["sweep"]  # paused: no next run
    assert 'data-state="stored"' in rows["nightly"] and "the leader" in rows["nightly"]
    assert re.search(r'data-next="[^"]+"', rows["nightly"])


async def test_cron_actions_pause_resume_and_delete_entries(conveyor: Conveyor) -> None:
    await conveyor.add_cron("nightly", "0 2 * * *", "app.nightly", foreign=True)
    async with browser_like(dashboard_app(conveyor, crontab=[])) as client:
        page = (await client.get("/cron")).text
        assert 'data-action="cron-pause"' in page and 'data-action="cron-delete"' in page
        paused = await act(client, "/actions/cron", page="/cron", action="pause", name="nightly")
        assert (
            paused.status_code == 303
            and paused.headers["location"] == "/cron?done=cron-pause&subject=nightly"
        )
        assert [c.paused for c in await conveyor.stored_crons()] == [True]
        assert "Cron entry nightly paused" in (await client.get(paused.headers["location"])).text
        await act(client, "/actions/cron", page="/cron", action="resume", name="nightly")
        assert [c.paused for c in await conveyor.stored_crons()] == [False]
        missing = await act(client, "/actions/cron", page="/cron", action="pause", name="nope")
        assert missing.status_code == 400 and "no cron entry has that name" in missing.text
        assert (
            await act(client, "/actions/cron", page="/cron", action="explode", name="nightly")
        ).status_code == 400
        await act(client, "/actions/cron", page="/cron", action="delete", name="nightly")
        assert await conveyor.stored_crons() == []


async def test_security_headers_on_every_response(conveyor: Conveyor) -> None:
    async with browser_like(dashboard_app(conveyor)) as client:
        first = await client.get("/")
        cookie = first.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        for path in ("/", "/jobs/1", "/static/dashboard.css"):
            response = await client.get(path)
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
            assert response.headers["x-frame-options"] == "DENY"
            assert "set-cookie" not in response.headers  # the session keeps its CSRF cookie
