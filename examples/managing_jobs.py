"""Managing jobs: get, list with filters, page, cancel, retry, delete, and read recorded results."""

from __future__ import annotations

import asyncio
from typing import Any

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, JobFilter, JobNotFoundError, JobState, job


@job(queue="reports", tags=["nightly"])
async def build_report(day: int) -> None:
    pass


@job(queue="work", record=True)
async def crunch(seconds: float) -> dict[str, float]:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def main() -> None:
    # The node runs only the "work" queue, so the "reports" jobs stay put while we manage them.
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"work": 2})
    await app.install()
    await app.delete_jobs()
    await app.enqueue_many(build_report.new(day=day) for day in range(1, 13))
    await app.enqueue_many(
        build_report.new(day=day).with_options(tags=["nightly", "finance"]) for day in range(13, 17)
    )

    reports = await app.list_jobs(queues="reports", states=JobState.AVAILABLE)
    print(f"available reports: {len(reports)} (newest first: {reports[0].id > reports[-1].id})")
    finance = JobFilter(queues=("reports",), tags=("nightly", "finance"))
    print(f"tagged nightly AND finance: {len(await app.list_jobs(finance))}")

    pages, before = [], None
    while page := await app.list_jobs(queues="reports", limit=5, before_id=before):
        pages.append(len(page))
        before = page[-1].id  # the next page starts below the last id seen
    print(f"pages of 5: {pages}")

    cancelled = await app.cancel_jobs(finance)
    print(f"cancelled: {len(cancelled)}; cancelling again: {len(await app.cancel_jobs(finance))}")
    retried = await app.retry_jobs(ids=cancelled)
    again = await app.get_job(retried[0])
    assert again is not None
    print(f"retried: {len(retried)}, now {again.state.value}")
    deleted = await app.delete_jobs(queues="reports")
    print(f"deleted: {len(deleted)}; get_job of a deleted id: {await app.get_job(deleted[0])}")

    # Telemetry handlers see every job start; this one tells us when the long job is running.
    long_running = asyncio.Event()

    def on_start(event: str, data: dict[str, Any]) -> None:
        if data["job"].args == {"seconds": 60}:
            long_running.set()

    app.telemetry.attach(on_start, "job.start")
    async with app:
        long_id = await app.enqueue(crunch.new(seconds=60))
        short_id = await app.enqueue(crunch.new(seconds=0.1))
        await asyncio.wait_for(long_running.wait(), 10)
        print(f"cancel a running job: {await app.cancel_job(long_id)}")
        long_job, short_job = await wait_until_final(app, [long_id, short_id])
        print(f"long job: {long_job.state.value}; short job: {short_job.state.value}")
        print(f"recorded result: {await app.get_result(short_id)}")
        try:
            await app.get_result(long_id)
        except LookupError as exc:
            print(f"no result for the cancelled job: {exc}")
        try:
            await app.get_result(deleted[0])
        except JobNotFoundError as exc:
            print(f"no such job: {exc}")


if __name__ == "__main__":
    asyncio.run(main())
