"""Retention rules: discarded jobs are kept 30 days, the report worker's jobs one hour, the newest 3
of the mail queue, everything else one day. The example runs some jobs, asks what a prune would delete
as time goes by (``count_prunable`` changes nothing), then prunes as if two days had passed."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, Discard, PruneRule, job


@job(queue="mail")
async def send_newsletter(n: int) -> None:
    pass


@job(queue="billing")
async def charge_card(n: int) -> Discard:
    return Discard("the card was declined")


@job(queue="reports")
async def build_report(n: int) -> None:
    pass


@job(queue="default")
async def resize_image(n: int) -> None:
    pass


RULES = [
    PruneRule(states="discarded", max_age="30d"),
    PruneRule(worker=build_report.definition.name, max_age="1h"),
    PruneRule(queue="mail", max_rows=3),
]


async def main() -> None:
    queues = {"mail": 5, "billing": 5, "reports": 5, "default": 5}
    # prune=False: this example prunes when it says so, not the node's leader in the background.
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues=queues, prune=False, prune_rules=RULES)
    await app.install()
    await app.delete_jobs()
    async with app:
        requests = [send_newsletter.new(n=n) for n in range(5)]
        requests += [charge_card.new(n=n) for n in range(2)]
        requests += [build_report.new(n=n) for n in range(2)] + [resize_image.new(n=n) for n in range(2)]
        await wait_until_final(app, await app.enqueue_many(requests))
    now = datetime.now(UTC)
    for later in (timedelta(0), timedelta(hours=2), timedelta(days=2), timedelta(days=31)):
        due = await app.count_prunable(now=now + later)
        print(f"after {later}: {due.count} to prune {due.by_state()}")
    pruned = await app.prune(now=now + timedelta(days=2))
    left = Counter(j.worker.rsplit(".", 1)[-1] for j in await app.list_jobs())
    print(f"pruned {pruned.count}; kept " + ", ".join(f"{n} {name}" for name, n in sorted(left.items())))
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
