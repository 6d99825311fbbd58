"""The job module of ``cpu-user``: shaped like a user's, it imports heavy libraries (psycopg,
pydantic) at the top, as a module of an application's jobs does, and its job does pure-Python work
(``crunch``: ``loops`` additions and multiplications, validated through a pydantic model first).
A worker process must import all of it before its first job: that is what the scenario times.
"""

from __future__ import annotations

import psycopg
import pydantic

from conveyor import job

#: Kept referenced, as an application would use them; the point is the imports' cost.
DRIVER = psycopg.__version__


class Work(pydantic.BaseModel):
    """A job's arguments, validated as an application would validate them."""

    loops: int = pydantic.Field(ge=0)


def work(loops: int) -> int:
    """The job's work, callable without Conveyor (the serial and plain-pool sides call it)."""
    total = 0
    for i in range(Work(loops=loops).loops):
        total += i * i
    return total


@job(queue="cpu")
def crunch(loops: int) -> int:
    """The job: ``work`` in a process of the pool (its queue's executor is ``process``)."""
    return work(loops)
