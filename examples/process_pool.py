"""CPU-bound jobs in a pool of worker processes (``executor="process"``).

Worker processes are fresh interpreters, not forks: one that gets a job defined in this script runs the
script again (as ``__mp_main__``) to find its code, so everything that starts work must sit under
``if __name__ == "__main__":``.
"""

from __future__ import annotations

import asyncio
import os

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Conveyor, job


@job(queue="cpu", executor="process", record=True)
def count_primes(below: int) -> dict[str, int]:
    """Pure Python number crunching: in a thread it would hold the GIL, in a process it does not."""
    sieve = bytearray([1]) * below
    sieve[0:2] = b"\x00\x00"
    for n in range(2, int(below**0.5) + 1):
        if sieve[n]:
            sieve[n * n :: n] = bytearray(len(range(n * n, below, n)))
    return {"below": below, "primes": sum(sieve), "pid": os.getpid()}


async def main() -> None:
    # Two processes serve the queue; its limit of 4 lets four jobs be claimed at once.
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"cpu": 4}, processes=2)
    await app.install()
    await app.delete_jobs()
    async with app:
        ids = await app.enqueue_many(
            count_primes.new(below=n) for n in (10_000, 100_000, 1_000_000, 2_000_000)
        )
        jobs = await wait_until_final(app, ids)
        results = [await app.get_result(j.id) for j in jobs]
    for result in results:
        print(f"primes below {result['below']:>9,}: {result['primes']:,}")
    pids = {result["pid"] for result in results}
    print(f"worker processes used: {len(pids)} (pool of 2); any in this process: {os.getpid() in pids}")


if __name__ == "__main__":  # required: a worker process runs this file again to find count_primes
    asyncio.run(main())
