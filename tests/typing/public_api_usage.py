"""A user's module as a type checker sees it: checked by pyright in strict mode (tests/test_typing.py,
scripts/test.sh) and by mypy --strict. It uses the public API the guides show: jobs and workers,
enqueueing, workflows and batches, relay, the testing helpers, the FastAPI lifespan and routers, the
dashboard mount and the Prometheus route. It must check clean: a public name that reaches a user as
``Unknown`` or a partially unknown type fails here. (It is type-checked, never run.)"""

from __future__ import annotations

from datetime import timedelta

from fastapi import FastAPI
from starlette.requests import Request

from conveyor import (
    Batch,
    Chunk,
    ChunkResult,
    Conveyor,
    Discard,
    Job,
    JobContext,
    JobFilter,
    JobId,
    JobIds,
    JobRequest,
    JobState,
    Pruned,
    PruneRule,
    Record,
    Retention,
    Snooze,
    Workflow,
    current_job,
    job,
    progress,
    worker,
)
from conveyor.contrib.prometheus import PrometheusMetrics, metrics
from conveyor.testing import assert_enqueued, drain_queue, mode, process_job, refute_enqueued
from conveyor.web.dashboard import dashboard_app
from conveyor.web.starlette import conveyor_lifespan, jobs_router

app = Conveyor(
    "postgresql://app@db/app",
    queues={"mail": 10, "builds": 2},
    prune_rules=[PruneRule(states=("discarded",), max_age=timedelta(days=30))],
)


@job(queue="mail", max_attempts=5)
async def send_welcome(to: str, retries: int = 0) -> str:
    here: JobContext = current_job()
    await progress(done=1, total=2)
    return f"{to} on attempt {here.attempt}"


@job(queue="builds", unique=True, lock="builds")
def build(version: str) -> Record:
    return Record({"version": version})


@worker(queue="builds")
class Publish:
    def process(self, job: Job) -> Snooze | None:
        return Snooze(5) if job.attempt < 2 else None


@job(queue="events", chunk=Chunk(size=100, timeout=timedelta(seconds=1)))
async def store_events(jobs: list[Job]) -> ChunkResult | None:
    bad = [j for j in jobs if "kind" not in j.args]
    return ChunkResult({j.id: Discard("no kind") for j in bad}) if bad else None


async def enqueue() -> None:
    event: JobId = await store_events.enqueue(kind="click", user=7)
    del event
    one: JobId = await send_welcome.enqueue("ada@example.com", retries=1)
    same: JobId = send_welcome.enqueue_sync("ada@example.com")
    later: JobId = await send_welcome.options(queue="mail", priority=1, schedule_in=60).enqueue(
        "bob@example.com"
    )
    other: JobRequest = JobRequest("billing.Charge", args={"id": 1}, tags=["vip"], unique={"period": 60})
    cancelled: int = len(await app.cancel_jobs(JobFilter(states="available", queues="mail")))
    request: JobRequest = build.new(version="1.2")
    many: JobIds = await app.enqueue_many([request, send_welcome.new("c@example.com")])
    found: Job | None = await app.get_job(one)
    state: JobState | None = found.state if found is not None else None
    listed: list[Job] = await app.list_jobs(JobFilter(queues=["mail"]))
    del same, later, other, cancelled, many, state, listed


async def pipeline() -> JobIds:
    workflow = (
        Workflow(name="release")
        .add("build", build.new(version="1.2"))
        .add("mail", send_welcome.new("team@example.com"), deps=["build"])
    )
    ids = await app.enqueue_many(workflow)
    status = await app.workflow_status(workflow.id)
    steps: dict[str, JobState] = status.states
    batch = Batch(on_completed=send_welcome.new("ops@example.com")).add(build.new(version="1.3"))
    await app.enqueue_many(batch)
    del steps
    return ids


async def retention() -> int:
    policy = Retention(max_age="7d", rules=[PruneRule(queue="mail", max_age=3600), {"states": "cancelled"}])
    pruned: Pruned = await app.prune(policy)
    state: JobState = await app.signal(1, {"stop": True})
    del state
    return pruned.count


async def dynamic_cron_and_queues() -> None:
    stored = await app.add_cron("nightly", "0 2 * * *", send_welcome, {"to": "ops@example.com"}, queue="mail")
    await app.update_cron(stored.name, expression="30 3 * * *", timezone="Europe/Paris")
    paused: bool = app.pause_cron_sync("nightly").paused
    del paused
    await app.resume_cron("nightly")
    await app.delete_cron("nightly")
    declared = await app.declare_queue("reports", 3, global_limit={"allowed": 4}, nodes=["node-1"])
    names: list[str] = [q.name for q in await app.declared_queues()] + [declared.name]
    del names
    await app.delete_declared_queue("reports")


async def relay_and_wait(request: Request) -> None:
    done: Job = await app.wait(await send_welcome.enqueue("ada@example.com"), timeout=5)
    result: object = await send_welcome.relay("bob@example.com")
    counted: int = await app.count_jobs(states="available", queues="mail")
    ids: JobIds = app.enqueue_many_sync(build.new(version=v) for v in ("1", "2"))
    async with app:
        await app.nudge("mail")
    del done, result, counted, ids, request


def is_staff(request: Request) -> bool:
    return request.headers.get("x-staff") == "1"


async def test_welcome() -> None:
    with mode("manual"):
        await send_welcome.enqueue("ada@example.com")
        queued: Job = await assert_enqueued(worker=send_welcome, args={"to": "ada@example.com"})
        result: object = await process_job(queued)
        ran: dict[str, int] = await drain_queue("mail")
        await refute_enqueued(queue="builds")
        del result, ran


prometheus: PrometheusMetrics = metrics(app)
api = FastAPI(lifespan=conveyor_lifespan(app))
api.mount("/jobs", jobs_router(app))
api.mount("/admin/jobs", dashboard_app(app, token="secret", read_only=True))
api.mount("/staff/jobs", dashboard_app(app, auth=is_staff))
api.router.routes.append(prometheus.route())  # GET /metrics
endpoint = prometheus.asgi()  # an ASGI app, for a route of one's own
