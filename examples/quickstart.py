"""Quick start (the README's): define a job, install the schema, enqueue it, run a node until it is done."""

from __future__ import annotations

import asyncio
import os

from conveyor import Conveyor, job

DATABASE_URL = os.environ.get("CONVEYOR_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
PREFIX = os.environ.get("CONVEYOR_PREFIX", "conveyor_examples")


@job(queue="mail", max_attempts=5)
async def send_welcome(to: str) -> None:
    print(f"sending a welcome email to {to}")


async def main() -> None:
    app = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"mail": 10})
    await app.install()  # creates the tables in schema PREFIX, or does nothing if they are current
    async with app:  # runs a node for the "mail" queue until the block ends
        job_id = await app.enqueue(send_welcome.new(to="ada@example.com"))
        while True:  # wait for the node to run it
            found = await app.get_job(job_id)
            if found is not None and found.state.is_final:
                break
            await asyncio.sleep(0.1)
        print(f"job {job_id} is {found.state.value} after {found.attempt} attempt(s)")


if __name__ == "__main__":
    asyncio.run(main())
