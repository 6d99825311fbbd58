"""What the SQLite engine tests run in other OS processes (spawned, so they import this module).

Each function opens its own ``SqliteEngine`` on the test's database file, as a second node on the
same machine would.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from conveyor.engine.sqlite import SqliteEngine


def fetch_all(path: str, queue: str, batch: int, go: Any, results: Any, ready: Any = None) -> None:
    """Say ``ready`` once open, wait for ``go``, then claim jobs of ``queue`` in batches until none
    are left; report the ids."""

    async def run() -> list[int]:
        engine = SqliteEngine(path)
        await engine.open()
        try:
            claimed: list[int] = []
            if ready is not None:
                ready.put(True)
            go.wait()
            empty = 0
            while empty < 3:  # a few empty fetches in a row: the queue is drained
                jobs = await engine.fetch_jobs(queue, batch, node="proc", producer="p")
                claimed += [job.id for job in jobs]
                empty = 0 if jobs else empty + 1
            return claimed
        finally:
            await engine.close()

    results.put(asyncio.run(run()))


def notify_when_told(path: str, channel: str) -> None:
    """Read a line from stdin, notify ``channel`` with the line's text, print the send time."""

    async def run() -> None:
        engine = SqliteEngine(path)
        await engine.open()
        try:
            print("ready", flush=True)
            for line in sys.stdin:
                text = line.strip()
                if not text:
                    break
                sent = time.time()
                await engine.notify(channel, {"text": text, "sent": sent})
                print(f"sent {sent}", flush=True)
        finally:
            await engine.close()

    asyncio.run(run())


if __name__ == "__main__":
    notify_when_told(sys.argv[1], sys.argv[2])
