"""One node process of the ``drain-nodes`` scenario (``nodes.py`` starts it; not a scenario itself).

``python benchmarks/node_process.py DSN PREFIX CONCURRENCY RAN_FILE``: starts a node with default
settings and ``queues={"default": CONCURRENCY}`` on the schema ``PREFIX``, prints ``ready``, then
``written N`` after each batch of acks its acker writes (N: its acks written so far; an ack hook, so
nothing polls). When its standard input closes it prints ``cpu S``, the CPU seconds it spent since it
was ready, stops gracefully, writes the ``n`` of every ``bench_jobs.tally`` job it ran to RAN_FILE
(JSON) and exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence

import bench_jobs

from conveyor import Conveyor
from conveyor.acks import Ack


async def main(dsn: str, prefix: str, concurrency: int) -> None:
    app = Conveyor(dsn, prefix=prefix, queues={"default": concurrency})
    loop = asyncio.get_running_loop()
    async with app:
        assert app.node is not None
        acker = app.node.acker

        async def report(acks: Sequence[Ack]) -> None:
            print(f"written {acker.written}", flush=True)

        app.node.after_ack(report)
        print("ready", flush=True)
        ready_cpu = time.process_time()
        await loop.run_in_executor(None, sys.stdin.read)  # until the scenario closes our stdin
        print(f"cpu {time.process_time() - ready_cpu:.3f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    with open(sys.argv[4], "w") as out:
        json.dump(bench_jobs.RAN, out)
