"""Workflow steps on SQLite: settling suspended steps once their dependencies have finished, and
reading a workflow's steps (``conveyor/workflow.py``). Settling runs inside a write transaction, and
SQLite has one writer at a time, so two steps finishing at once are settled one after the other and
the second sees the first."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.sqlite import foreign
from conveyor.engine.sqlite.core import FILES, SqliteCore, compose
from conveyor.engine.sqlite.database import WriteTx
from conveyor.engine.sqlite.rows import check_now, read_jobs, time_text, utc_clock
from conveyor.job import Job, JobState

FINAL = ("completed", "cancelled", "discarded")
log = logging.getLogger("conveyor.workflows")

#: Suspended steps looked at per sweep page.
SWEEP_BATCH = 500


def _meta(text: Any) -> dict[str, Any]:
    try:
        meta = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _verdict(conn: sqlite3.Connection, workflow: str, meta: dict[str, Any]) -> tuple[bool, Any] | None:
    """None while a dependency is unfinished; else whether the step must be cancelled, and how its
    dependencies ended (None when a failed one cancels it before the others end)."""
    deps = meta.get("deps")
    if not isinstance(deps, list):
        return None
    step_of = FILES["step_of"]
    ignored = {key for key in ("cancelled", "discarded", "deleted") if meta.get(f"ignore_{key}") is True}
    ended = {"completed": 0, "cancelled": 0, "discarded": 0, "deleted": 0}
    # From the last: steps run roughly in the order they were added, so an unfinished one is
    # usually found at once and a fan-in over thousands is not read whole on every settle.
    for name in reversed(deps):
        row = conn.execute(step_of, {"workflow": workflow, "name": str(name)}).fetchone()
        state = "deleted" if row is None else row[0]
        if state not in ended:
            return None
        if state in ("cancelled", "discarded") and state not in ignored:
            return True, None  # a failed dependency cancels the step without waiting for the others
        ended[state] += 1
    failed = any(ended[key] and key not in ignored for key in ("cancelled", "discarded", "deleted"))
    run_if = meta.get("run_if")
    failures = ended["cancelled"] + ended["discarded"] + ended["deleted"]
    if run_if == "any_failed":
        failed = failed or failures == 0
    elif run_if in ("any_discarded", "any_cancelled"):
        failed = failed or ended[run_if.removeprefix("any_")] == 0
    return failed, ended


def _names(value: Any) -> list[str]:
    """A step's ``meta.dependents`` as read from SQLite (JSON text), or [] for anything else."""
    try:
        names = orjson.loads(value) if isinstance(value, str | bytes) else value
    except orjson.JSONDecodeError:
        return []
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def _waiting(tx: WriteTx, found: list[Any]) -> dict[int, tuple[str, dict[str, Any], list[str]]]:
    """The waiting steps to look at after the steps ``found`` (id, workflow, dependents, state):
    those each lists as its dependents (each name looked up once, however many of the steps name
    it: a fan-in's dependencies all do), with how the steps they depend on among ``found`` ended;
    and the steps among ``found`` that wait themselves."""
    conn = tx.conn
    named: dict[tuple[str, str], list[str]] = {}
    for _, workflow, dependents, state in found:
        for name in _names(dependents):
            named.setdefault((workflow, name), []).append(state)
    waiting: dict[int, tuple[str, dict[str, Any], list[str]]] = {}
    for (workflow, name), states in named.items():
        row = conn.execute(FILES["waiting_step_named"], {"workflow": workflow, "name": name}).fetchone()
        if row is not None:
            waiting.setdefault(row[0], (workflow, _meta(row[1]), []))[2].extend(states)
    for job_id, workflow, _, state in found:
        if state == "suspended" and job_id not in waiting:
            row = conn.execute(FILES["meta_of"], {"id": job_id}).fetchone()
            waiting[job_id] = (workflow, _meta(row[0] if row else None), [])
    return waiting


def settle_in(tx: WriteTx, ids: Iterable[int], now: datetime | None) -> dict[int, JobState]:
    """Settle, in ``tx``, the suspended steps among ``ids`` and those depending on the steps among
    them; steps cancelled on the way settle the ones after them too."""
    conn = tx.conn
    clock = time_text(utc_clock(now))
    settled: dict[int, JobState] = {}
    given = list(ids)
    while given:
        found = conn.execute(FILES["step_identity"], {"ids": orjson.dumps(given).decode()}).fetchall()
        found = [row for row in found if isinstance(row[1], str)]
        given = []
        woken: set[str] = set()
        for step_id, (workflow, meta, ended) in _waiting(tx, found).items():
            if not isinstance(meta.get("deps"), list):
                continue
            # A dependency that just failed (unless ignored) cancels the step at once.
            early = any(state in FINAL[1:] and meta.get(f"ignore_{state}") is not True for state in ended)
            verdict = (True, None) if early else _verdict(conn, workflow, meta)
            if verdict is None:
                continue
            failed, counts = verdict
            params = {
                "id": step_id,
                "failed": int(failed),
                "now": clock,
                "counts": None if counts is None else orjson.dumps(counts).decode(),
            }
            row = conn.execute(FILES["settle_step"], params).fetchone()
            if row is None:
                continue
            settled[step_id] = JobState(row[0])
            if row[0] == "cancelled":
                given.append(step_id)
            elif row[0] == "available":
                woken.add(row[1])
        for queue in sorted(woken):
            tx.notify("insert", {"queue": queue}, clock)
    return settled


def settle_beside(tx: WriteTx, ids: Sequence[int], now: datetime | None) -> dict[int, JobState]:
    """``settle_in`` for the steps an ack, a cancel or a retry just changed, in its transaction,
    under a savepoint; what it settled. A settle that fails (a row another client wrote that no
    guard foresaw) is undone and logged (nothing settled), never the change beside it; the leader's
    sweep tries again."""
    tx.conn.execute("SAVEPOINT conveyor_settle")
    try:
        return settle_in(tx, ids, now)
    except sqlite3.Error as exc:
        tx.conn.execute("ROLLBACK TO conveyor_settle")
        log.warning("settling the steps after jobs %s failed (%r); the sweep will", ids[:10], exc)
        return {}
    finally:
        tx.conn.execute("RELEASE conveyor_settle")


def _page(params: dict[str, Any], conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(FILES["sweep_page"], params).fetchall()


class SqliteWorkflows(SqliteCore):
    """``settle_steps``, ``sweep_steps``, ``workflow_jobs``."""

    async def settle_steps(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: Any = None
    ) -> dict[int, JobState]:
        check_now(now)
        if not ids:
            return {}
        if conn is not None:
            return await foreign.write_in_caller_tx(conn, lambda tx: settle_in(tx, ids, now))
        return await self.database.write(lambda tx: settle_in(tx, ids, now))

    async def sweep_steps(self, *, now: datetime | None = None, limit: int = 10_000) -> dict[int, JobState]:
        check_now(now)
        settled: dict[int, JobState] = {}
        after, seen = 0, 0
        while seen < limit:
            page = await self.database.read(functools.partial(_page, {"after": after, "limit": SWEEP_BATCH}))
            if not page:
                break
            ids = [row[0] for row in page]
            settled |= await self.database.write(functools.partial(settle_in, ids=ids, now=now))
            after, seen = ids[-1], seen + len(ids)
            if len(page) < SWEEP_BATCH:
                break
        return settled

    async def hold_steps(self, ids: Sequence[int], *, conn: Any = None) -> list[int]:
        given = orjson.dumps(list(ids)).decode()

        def run(tx: WriteTx) -> list[int]:
            return sorted(row[0] for row in tx.conn.execute(FILES["hold_jobs"], {"ids": given}).fetchall())

        if conn is not None:
            return await foreign.write_in_caller_tx(conn, run)
        return await self.database.write(run)

    async def add_dependents(
        self, workflow_id: str, added: Mapping[str, Sequence[str]], *, conn: Any = None
    ) -> None:
        def run(tx: WriteTx) -> None:
            for name, names in added.items():
                row = tx.conn.execute(FILES["step_id"], {"workflow": workflow_id, "name": name}).fetchone()
                if row is not None:
                    params = {"id": row[0], "names": orjson.dumps(list(names)).decode()}
                    tx.conn.execute(FILES["add_dependents"], params)

        if conn is not None:
            await foreign.write_in_caller_tx(conn, run)
        else:
            await self.database.write(run)

    async def workflow_jobs(self, workflow_id: str) -> list[Job]:
        statement = compose("workflow_jobs", "")
        rows = await self.database.read(lambda c: c.execute(statement, {"workflow": workflow_id}).fetchall())
        return read_jobs(rows)
