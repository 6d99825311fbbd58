"""Checked by mypy in tests/test_typing.py: the job API keeps the function's parameters visible.
Lines marked ``# E`` must be errors; the rest must type-check."""

from __future__ import annotations

from conveyor import JobId, JobRequest, job


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
