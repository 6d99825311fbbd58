"""Jobs whose stored args may not fit them: the code a node runs when a job was enqueued by another
version of it (a rolling deploy)."""

from __future__ import annotations

import time

from conveyor import job


@job(queue="default", max_attempts=1)
async def render(doc: str) -> str:
    """This version takes no ``fail``: a newer one enqueued with it does not fit here."""
    return doc


@job(queue="default", max_attempts=1)
def render_in_thread(doc: str) -> str:
    time.sleep(0.001)
    return doc


@job(queue="default", max_attempts=1, executor="process")
def render_in_process(doc: str) -> str:
    return doc
