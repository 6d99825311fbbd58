"""Enqueueing: one job, many jobs streamed from a generator, scheduling, per-request options, and
the errors bad input gets (before anything is written)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from _support import DATABASE_URL, PREFIX

from conveyor import Conveyor, JobRequest, UnknownOptionError, ValidationError, job


@job(queue="mail", max_attempts=5, tags=["mail"])
async def send_email(to: str, subject: str) -> None:
    print(f"to {to}: {subject}")


def newsletter(count: int) -> Iterator[JobRequest]:
    """Requests made lazily: enqueue_many consumes them in bounded chunks, never all at once."""
    for n in range(count):
        yield send_email.new(to=f"reader{n}@example.com", subject="Our news")


async def main() -> None:
    # No queues: this app only writes and reads jobs (a node elsewhere would run them).
    app = Conveyor(DATABASE_URL, prefix=PREFIX)
    await app.install()
    await app.delete_jobs()

    job_id = await app.enqueue(send_email.new(to="ada@example.com", subject="Hello"))
    one = await app.get_job(job_id)
    assert one is not None
    print(f"single: state={one.state.value} queue={one.queue} tags={list(one.tags)} args={one.args}")

    ids = await app.enqueue_many(newsletter(12_000))
    print(f"bulk: {len(ids)} ids returned in input order: {ids == sorted(ids)}")

    later = await app.enqueue(
        send_email.new(to="bob@example.com", subject="Reminder").with_options(schedule_in=3600)
    )
    at = datetime(2099, 1, 1, 9, 0, tzinfo=UTC)
    dated = await app.enqueue(
        send_email.new(to="eve@example.com", subject="Happy new year").with_options(scheduled_at=at)
    )
    for scheduled_id in (later, dated):
        found = await app.get_job(scheduled_id)
        assert found is not None
        print(f"scheduled: state={found.state.value} scheduled_at={found.scheduled_at:%Y-%m-%d %H:%M} UTC")

    urgent = send_email.new(to="ops@example.com", subject="Disk full").with_options(
        queue="urgent", priority=0, max_attempts=10, tags=["ops", "ops", " pager "], meta={"ticket": 42}
    )
    found = await app.get_job(await app.enqueue(urgent))
    assert found is not None
    print(f"options: queue={found.queue} tags={list(found.tags)} meta={found.meta}", end=" ")
    print(f"max_attempts={found.max_attempts}")

    # A job for a worker Python does not define (an Elixir or oban-py node runs it).
    elixir = await app.enqueue(JobRequest("MyApp.Workers.Invoice", args={"id": 7}, queue="elixir"))
    print(f"by name: job {elixir} for MyApp.Workers.Invoice")

    print("refused:")
    bad_inputs: list[Callable[[], object]] = [
        lambda: send_email.new(to="x", subject="y").with_options(priority=12),
        lambda: send_email.new(to="x", subject="y").with_options(queue="no spaces"),
        lambda: send_email.new(to="x", subject="y").with_options(scheduled_at=datetime(2030, 1, 1)),
        lambda: send_email.new(to="x", subject="y").with_options(schedule_in=-5),
        lambda: send_email.new(to="x", subject="y").with_options(meta={"raw": b"bytes"}),
        lambda: send_email.new(to="x", subject="y").with_options(delay=5),
        lambda: send_email.new(to="x", subject="y").with_options(
            schedule_in=timedelta(hours=1), scheduled_at=at
        ),
    ]
    for make in bad_inputs:
        try:
            make()
        except UnknownOptionError as exc:
            print(f"  UnknownOptionError: {exc}")
        except ValidationError as exc:
            print(f"  ValidationError: {exc}")

    # A bulk enqueue is all or nothing: the valid first request is not written either.
    valid = send_email.new(to="a", subject="b").with_options(queue="refused")
    try:
        await app.enqueue_many([valid, "not a request"])  # type: ignore[list-item]
    except ValidationError as exc:
        print(f"  ValidationError: {exc}")
    print(f"jobs written by the refused bulk: {len(await app.list_jobs(queues='refused'))}")
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
