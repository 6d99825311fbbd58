"""oban-py workers for the compatibility tests. Imported only by oban-py (under .venv-oban).

oban-py names a worker ``f"{cls.__module__}.{cls.__qualname__}"`` and resolves a stored name through
its registry, falling back to importing the module part and taking the last dotted part from it. The
driver never imports this module itself, so running these jobs proves the import path works for names
Conveyor wrote.
"""

from __future__ import annotations

from oban import Job, Record, job, worker


@worker(queue="compat")
class EchoWorker:
    """Records what it was given, so the test can read the result back through Conveyor."""

    async def process(self, job: Job) -> Record:
        return Record({"echo": job.args, "attempt": job.attempt})


@job(queue="compat")
def add(a: int, b: int) -> int:
    """A function worker: oban-py passes the args as keyword arguments; a plain return records nothing."""
    return a + b
