"""The Conveyor demo: define jobs, enqueue them, run a node, print what happened.

Run it with `bash scripts/demo.sh`, or directly: `python examples/demo.py [DATABASE_URL]`. With no URL
it uses a SQLite file (conveyor-demo.db in the working directory): no server needed. Pass a
postgresql:// URL (or set CONVEYOR_DATABASE_URL) to run the same demo on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from conveyor import Conveyor, Record, Snooze, job

DATABASE_URL = os.environ.get("CONVEYOR_DATABASE_URL", "sqlite:///conveyor-demo.db")
PREFIX = os.environ.get("CONVEYOR_PREFIX", "conveyor_demo")  # PostgreSQL only: the schema to use


@job(queue="mail", max_attempts=3)
async def send_welcome(to: str) -> None:
    """An async job: runs on the event loop."""
    await asyncio.sleep(0.05)
    print(f"  [mail] welcome email sent to {to}")


@job(queue="reports", record=True)
def build_report(rows: int) -> dict[str, int]:
    """A blocking job: runs in a thread so the loop never stalls. Its return value is recorded."""
    time.sleep(0.1)
    return {"rows": rows, "total": sum(range(rows))}


@job(queue="default", max_attempts=2, backoff=lambda job: 0.5)
async def flaky(attempt_to_succeed: int) -> Record:
    """Fails on its first attempt, succeeds on the retry."""
    from conveyor import current_job

    attempt = current_job().attempt
    if attempt < attempt_to_succeed:
        raise RuntimeError(f"simulated failure on attempt {attempt}")
    return Record(f"succeeded on attempt {attempt}")


@job(queue="default")
async def wait_a_bit() -> Snooze | None:
    """Snoozes once (without spending an attempt), then completes."""
    from conveyor import current_job

    return Snooze(0.5) if not current_job().meta.get("snoozed") else None


async def main(url: str) -> None:
    app = Conveyor(
        url,
        prefix=PREFIX if url.startswith("postgres") else "public",
        queues={"default": 5, "mail": 5, "reports": 2},
        poll_interval=0.2,
        stage_interval=0.2,
    )
    await app.install()  # idempotent: creates or upgrades the tables
    await app.delete_jobs()  # start the demo from a clean slate
    async with app:
        print("Enqueueing jobs...")
        ids = await app.enqueue_many(
            [
                send_welcome.new(to="ada@example.com"),
                send_welcome.new(to="grace@example.com"),
                build_report.new(rows=1000),
                flaky.new(attempt_to_succeed=2),
                wait_a_bit.new(),
            ]
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            jobs = [await app.get_job(i) for i in ids]
            if all(j is not None and j.state.is_final for j in jobs):
                break
            await asyncio.sleep(0.1)
        print("\nWhat happened:")
        for job_id in ids:
            found = await app.get_job(job_id)
            assert found is not None
            line = f"  job {found.id:>5} {found.worker.rsplit('.', 1)[-1]:<13} {found.state.value:<10}"
            line += f" attempts={found.attempt}"
            if found.meta.get("recorded"):
                line += f" result={await app.get_result(found.id)!r}"
            if found.meta.get("snoozed"):
                line += f" snoozed={found.meta['snoozed']}"
            if found.errors:
                line += f" errors={len(found.errors)}"
            print(line)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else DATABASE_URL))
