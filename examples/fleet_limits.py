"""Fleet-wide limits: a queue whose jobs call a rate-limited API runs at most 2 at once and starts at
most 10 a second, counted across every node (here one node of 10 slots; more nodes share the same
allowance, since the database enforces it). A second queue builds reports for several tenants: each
tenant has one report running at a time (a partitioned global limit), so a tenant with many reports
never holds the others back."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, job

running = 0
peak = 0
per_tenant: Counter[str] = Counter()
tenant_peaks: Counter[str] = Counter()


@job(queue="partner_api")
async def call_partner(n: int) -> None:
    global running, peak
    running += 1
    peak = max(peak, running)
    try:
        await asyncio.sleep(0.05)
    finally:
        running -= 1


@job(queue="reports")
async def build_report(tenant: str, n: int) -> None:
    per_tenant[tenant] += 1
    tenant_peaks[tenant] = max(tenant_peaks[tenant], per_tenant[tenant])
    try:
        await asyncio.sleep(0.02)
    finally:
        per_tenant[tenant] -= 1


async def main() -> None:
    queues = {
        "partner_api": {"limit": 10, "global_limit": 2, "rate_limit": {"allowed": 10, "period": 1}},
        "reports": {"limit": 10, "global_limit": {"allowed": 1, "partition": {"args": ["tenant"]}}},
    }
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues=queues)
    await app.install()
    await app.delete_jobs()
    async with app:
        ids = await app.enqueue_many(call_partner.new(n=n) for n in range(25))
        # acme enqueues 12 reports first; the others' few still run beside them, one per tenant.
        tenants = ["acme"] * 12 + ["globex", "initech"] * 3
        reports = await app.enqueue_many(build_report.new(tenant=t, n=n) for n, t in enumerate(tenants))
        done = await wait_until_final(app, ids, timeout=60)
        await wait_until_final(app, reports, timeout=60)
        for queue in sorted(await app.queues(), key=lambda q: q.queue):
            global_limit = queue.global_limit.describe() if queue.global_limit else "-"
            rate = queue.rate_limit.describe() if queue.rate_limit else "-"
            print(f"{queue.queue}: local {queue.limit}, global {global_limit}, rate {rate}")
    # Count by the start times the database recorded: the limit is kept by the database's clock.
    starts = sorted(j.attempted_at for j in done if j.attempted_at is not None)
    busiest = max(sum(1 for s in starts if first <= s < first + timedelta(seconds=1)) for first in starts)
    print(f"25 jobs: at most {peak} at once, at most {busiest} started in any second")
    print("reports at once per tenant: " + ", ".join(f"{t} {n}" for t, n in sorted(tenant_peaks.items())))


if __name__ == "__main__":
    asyncio.run(main())
