"""The plain side of ``cpu-user``: what a user would write instead of a node, run as its own script.

``python cpu_user_pool.py SIZE JOBS LOOPS`` imports the job module (``user_jobs``, as a program
using it would have), then times a ``concurrent.futures.ProcessPoolExecutor`` of SIZE spawned
processes, started cold, mapping ``user_jobs.work(LOOPS)`` over JOBS jobs: from the pool's creation
to the last result. Prints the seconds. Its own script, so the spawned processes run this small
``__main__`` again (as ``multiprocessing`` does), not the benchmark runner's.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import user_jobs


def main() -> None:
    size, jobs, loops = (int(arg) for arg in sys.argv[1:4])
    started = time.perf_counter()
    with ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(user_jobs.work, [loops] * jobs))
        seconds = time.perf_counter() - started
    assert len(results) == jobs
    print(seconds)


if __name__ == "__main__":
    main()
