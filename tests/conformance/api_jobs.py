"""Jobs the job-API and testing tests run (importable by name, from nodes and drains alike)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pydantic

from conveyor import Cancel, Record, Snooze, current_job, job, progress
from conveyor.current_app import current_app

#: What the jobs saw, by label (one test at a time per process).
SEEN: dict[str, Any] = {}


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Address:
    street: str
    since: date


class Customer(pydantic.BaseModel):
    name: str
    joined: datetime


@job(record=True)
async def typed(
    when: datetime,
    day: date,
    ref: uuid.UUID,
    amount: Decimal,
    color: Color,
    address: Address,
    customer: Customer,
    refs: list[uuid.UUID],
    maybe: date | None = None,
    note: str = "",
) -> dict[str, str]:
    values = {
        "when": when,
        "day": day,
        "ref": ref,
        "amount": amount,
        "color": color,
        "address": address,
        "customer": customer,
        "refs": refs,
        "maybe": maybe,
    }
    SEEN["typed"] = values
    return {name: type(value).__name__ for name, value in values.items()}


@job(record=True)
async def greet(name: str, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


@job(queue="other")
def greet_in_thread(name: str) -> str:
    SEEN.setdefault("threads", []).append(name)
    SEEN.setdefault("events", []).append(("job", threading.get_ident()))
    return name


@job(executor="process", record=True)
def squared(n: int) -> int:
    return n * n


@job()
async def parent(children: int) -> None:
    """Enqueues its children on the app that runs it (the current app of a job)."""
    for n in range(children):
        await child.enqueue(n=n)


@job()
def parent_in_thread(children: int) -> None:
    for n in range(children):
        child.enqueue_sync(n=n)


@job()
async def child(n: int) -> None:
    SEEN.setdefault("children", []).append(n)


@job()
async def which_app() -> None:
    SEEN["app"] = current_app()


@job(max_attempts=3)
async def fails(message: str) -> None:
    raise RuntimeError(message)


@job()
async def exits() -> None:
    raise SystemExit(3)


@job()
async def snoozes() -> Snooze:
    return Snooze(60)


@job()
async def cancels() -> None:
    raise Cancel("not wanted")


@job()
async def records(value: int) -> Record:
    return Record({"value": value})


@job()
async def reports() -> dict[str, Any]:
    context = current_job()
    await progress(phase="one", done=1)
    return {"id": context.id, "attempt": context.attempt, "args": dict(context.job.args)}


@job()
def blocking_reports(pause: float = 0.0) -> str:
    time.sleep(pause)
    return current_job().job.worker


@job()
async def slow(seconds: float) -> None:
    await asyncio.sleep(seconds)


@job(record=True)
async def ids_of(refs: Sequence[uuid.UUID], by_name: Mapping[str, date]) -> list[str]:
    return [type(refs[0]).__name__, type(by_name["a"]).__name__]
