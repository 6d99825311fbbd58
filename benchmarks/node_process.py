"""One node process of the ``drain-nodes`` scenario (``nodes.py`` starts it; not a scenario itself).

``python benchmarks/node_process.py DSN PREFIX CONCURRENCY RAN_FILE``: starts a node with default
settings and ``queues={"default": CONCURRENCY}`` on the schema ``PREFIX``, prints ``ready``, then
``written N`` each time its acker's count of written acks changes (looked at every few
milliseconds). When its standard input closes it stops gracefully, writes the ``n`` of every
``bench_jobs.tally`` job it ran to RAN_FILE (JSON) and exits.
"""

from __future__ import annotations

import asyncio
import json
import sys

import bench_jobs

from conveyor import Conveyor

#: Seconds between two looks at the acker's count.
REPORT_EVERY = 0.003


async def report(app: Conveyor) -> None:
    assert app.node is not None
    acker = app.node.acker
    last = -1
    while True:
        if acker.written != last:
            last = acker.written
            print(f"written {last}", flush=True)
        await asyncio.sleep(REPORT_EVERY)


async def main(dsn: str, prefix: str, concurrency: int) -> None:
    app = Conveyor(dsn, prefix=prefix, queues={"default": concurrency})
    loop = asyncio.get_running_loop()
    async with app:
        print("ready", flush=True)
        reporter = asyncio.create_task(report(app))
        await loop.run_in_executor(None, sys.stdin.read)  # until the scenario closes our stdin
        reporter.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    with open(sys.argv[4], "w") as out:
        json.dump(bench_jobs.RAN, out)
