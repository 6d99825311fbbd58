"""Run in other processes by the PostgreSQL unique-order test (tests/test_unique_order.py): each writer
enqueues the same unique jobs in ``enqueue_many`` batches, in an order of its own."""

from __future__ import annotations

import asyncio
import multiprocessing.queues
import multiprocessing.synchronize
import random

import psycopg

from conveyor import Conveyor, JobRequest
from conveyor.engine.postgres import inserter

#: A writer's report: each unique request's (n, id, conflict) it got back, and the errors it met.
Report = tuple[list[tuple[int, int, bool]], list[str]]


def round_requests(writer: int, round_: int, keys: int) -> list[JobRequest]:
    """Round ``round_``'s unique requests (each set of keys serves two rounds: new, then stored) and
    plain ones of this writer's own, in an order of this writer's own."""
    first = round_ // 2 * keys
    batch = [
        JobRequest("tests.race.Job", args={"n": n}, unique={"period": None})
        for n in range(first, first + keys)
    ]
    batch += [JobRequest("tests.race.Job", args={"plain": [writer, round_, i]}) for i in range(keys // 10)]
    random.Random(round_ * 100 + writer).shuffle(batch)
    return batch


async def _shuffled_rounds(
    dsn: str,
    prefix: str,
    writer: int,
    shape: tuple[int, int, int],
    caller: bool,
    chunk: int | None,
    barrier: multiprocessing.synchronize.Barrier,
) -> Report:
    rounds, keys, size = shape
    if chunk is not None:  # the insert of several statements, as a batch past INSERT_CHUNK makes it
        inserter.INSERT_CHUNK = chunk
    app = Conveyor(dsn, prefix=prefix)
    conn = await psycopg.AsyncConnection.connect(dsn) if caller else None
    got: list[tuple[int, int, bool]] = []
    errors: list[str] = []
    try:
        for round_ in range(rounds):
            requests = round_requests(writer, round_, keys)
            barrier.wait(60)  # every writer begins each round at once
            for start in range(0, len(requests), size):
                batch = requests[start : start + size]
                try:
                    ids = await app.enqueue_many(batch, conn=conn)
                    if conn is not None:
                        await conn.commit()  # the caller's transaction held its keys until here
                except Exception as exc:
                    errors.append(f"round {round_}: {type(exc).__name__}: {exc}")
                    if conn is not None:
                        await conn.rollback()
                    continue
                got += [
                    (r.args["n"], int(i), i.conflict)
                    for r, i in zip(batch, ids, strict=True)
                    if "n" in r.args
                ]
    finally:
        if conn is not None:
            await conn.close()
        await app.close()
    return got, errors


def insert_shuffled_rounds(
    dsn: str,
    prefix: str,
    writer: int,
    shape: tuple[int, int, int],
    caller: bool,
    chunk: int | None,
    barrier: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[tuple[int, Report | str]],
) -> None:
    """PostgreSQL: ``rounds`` rounds of ``keys`` unique requests (``shape``: rounds, keys, batch
    size) in this writer's own order, in ``enqueue_many`` batches of ``size``, each in a transaction of
    its own or (``caller``) in the caller's, committed after it; ``chunk`` makes each batch several
    statements. Put this writer's number and its report (or what ended it)."""
    try:
        results.put(
            (writer, asyncio.run(_shuffled_rounds(dsn, prefix, writer, shape, caller, chunk, barrier)))
        )
    except BaseException as exc:
        results.put((writer, f"{type(exc).__name__}: {exc}"))
