"""How an attempt ends: return, Record, Snooze, Cancel, Discard, an exception (retried with backoff),
and a timeout. ``current_job()`` tells the code which job and attempt it is running."""

from __future__ import annotations

import asyncio

from _support import DATABASE_URL, PREFIX, wait_until_final

from conveyor import Cancel, Conveyor, Discard, Job, Record, Snooze, current_job, job


@job(record=True)
def add(a: int, b: int) -> int:
    return a + b  # record=True stores the return value


@job
async def lookup(key: str) -> Record:
    return Record({"key": key, "found": True})  # Record stores a value for this run only


@job
async def wait_for_stock(sku: str) -> Snooze | None:
    snoozed = current_job().job.meta.get("snoozed", 0)  # how often this job has snoozed so far
    if snoozed < 2:
        return Snooze(0.2)  # run again in 0.2 s; the attempt is given back
    return None


@job
async def notify_user(user_id: int) -> Cancel | None:
    if user_id < 0:
        return Cancel(f"user {user_id} deleted their account")
    return None


def parse(payload: str) -> int:
    if not payload.isdigit():
        raise Discard(f"payload {payload!r} is not a number; retrying will not help")
    return int(payload)


@job
def import_row(payload: str) -> None:
    parse(payload)  # outcomes may also be raised, from any depth


def quick_retry(job: Job) -> float:
    """Seconds before the next attempt (the default is exponential: 15 s + 2^attempt)."""
    return 0.1 * job.attempt


@job(max_attempts=3, backoff=quick_retry)
async def flaky_upload(name: str) -> Record:
    attempt = current_job().attempt
    if attempt < 3:
        raise ConnectionError(f"upload of {name} dropped on attempt {attempt}")
    return Record(f"uploaded {name} on attempt {attempt}")


@job(max_attempts=2, backoff=quick_retry)
async def always_fails() -> None:
    raise ValueError("bad configuration")


@job(timeout=0.2, max_attempts=1)
async def too_slow() -> None:
    await asyncio.sleep(10)


async def main() -> None:
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"default": 10}, poll_interval=0.1, stage_interval=0.1)
    await app.install()
    await app.delete_jobs()
    async with app:
        ids = await app.enqueue_many(
            [
                add.new(a=2, b=3),
                lookup.new(key="k1"),
                wait_for_stock.new(sku="B-42"),
                notify_user.new(user_id=-1),
                import_row.new(payload="12a"),
                flaky_upload.new(name="photo.jpg"),
                always_fails.new(),
                too_slow.new(),
            ]
        )
        for found in await wait_until_final(app, ids):
            name = found.worker.rsplit(".", 1)[-1]
            line = f"{name:<15} {found.state.value:<10} attempt={found.attempt}"
            if found.meta.get("recorded"):
                line += f" result={await app.get_result(found.id)!r}"
            if "snoozed" in found.meta:
                line += f" snoozed={found.meta['snoozed']}"
            if found.errors:
                last = found.errors[-1]["error"].strip().splitlines()[-1]
                line += f" errors={len(found.errors)} last={last!r}"
            print(line)


if __name__ == "__main__":
    asyncio.run(main())
