"""Fleet-wide limits: a queue whose jobs call a rate-limited API runs at most 2 at once and starts at
most 10 a second, counted across every node (here one node of 10 slots; more nodes share the same
allowance, since the database enforces it)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, job

running = 0
peak = 0


@job(queue="partner_api")
async def call_partner(n: int) -> None:
    global running, peak
    running += 1
    peak = max(peak, running)
    try:
        await asyncio.sleep(0.05)
    finally:
        running -= 1


async def main() -> None:
    limits = {"limit": 10, "global_limit": 2, "rate_limit": {"allowed": 10, "period": 1}}
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"partner_api": limits})
    await app.install()
    await app.delete_jobs()
    async with app:
        ids = await app.enqueue_many(call_partner.new(n=n) for n in range(25))
        done = await wait_until_final(app, ids, timeout=60)
        (queue,) = [q for q in await app.queues() if q.queue == "partner_api"]
        print(f"queue limits: local {queue.limit}, global {queue.global_limit}, rate {queue.rate_limit}")
    # Count by the start times the database recorded: the limit is kept by the database's clock.
    starts = sorted(j.attempted_at for j in done if j.attempted_at is not None)
    busiest = max(sum(1 for s in starts if first <= s < first + timedelta(seconds=1)) for first in starts)
    print(f"25 jobs: at most {peak} at once, at most {busiest} started in any second")


if __name__ == "__main__":
    asyncio.run(main())
