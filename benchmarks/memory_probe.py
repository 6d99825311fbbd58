"""The processes whose memory the guards (``memory.py``) measure, each alone in its interpreter so
nothing of the benchmark harness counts, and how RSS is read (``/proc``).

``python benchmarks/memory_probe.py node --dsn DSN --prefix P --queue NAME=LIMIT [...]``: a node on
the schema ``P`` (jobs from ``bench_jobs``) that prints ``ready`` once started and stops when its
standard input closes.

``python benchmarks/memory_probe.py enqueue --dsn DSN --prefix P --jobs N``: one ``enqueue_many`` of
``N`` requests from a generator; prints one JSON object: the RSS before, its peak during the call
(sampled every 5 ms), and the size of the ids the call returned (a ``JobIds``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sys
import threading
import time
from typing import Any

from conveyor import Conveyor, JobIds

MB = 1024 * 1024


def _status_kb(pid: int | str, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"no {field} in /proc/{pid}/status")


def rss_mb(pid: int | str = "self") -> float:
    """The resident set size of process ``pid`` now, in MiB."""
    return _status_kb(pid, "VmRSS") / 1024


def peak_rss_mb(pid: int | str = "self") -> float:
    """The highest resident set size process ``pid`` has had, in MiB."""
    return _status_kb(pid, "VmHWM") / 1024


def ids_mb(ids: JobIds) -> float:
    """What the ids returned occupy (a ``JobIds``: its array of 8 bytes an id and its conflict
    bitmap, which ``sys.getsizeof`` counts), in MiB."""
    return sys.getsizeof(ids) / MB


async def run_node(dsn: str, prefix: str, queues: dict[str, int], settings: dict[str, Any]) -> None:
    # The soak fails jobs on purpose: their log lines would only bury the figures.
    logging.getLogger("conveyor").setLevel(logging.CRITICAL)
    app = Conveyor(dsn, prefix=prefix, queues=queues, **settings)
    await app.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await app.stop()


async def run_enqueue(dsn: str, prefix: str, jobs: int) -> dict[str, Any]:
    from common import job_requests

    app = Conveyor(dsn, prefix=prefix)
    try:
        await app.enqueue_many(job_requests(1_000, queue="warmup"))  # pool, caches, statements
        gc.collect()
        before = rss_mb()
        peak = before
        sampling = True

        def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, rss_mb())
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        ids = await app.enqueue_many(job_requests(jobs))
        seconds = time.perf_counter() - started
        sampling = False
        sampler.join()
        peak = max(peak, rss_mb())
        if len(ids) != jobs:
            raise AssertionError(f"enqueue_many returned {len(ids)} ids for {jobs} requests")
        return {
            "jobs": jobs,
            "seconds": round(seconds, 2),
            "rss_before_mb": round(before, 1),
            "rss_peak_mb": round(peak, 1),
            "ids_mb": round(ids_mb(ids), 2),
        }
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("node", "enqueue"))
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--queue", action="append", default=[], metavar="NAME=LIMIT")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=JSON")
    args = parser.parse_args()
    if args.what == "enqueue":
        print(json.dumps(asyncio.run(run_enqueue(args.dsn, args.prefix, args.jobs))), flush=True)
        return
    queues = {name: int(limit) for name, _, limit in (q.partition("=") for q in args.queue)}
    settings = {name: json.loads(value) for name, _, value in (s.partition("=") for s in args.setting)}
    asyncio.run(run_node(args.dsn, args.prefix, queues, settings))


if __name__ == "__main__":
    main()
