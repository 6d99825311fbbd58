"""Ordered locks: entries of one account are applied one at a time, in the order they were enqueued,
on however many nodes; entries of other accounts run beside them."""

from __future__ import annotations

import asyncio

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, job

applied: list[tuple[int, int]] = []  # (account, entry) in the order they ran


@job(queue="ledger")
async def apply_entry(account: int, entry: int) -> None:
    await asyncio.sleep(0.01 * (3 - entry % 3))  # later entries are quicker: order must still hold
    applied.append((account, entry))


async def main() -> None:
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"ledger": 10}, poll_interval=0.1)
    await app.install()
    await app.delete_jobs()
    async with app:
        ids = await app.enqueue_many(
            apply_entry.new(account=account, entry=entry).with_options(lock=f"account-{account}")
            for entry in range(6)
            for account in (1, 2)
        )
        await wait_until_final(app, ids)
    for account in (1, 2):
        order = [entry for acct, entry in applied if acct == account]
        print(f"account {account}: entries applied in order {order}")


if __name__ == "__main__":
    asyncio.run(main())
