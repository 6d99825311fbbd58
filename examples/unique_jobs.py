"""Unique jobs: a request that would duplicate a stored job is not inserted; enqueue says so.

A "rebuild the search index" button pressed twice, a webhook delivered twice, a nightly report
scheduled by two nodes: each becomes one job. The database enforces it, so it holds across
processes and inside bulk inserts too."""

from __future__ import annotations

import asyncio

from _support import DATABASE_URL, PREFIX

from conveyor import Conveyor, Unique, ValidationError, job


@job(queue="search", unique=True)  # same worker, queue and args within 60 s
async def rebuild_index(site: str) -> None:
    print(f"rebuilding the index of {site}")


# One sync per account at a time, whatever else is in the args, for as long as one waits or runs.
@job(queue="sync", unique=Unique(period=None, keys=["account"], states="incomplete"))
async def sync_account(account: int, reason: str) -> None:
    print(f"syncing account {account} ({reason})")


async def main() -> None:
    app = Conveyor(DATABASE_URL, prefix=PREFIX)
    await app.install()
    await app.delete_jobs()

    first = await app.enqueue(rebuild_index.new(site="docs"))
    again = await app.enqueue(rebuild_index.new(site="docs"))
    other = await app.enqueue(rebuild_index.new(site="blog"))
    print(f"first: new={not first.conflict}; again: conflict={again.conflict}, same job={again == first}")
    print(f"another site: conflict={other.conflict}")

    ids = await app.enqueue_many(sync_account.new(account=n % 3, reason=f"webhook {n}") for n in range(9))
    conflicts = sum(i.conflict for i in ids)
    print(f"9 webhooks for 3 accounts: {len(ids) - conflicts} jobs, {conflicts} conflicts")

    # Options per request, and a job that lets a new twin in once it is cancelled.
    daily = rebuild_index.new(site="shop").with_options(unique={"period": 86_400, "states": "incomplete"})
    kept = await app.enqueue(daily)
    await app.cancel_job(kept)
    replacement = await app.enqueue(daily)
    print(f"after cancelling it, a new one: {replacement != kept and not replacement.conflict}")

    try:
        rebuild_index.new(site="x").with_options(unique={"period": -5})
    except ValidationError as exc:
        print(f"refused: {exc}")
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
