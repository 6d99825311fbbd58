"""Defining jobs: ``@job`` on functions, ``@worker`` on classes, defaults, and explicit worker names."""

from __future__ import annotations

import asyncio
import time

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, Job, JobRequest, job, worker


@job  # every option at its default: queue "default", priority 0, 20 attempts
async def ping() -> str:
    return "pong"


@job(queue="media", priority=1, max_attempts=3, tags=["media"], timeout=30, record=True)
def resize(path: str, width: int) -> str:
    """A plain function runs in a thread, so blocking calls never stall the event loop."""
    time.sleep(0.05)
    return f"{path} resized to {width}px"


@worker(queue="billing", max_attempts=5, record=True)
class ChargeCard:
    """A class gets a fresh instance per run; ``process`` receives the stored ``Job``."""

    async def process(self, job: Job) -> str:
        return f"charged {job.args['cents']} cents on attempt {job.attempt}"


# The stored worker name is normally ``module.QualName``. ``name=`` sets it explicitly: a name that
# stays put when code moves, or one that another Oban node uses. A name Python cannot import must
# be given to the app in ``jobs=`` so its nodes can find the code.
@job(name="Billing.Refund", queue="billing", record=True)
async def refund(cents: int) -> str:
    return f"refunded {cents} cents"


async def main() -> None:
    # @worker adds ``new`` to the class at runtime; type checkers do not see it, hence the ignore.
    charge: JobRequest = ChargeCard.new(cents=1200)  # type: ignore[attr-defined]
    requests = [ping.new(), resize.new(path="cat.png", width=64), charge]
    for request in requests:
        print(f"request: worker={request.worker} queue={request.queue} max_attempts={request.max_attempts}")
    # A request by worker name needs no Python code here (e.g. a job an Elixir node runs).
    by_name = JobRequest(worker="Billing.Refund", args={"cents": 300}, queue="billing")

    app = Conveyor(
        DATABASE_URL, prefix=PREFIX, queues={"default": 5, "media": 2, "billing": 2}, jobs=[refund]
    )
    await app.install()
    await app.delete_jobs()  # start from an empty table (PREFIX is the examples' own schema)
    async with app:
        ids = await app.enqueue_many([*requests, by_name])
        for found in await wait_until_final(app, ids):
            result = await app.get_result(found.id) if found.meta.get("recorded") else None
            print(f"ran: {found.worker} -> {found.state.value}, result={result!r}")
    print(f"still a plain function: resize(...) = {resize(path='dog.png', width=32)!r}")


if __name__ == "__main__":
    asyncio.run(main())
