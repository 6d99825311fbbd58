"""Checked by mypy in tests/test_typing.py: the job API keeps the function's parameters visible.
Lines marked ``# E`` must be errors; the rest must type-check."""

from __future__ import annotations

from conveyor import Conveyor, JobCount, JobId, JobIds, JobRequest, job


@job
async def send(email: str, retries: int = 0) -> str:
    return email


async def use() -> None:
    request: JobRequest = send.new("a@example.com", retries=2)
    job_id: JobId = await send.enqueue("a@example.com")
    same: JobId = send.enqueue_sync(email="a@example.com")
    later: JobId = await send.options(queue="mail").enqueue("a@example.com", 1)
    send.new(retries=2)  # E: missing email
    await send.enqueue("a@example.com", retries="many")  # E: retries is an int
    send.enqueue_sync(emial="x")  # E: unknown keyword
    del request, job_id, same, later


async def count(app: Conveyor) -> None:
    exact: int = await app.count_jobs(states="available")
    estimated: JobCount = await app.count_jobs(estimate=True, exact_up_to=100, queues="mail")
    wrong: int = await app.count_jobs(estimate=True)  # E: a JobCount, not an int
    await app.count_jobs(exact_up_to=100)  # E: exact_up_to needs estimate=True
    del exact, estimated, wrong


async def many(app: Conveyor) -> None:
    ids: JobIds = await app.enqueue_many([send.new("a@example.com")])
    first: JobId = ids[0]
    rest: JobIds = ids[1:]
    both: JobIds = ids + rest
    plain: list[int] = ids.tolist()
    blocking: JobIds = app.enqueue_many_sync([send.new("b@example.com")])
    ids.append(first)  # E: immutable
    wrong: list[JobId] = app.enqueue_many_sync([])  # E: a JobIds, not a list
    del first, rest, both, plain, blocking, wrong
