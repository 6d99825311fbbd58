"""Workflow steps on MySQL/MariaDB: settling suspended steps once their dependencies have finished,
and reading a workflow's steps (``conveyor/workflow.py``).

A settle runs in a transaction of its own after the change that ended the dependencies committed
(as on PostgreSQL), READ COMMITTED: each suspended step it looks at is locked first (``FOR UPDATE``),
then the states of its dependencies are read as committed. Of two steps ending at once on two nodes,
the settle that reads last sees both; a concurrent settle of the same step waits for the lock, then
finds it settled. Settles that lock steps in opposite orders may deadlock: the victim runs again.

With ``conn`` (a caller's transaction: ``caller.joined``) ``settle_steps``, ``hold_steps`` and
``add_dependents`` run in the caller's transaction, as do the settles after ``cancel_jobs`` and
``retry_jobs`` given one: they see what that transaction wrote, and the caller's commit publishes
their changes with it. Such a settle reads at the caller's isolation level (REPEATABLE READ by
default: its snapshot), so a dependency another node ended meanwhile may be missed; the leader's
sweep settles that step. It is not run again on a deadlock, which rolls back the caller's whole
transaction: the error is the caller's to see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.mysql import fanout
from conveyor.engine.mysql.caller import joined
from conveyor.engine.mysql.connect import DEADLOCK, LOCK_WAIT_TIMEOUT, rerun_victims
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import check_now, read_jobs, stored_json, utc_clock
from conveyor.job import Job, JobState

log = logging.getLogger("conveyor.workflows")

FINAL = ("completed", "cancelled", "discarded")
#: Suspended steps looked at per sweep page.
SWEEP_BATCH = 500
#: Deadlock victim, lock wait timeout: the settle runs again, up to ``connect.VICTIM_TRIES`` times.
RETRIED = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT})


def _meta(value: Any) -> dict[str, Any]:
    meta = stored_json(value)
    return meta if isinstance(meta, dict) else {}


def _names(value: Any) -> list[str]:
    names = stored_json(value)
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def verdict(meta: dict[str, Any], states: Mapping[str, str]) -> tuple[bool, Any] | None:
    """None while a dependency is unfinished; else whether the step must be cancelled, and how its
    dependencies ended (None when a failed one cancels it before the others end). ``states``: the
    state of each dependency stored (a missing one was deleted)."""
    deps = [str(name) for name in meta.get("deps", ())]
    ignored = {key for key in ("cancelled", "discarded", "deleted") if meta.get(f"ignore_{key}") is True}
    ended = {"completed": 0, "cancelled": 0, "discarded": 0, "deleted": 0}
    unfinished = False
    for name in deps:
        state = states.get(name, "deleted")
        if state not in ended:
            unfinished = True
            continue
        if state in ("cancelled", "discarded") and state not in ignored:
            return True, None  # a failed dependency cancels the step without waiting for the others
        ended[state] += 1
    if unfinished:
        return None
    failed = any(ended[key] and key not in ignored for key in ("cancelled", "discarded", "deleted"))
    run_if = meta.get("run_if")
    failures = ended["cancelled"] + ended["discarded"] + ended["deleted"]
    if run_if == "any_failed":
        failed = failed or failures == 0
    elif run_if in ("any_discarded", "any_cancelled"):
        failed = failed or ended[run_if.removeprefix("any_")] == 0
    return failed, ended


class MysqlWorkflows(MysqlCore):
    """``settle_steps``, ``sweep_steps``, ``hold_steps``, ``add_dependents``, ``workflow_jobs``."""

    async def settle_steps(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: Any = None
    ) -> dict[int, JobState]:
        check_now(now)
        given = [int(i) for i in ids]
        if not given:
            return {}
        if conn is not None:
            async with joined(conn) as cursor:
                return await self._settle_in(cursor, given, now)

        async def settle() -> dict[int, JobState]:
            async with self.transaction(keyed=True) as cursor:
                return await self._settle_in(cursor, given, now)

        return await rerun_victims(settle, codes=RETRIED)

    async def settle_after(
        self, ids: Sequence[int], now: datetime | None, conn: Any = None
    ) -> dict[int, JobState]:
        """``settle_steps`` after a change to ``ids`` committed (an ack, a cancel, a retry), or was
        written in the caller's transaction on ``conn``; what it settled. A failure is logged, not
        raised: the change stands, the leader's sweep settles. On ``conn`` it is raised: the
        caller's transaction is the caller's to end."""
        try:
            return await self.settle_steps(ids, now=now, conn=conn)
        except Exception as exc:
            if conn is not None:
                raise
            log.warning("settling the steps after jobs %s failed (%r); the sweep will", list(ids)[:10], exc)
            return {}

    async def _settle_in(self, cursor: Any, ids: list[int], now: datetime | None) -> dict[int, JobState]:
        clock = utc_clock(now)
        files = self.files
        settled: dict[int, JobState] = {}
        given = ids
        while given:
            await cursor.execute(files["step_identity"], {"ids": tuple(given)})
            found = await cursor.fetchall()
            given = []
            woken: set[str] = set()
            for step_id, workflow, meta, queue, scheduled_at, ended in await self._waiting(cursor, found):
                if not isinstance(meta.get("deps"), list):
                    continue
                # A dependency that just failed (unless ignored) cancels the step at once.
                early = any(state in FINAL[1:] and meta.get(f"ignore_{state}") is not True for state in ended)
                outcome = (True, None) if early else await self._verdict(cursor, workflow, meta)
                if outcome is None:
                    continue
                failed, counts = outcome
                state = "cancelled" if failed else "scheduled" if scheduled_at > clock else "available"
                written = meta if counts is None else {**meta, "deps_ended": counts}
                params = {"id": step_id, "state": state, "now": clock, "meta": orjson.dumps(written).decode()}
                await cursor.execute(files["settle_step"], params)
                if not cursor.rowcount:
                    continue
                settled[step_id] = JobState(state)
                if state == "cancelled":
                    given.append(step_id)
                elif state == "available":
                    woken.add(queue)
            for queue in sorted(woken):
                await fanout.notify(cursor, files, "insert", {"queue": queue})
        return settled

    async def _waiting(self, cursor: Any, found: Iterable[Any]) -> list[tuple[Any, ...]]:
        """The suspended steps to look at after the steps ``found`` (id, workflow, dependents,
        state), locked: those each lists as its dependents (each name looked up once), with how the
        steps they depend on among ``found`` ended; and the steps among ``found`` that wait."""
        files = self.files
        named: dict[tuple[str, str], list[str]] = {}
        own: list[tuple[int, str]] = []
        for job_id, workflow, dependents, state in found:
            for name in _names(dependents):
                named.setdefault((workflow, name), []).append(state)
            if state == "suspended":
                own.append((int(job_id), workflow))
        waiting: dict[int, tuple[Any, ...]] = {}
        for (workflow, name), states in sorted(named.items()):
            await cursor.execute(files["waiting_step_named"], {"workflow": workflow, "name": name})
            for job_id, meta, queue, scheduled_at in await cursor.fetchall():
                entry = waiting.setdefault(int(job_id), (workflow, _meta(meta), queue, scheduled_at, []))
                entry[4].extend(states)
        for job_id, workflow in own:
            if job_id not in waiting:
                await cursor.execute(files["waiting_step"], {"id": job_id})
                for _, meta, queue, scheduled_at in await cursor.fetchall():
                    waiting[job_id] = (workflow, _meta(meta), queue, scheduled_at, [])
        return [(job_id, *entry) for job_id, entry in sorted(waiting.items())]

    async def _verdict(self, cursor: Any, workflow: str, meta: dict[str, Any]) -> tuple[bool, Any] | None:
        names = sorted({str(name) for name in meta["deps"]})
        states: dict[str, str] = {}
        if names:
            await cursor.execute(self.files["step_states"], {"workflow": workflow, "names": tuple(names)})
            states = {str(name): str(state) for name, state in await cursor.fetchall()}
        return verdict(meta, states)

    async def sweep_steps(self, *, now: datetime | None = None, limit: int = 10_000) -> dict[int, JobState]:
        check_now(now)
        settled: dict[int, JobState] = {}
        after, seen = 0, 0
        while seen < limit:
            async with self.reading() as cursor:
                await cursor.execute(self.files["sweep_page"], {"after": after, "limit": SWEEP_BATCH})
                ids = [int(row[0]) for row in await cursor.fetchall()]
            if not ids:
                break
            settled |= await self.settle_steps(ids, now=now)
            after, seen = ids[-1], seen + len(ids)
            if len(ids) < SWEEP_BATCH:
                break
        return settled

    async def hold_steps(self, ids: Sequence[int], *, conn: Any = None) -> list[int]:
        given = tuple(int(i) for i in ids)
        if not given:
            return []
        async with self.within(conn) as cursor:
            await cursor.execute(self.files["hold_targets"], (given,))
            held = sorted(int(row[0]) for row in await cursor.fetchall())
            if held:
                await cursor.execute(self.files["hold_jobs"], (tuple(held),))
        return held

    async def add_dependents(
        self, workflow_id: str, added: Mapping[str, Sequence[str]], *, conn: Any = None
    ) -> None:
        files = self.files
        async with self.within(conn) as cursor:
            for name, names in sorted(added.items()):
                await cursor.execute(files["step_meta"], {"workflow": workflow_id, "name": name})
                for job_id, stored in await cursor.fetchall():
                    meta = stored_json(stored)
                    if not isinstance(meta, dict):
                        continue
                    dependents = meta.get("dependents")
                    grown = [*(dependents if isinstance(dependents, list) else []), *names]
                    written = orjson.dumps({**meta, "dependents": grown}).decode()
                    await cursor.execute(files["write_meta"], {"id": job_id, "meta": written})

    async def workflow_jobs(self, workflow_id: str) -> list[Job]:
        async with self.reading() as cursor:
            await cursor.execute(
                self.files.compose("workflow_jobs", columns="job_columns"), {"workflow": workflow_id}
            )
            return read_jobs(await cursor.fetchall())
