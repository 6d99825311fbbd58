"""The command line and the blocking API: install the schema with ``conveyor install``, enqueue from
plain (non-async) code with the ``_sync`` methods, and run a node with ``conveyor start`` until
SIGTERM stops it gracefully."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _support import DATABASE_URL, PREFIX
from cli_jobs import make_thumbnail

from conveyor import Conveyor

HERE = Path(__file__).resolve().parent
# The conveyor command sits beside this interpreter in a virtualenv; else take it from PATH.
CONVEYOR = shutil.which(
    "conveyor", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
)


def main() -> None:
    if CONVEYOR is None:
        sys.exit("the conveyor command is not installed: pip install -e .")
    env = {**os.environ, "CONVEYOR_DATABASE_URL": DATABASE_URL, "CONVEYOR_PREFIX": PREFIX}
    installed = subprocess.run([CONVEYOR, "install"], env=env, check=True, capture_output=True, text=True)
    print(f"$ conveyor install\n{installed.stdout.strip()}")

    app = Conveyor(DATABASE_URL, prefix=PREFIX)  # no queues: this process only enqueues
    app.delete_jobs_sync()
    ids = app.enqueue_many_sync(make_thumbnail.new(path=f"photo{n}.jpg", size=128) for n in range(4))
    print(f"enqueued {len(ids)} jobs for {make_thumbnail.definition.name}")

    # The node runs in its own process, as it would in production. cwd=HERE lets --import find cli_jobs.
    node = subprocess.Popen(
        [CONVEYOR, "start", "--queues", "images:2", "--import", "cli_jobs", "--log-level", "WARNING"],
        cwd=HERE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not all(job.state.is_final for job in app.list_jobs_sync(ids=ids)):
            if time.monotonic() > deadline or node.poll() is not None:
                raise RuntimeError("the node did not run the jobs")
            time.sleep(0.1)
    finally:
        node.send_signal(signal.SIGTERM)  # graceful: running jobs finish, then the node exits
        code = node.wait(timeout=30)
    for n, job_id in enumerate(ids):
        print(f"job {n}: {app.get_result_sync(job_id)}")
    print(f"node stopped on SIGTERM with exit code {code}")
    app.close_sync()


if __name__ == "__main__":
    main()
