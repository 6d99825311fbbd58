"""The workflow contract: steps with dependencies wait suspended and go on exactly once, when their
last dependency ends, on every engine (``Engine.insert(hold=)``, ``settle_steps``, ``sweep_steps``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobState, Workflow
from conveyor._app.workflow_actions import retry_workflow
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.retention import Retention
from conveyor.workflow import step_name
from tests.conformance.contract import T0, WORKER, job, req, uid


def step(**options: Any) -> Any:
    return req(**options)


async def enqueue(engine: Engine, workflow: Workflow) -> dict[str, int]:
    """Insert the workflow's steps through the engine, as ``enqueue_many`` does: name -> id."""
    requests, hold = workflow.requests()
    ids = await engine.insert(requests, now=T0, hold=hold)
    return {s.name: int(i) for s, i in zip(workflow.steps, ids, strict=True)}


async def states(engine: Engine, ids: dict[str, int]) -> dict[str, JobState]:
    return {name: (await job(engine, job_id)).state for name, job_id in ids.items()}


async def run(
    engine: Engine, ids: dict[str, int], *names: str, outcome: JobState = JobState.COMPLETED
) -> None:
    """Claim the named steps (they must be available) and ack them with ``outcome``."""
    wanted = {ids[name] for name in names}
    claimed: dict[int, int] = {}  # id -> attempt
    for _ in range(20):
        jobs = await engine.fetch_jobs("default", 100, node="n", producer=uid(1), now=T0)
        claimed |= {j.id: j.attempt for j in jobs}
        if wanted <= claimed.keys():
            break
    assert wanted <= claimed.keys(), (names, await states(engine, ids))
    extra = claimed.keys() - wanted  # give back what was claimed beyond the named steps
    acks = [Ack(i, claimed[i], outcome) for i in wanted] + [
        Ack(i, claimed[i], JobState.AVAILABLE, schedule_in=0, snoozed=True) for i in extra
    ]
    await engine.ack_jobs(acks, now=T0)


def diamond(**options: Any) -> Workflow:
    return (
        Workflow(**options)
        .add("a", step())
        .add("b", step(), deps=["a"])
        .add("c", step(), deps=["a"])
        .add("d", step(), deps=["b", "c"])
    )


async def test_steps_with_dependencies_wait_suspended_and_are_never_fetched(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, diamond())
    assert await states(any_engine, ids) == {
        "a": JobState.AVAILABLE,
        "b": JobState.SUSPENDED,
        "c": JobState.SUSPENDED,
        "d": JobState.SUSPENDED,
    }
    jobs = await any_engine.fetch_jobs("default", 10, node="n", producer=uid(1), now=T0)
    assert [j.id for j in jobs] == [ids["a"]]
    stored = await any_engine.get_job(ids["d"])
    assert stored is not None and stored.meta["deps"] == ["b", "c"] and step_name(stored) == "d"


async def test_a_diamond_goes_on_step_by_step(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, diamond())
    await run(any_engine, ids, "a")
    assert (await states(any_engine, ids))["b"] is JobState.AVAILABLE
    await run(any_engine, ids, "b")
    assert (await states(any_engine, ids))["d"] is JobState.SUSPENDED  # c has not run
    await run(any_engine, ids, "c")
    assert (await states(any_engine, ids))["d"] is JobState.AVAILABLE
    await run(any_engine, ids, "d")
    assert set((await states(any_engine, ids)).values()) == {JobState.COMPLETED}


async def test_a_failed_dependency_cancels_the_steps_after_it(any_engine: Engine) -> None:
    workflow = diamond().add("e", step(), deps=["d"])
    ids = await enqueue(any_engine, workflow)
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    found = await states(any_engine, ids)
    assert found["d"] is JobState.CANCELLED and found["e"] is JobState.CANCELLED  # a cascade
    assert found["c"] is JobState.AVAILABLE  # not after b


@pytest.mark.parametrize("outcome", [JobState.DISCARDED, JobState.CANCELLED])
async def test_a_policy_ignores_failed_dependencies(any_engine: Engine, outcome: JobState) -> None:
    ids = await enqueue(any_engine, diamond(ignore=[outcome.value]))
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=outcome)
    await run(any_engine, ids, "c")
    assert (await states(any_engine, ids))["d"] is JobState.AVAILABLE


async def test_cancelling_a_step_cancels_the_steps_after_it(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, diamond())
    assert await any_engine.cancel_jobs(JobFilter(ids=(ids["a"],)), now=T0) == [ids["a"]]
    assert set((await states(any_engine, ids)).values()) == {JobState.CANCELLED}


async def test_the_sweep_settles_what_no_ack_settled(any_engine: Engine) -> None:
    """A node that died between its ack's commit and the settle: the ack is written, the settle
    never ran. The leader's sweep lets the dependents go on."""
    ids = await enqueue(any_engine, diamond())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b")
    await run(any_engine, ids, "c")
    # d went on; put it back as if the settle after c had never run.
    await any_engine.hold_steps([ids["d"]])
    assert (await states(any_engine, ids))["d"] is JobState.SUSPENDED
    settled = await any_engine.sweep_steps(now=T0)
    assert settled == {ids["d"]: JobState.AVAILABLE}
    assert await any_engine.sweep_steps(now=T0) == {}  # once


async def test_a_deleted_dependency_cancels_its_dependents_unless_ignored(any_engine: Engine) -> None:
    plain = await enqueue(any_engine, Workflow().add("a", step()).add("b", step(), deps=["a"]))
    lenient = await enqueue(
        any_engine, Workflow(ignore=["deleted"]).add("a", step()).add("b", step(), deps=["a"])
    )
    await any_engine.delete_jobs(JobFilter(ids=(plain["a"], lenient["a"])))
    await any_engine.sweep_steps(now=T0)
    assert (await job(any_engine, plain["b"])).state is JobState.CANCELLED
    assert (await job(any_engine, lenient["b"])).state is JobState.AVAILABLE


async def test_a_step_scheduled_ahead_waits_for_its_time(any_engine: Engine) -> None:
    later = T0 + timedelta(hours=1)
    ids = await enqueue(
        any_engine, Workflow().add("a", step()).add("b", step(scheduled_at=later), deps=["a"])
    )
    await run(any_engine, ids, "a")
    assert (await job(any_engine, ids["b"])).state is JobState.SCHEDULED


async def test_a_fan_in_goes_on_once_when_steps_end_at_once_on_many_nodes(
    fleet_engines: list[Engine],
) -> None:
    """Forty steps end on three engines at once, in acks of one to three; the step after them goes
    on exactly once, after the last."""
    first = fleet_engines[0]
    workflow = Workflow()
    for n in range(40):
        workflow.add(f"s{n}", step(args={"n": n}))
    workflow.add("last", step(args={"n": -1}), deps=[f"s{n}" for n in range(40)])
    ids = await enqueue(first, workflow)
    claims_of_last = 0

    async def worker(engine: Engine, n: int) -> None:
        nonlocal claims_of_last
        idle = 0
        while idle < 5:
            jobs = await engine.fetch_jobs("default", 1 + n % 3, node=f"n{n}", producer=uid(n), now=T0)
            if any(j.id == ids["last"] for j in jobs):
                claims_of_last += 1
                done = await first.list_jobs(JobFilter(states=(JobState.COMPLETED,), limit=1000))
                assert len(done) == 40  # it went on after the last of the forty, not before
            jobs = [j for j in jobs if j.id != ids["last"]]
            idle = 0 if jobs else idle + 1
            await asyncio.sleep(0)
            if jobs:
                await engine.ack_jobs([Ack(j.id, 1, JobState.COMPLETED) for j in jobs], now=T0)

    await asyncio.gather(*(worker(e, n) for n, e in enumerate(fleet_engines * 2, start=1)))
    final = await job(first, ids["last"])
    assert claims_of_last == 1 and final.state is JobState.EXECUTING and final.attempt == 1
    assert await first.sweep_steps(now=T0) == {}


async def test_steps_added_later_depend_on_stored_steps(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, Workflow(id="graft-1").add("a", step()).add("b", step(), deps=["a"]))
    await run(any_engine, ids, "a")
    added = (
        Workflow.adding_to("graft-1", ["a", "b"]).add("c", step(), deps=["a"]).add("d", step(), deps=["b"])
    )
    requests, hold = added.requests()
    new = await any_engine.insert(requests, now=T0, hold=hold)
    await any_engine.add_dependents("graft-1", added.new_dependents())
    settled = await any_engine.settle_steps([int(i) for i in new], now=T0)
    assert settled == {int(new[0]): JobState.AVAILABLE}  # a completed already; b has not run
    await run(any_engine, ids, "b")  # b now lists d among its dependents: its ack settles d
    assert (await job(any_engine, int(new[1]))).state is JobState.AVAILABLE
    steps = await any_engine.workflow_jobs("graft-1")
    assert [step_name(j) for j in steps] == ["a", "b", "c", "d"]


async def test_finished_steps_are_not_pruned_while_their_workflow_waits(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, diamond())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b")
    plain = await any_engine.insert([req(worker=WORKER)], now=T0)
    await any_engine.fetch_jobs("default", 100, node="n", producer=uid(2), now=T0)
    await any_engine.ack_jobs([Ack(int(plain[0]), 1, JobState.COMPLETED)], now=T0)
    later = T0 + timedelta(days=30)
    await any_engine.prune_jobs(Retention(max_age=60), limit=1000, now=later)
    assert (await any_engine.get_job(ids["a"])) is not None  # d still waits on b and c
    assert (await any_engine.get_job(int(plain[0]))) is None


# -- many steps at once ----------------------------------------------------------------------------
def counts(completed: int = 0, cancelled: int = 0, discarded: int = 0, deleted: int = 0) -> dict[str, int]:
    """``meta["deps_ended"]`` as the settle writes it."""
    return {"completed": completed, "cancelled": cancelled, "discarded": discarded, "deleted": deleted}


async def claim_all(engine: Engine) -> list[int]:
    """Every available step, claimed in one fetch (attempt 1)."""
    return [j.id for j in await engine.fetch_jobs("default", 5000, node="n", producer=uid(1), now=T0)]


async def ack_all(engine: Engine, ids: Sequence[int], outcome: JobState = JobState.COMPLETED) -> None:
    await engine.ack_jobs([Ack(i, 1, outcome) for i in ids], now=T0)


def fan_out_and_in(width: int) -> tuple[Workflow, list[str]]:
    names = [f"s{n}" for n in range(width)]
    workflow = Workflow().add("root", step())
    for name in names:
        workflow.add(name, step(), deps=["root"])
    return workflow.add("join", step(), deps=names), names


async def test_a_wide_fan_out_goes_on_whole_and_its_fan_in_once_after_the_last(any_engine: Engine) -> None:
    """1,200 steps after one (more than one settle statement takes on PostgreSQL), then one after
    them all: the fan-in waits while any is unfinished, whichever ended first, and goes on once."""
    workflow, names = fan_out_and_in(1200)
    ids = await enqueue(any_engine, workflow)
    await run(any_engine, ids, "root")
    found = await states(any_engine, ids)
    assert {found[name] for name in names} == {JobState.AVAILABLE} and found["join"] is JobState.SUSPENDED
    assert (await job(any_engine, ids["s1199"])).meta["deps_ended"] == counts(completed=1)
    claimed = await claim_all(any_engine)
    assert sorted(claimed) == sorted(ids[name] for name in names)  # each once, the fan-in not
    # The last added ends first, then all but one: the fan-in still waits.
    await ack_all(any_engine, [ids["s1199"]])
    await ack_all(any_engine, [ids[name] for name in names[1:-1]])
    assert (await job(any_engine, ids["join"])).state is JobState.SUSPENDED
    await ack_all(any_engine, [ids["s0"]])
    joined = await job(any_engine, ids["join"])
    assert joined.state is JobState.AVAILABLE and joined.meta["deps_ended"] == counts(completed=1200)
    assert await claim_all(any_engine) == [ids["join"]]
    assert await any_engine.sweep_steps(now=T0) == {}


async def test_a_failed_step_before_a_wide_fan_out_cancels_every_step_after_it(any_engine: Engine) -> None:
    workflow = Workflow().add("root", step())
    for n in range(700):
        workflow.add(f"s{n}", step(), deps=["root"]).add(f"t{n}", step(), deps=[f"s{n}"])
    ids = await enqueue(any_engine, workflow)
    await run(any_engine, ids, "root", outcome=JobState.DISCARDED)
    found = await states(any_engine, ids)
    assert found.pop("root") is JobState.DISCARDED
    assert set(found.values()) == {JobState.CANCELLED}  # the 700 after it, and the 700 after those


async def test_one_ack_of_many_steps_settles_each_dependent_by_its_own_dependencies(
    any_engine: Engine,
) -> None:
    """Steps of one workflow ending in one ack, some alike (ended the same way, listing the same
    dependents), some not: each dependent is settled as its own dependencies ended."""
    workflow = (
        Workflow()
        .add("a1", step())
        .add("a2", step())
        .add("a3", step())
        .add("x", step(), deps=["a1", "a2", "a3"])  # a1, a2 and a3 list [x]
        .add("b1", step())
        .add("b2", step())
        .add("y", step(), deps=["b1", "b2"])  # b1 lists [y], b2 lists [y, z]
        .add("z", step(), deps=["b2"])
        .add("c1", step())
        .add("c2", step())
        .add("c3", step())
        # c1, c2 and c3 list [u, v]; c1 and c2 end differently, c3 not yet: u is cancelled at once
        .add("u", step(), deps=["c1", "c2", "c3"])
        .add("v", step(), deps=["c1", "c2", "c3"], ignore=["discarded"])
        .add("d1", step())
        .add("d2", step())
        .add("e", step(), deps=["d1", "d2"])  # d1 and d2 list [e]; d2 has not ended
    )
    ids = await enqueue(any_engine, workflow)
    claimed = set(await claim_all(any_engine))
    assert claimed == {ids[n] for n in ("a1", "a2", "a3", "b1", "b2", "c1", "c2", "c3", "d1", "d2")}
    acks = [Ack(ids[n], 1, JobState.COMPLETED) for n in ("a1", "a2", "a3", "b1", "b2", "c1", "d1")]
    await any_engine.ack_jobs([*acks, Ack(ids["c2"], 1, JobState.DISCARDED)], now=T0)
    found = {name: await job(any_engine, ids[name]) for name in ("x", "y", "z", "u", "v", "e")}
    assert {name: j.state for name, j in found.items()} == {
        "x": JobState.AVAILABLE,
        "y": JobState.AVAILABLE,
        "z": JobState.AVAILABLE,
        "u": JobState.CANCELLED,
        "v": JobState.SUSPENDED,
        "e": JobState.SUSPENDED,
    }
    assert found["x"].meta["deps_ended"] == counts(completed=3)
    await ack_all(any_engine, [ids["c3"], ids["d2"]])
    assert (await job(any_engine, ids["e"])).state is JobState.AVAILABLE
    lenient = await job(any_engine, ids["v"])
    assert lenient.state is JobState.AVAILABLE
    assert lenient.meta["deps_ended"] == counts(completed=2, discarded=1)


async def test_one_ack_settles_alike_steps_of_different_workflows(any_engine: Engine) -> None:
    """Two workflows with the same names end their first steps in one ack: each goes on."""
    first = await enqueue(any_engine, Workflow().add("a", step()).add("b", step(), deps=["a"]))
    second = await enqueue(any_engine, Workflow().add("a", step()).add("b", step(), deps=["a"]))
    assert sorted(await claim_all(any_engine)) == sorted([first["a"], second["a"]])
    await ack_all(any_engine, [first["a"], second["a"]])
    assert (await job(any_engine, first["b"])).state is JobState.AVAILABLE
    assert (await job(any_engine, second["b"])).state is JobState.AVAILABLE


# -- building --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: Workflow(), "workflow"),
        (lambda: Workflow().add("a", step(), deps=["x"]), "step 'a'.deps"),
        (lambda: Workflow().add("a", step()).add("a", step()), "name"),
        (lambda: Workflow().add("a", step(), deps=["b"]).add("b", step(), deps=["a"]), "workflow"),
        (lambda: Workflow().add("a", step(), deps=["a"]), "workflow"),
        (lambda: Workflow().add("", step()), "name"),
        (lambda: Workflow().add("a", "not a request"), "step 'a'"),  # type: ignore[arg-type]
        (lambda: Workflow().add("a", step(meta={"deps": []})), "step 'a'.meta['deps']"),
        (lambda: Workflow().add("a", step(unique=True)), "step 'a'.unique"),
        (lambda: Workflow().add("a", step(), deps="b"), "step 'a'.deps"),
        (lambda: Workflow(ignore=["lost"]), "ignore"),
        (lambda: Workflow().add_workflow("sub", Workflow()), "workflow 'sub'"),
    ],
)
def test_bad_workflows_are_refused_before_anything_is_written(build: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid {re.escape(named)}"):
        build().requests()


def test_a_cycle_is_named_step_by_step() -> None:
    workflow = (
        Workflow().add("a", step(), deps=["c"]).add("b", step(), deps=["a"]).add("c", step(), deps=["b"])
    )
    with pytest.raises(ValidationError, match="a -> c -> b -> a"):
        workflow.requests()


def test_a_sub_workflow_becomes_a_group_of_named_steps() -> None:
    inner = Workflow().add("x", step()).add("y", step(), deps=["x"])
    outer = (
        Workflow()
        .add("start", step())
        .add_workflow("sub", inner, deps=["start"])
        .add("end", step(), deps=["sub"])
    )
    requests, hold = outer.requests()
    deps = {r.meta["name"]: r.meta["deps"] for r in requests}
    assert deps == {"start": [], "sub.x": ["start"], "sub.y": ["sub.x", "start"], "end": ["sub.x", "sub.y"]}
    assert hold == [1, 2, 3]
    assert {r.meta["workflow_id"] for r in requests} == {outer.id}


async def test_steps_another_client_wrote_badly_never_stall_the_others(any_engine: Engine) -> None:
    """Rows claiming to be steps with junk where the workflow's fields go (a number for an id,
    deps that are not a list or hold non-names, dependents that are not a list): acking them, a
    settle and the sweep go on, and a real workflow beside them runs as always."""
    junk = [
        {"workflow_id": 5, "name": "a", "deps": ["b"]},
        {"workflow_id": "junk", "name": "a", "deps": "b", "dependents": 7},
        {"workflow_id": "junk", "name": "b", "deps": [1, None, {"x": 1}], "dependents": ["a", 3, None]},
        {"workflow_id": "junk", "name": None, "deps": [], "dependents": {"a": 1}},
    ]
    junk_ids = await any_engine.insert([req(meta=meta) for meta in junk], now=T0, hold=[1, 2])
    ids = await enqueue(any_engine, diamond())
    claimed = await any_engine.fetch_jobs("default", 100, node="n", producer=uid(1), now=T0)
    acks = [Ack(j.id, 1, JobState.DISCARDED if j.id in junk_ids else JobState.COMPLETED) for j in claimed]
    await any_engine.ack_jobs(acks, now=T0)
    await any_engine.sweep_steps(now=T0)
    await any_engine.settle_steps([int(i) for i in junk_ids], now=T0)
    found = await states(any_engine, ids)
    assert found["a"] is JobState.COMPLETED
    assert found["b"] is JobState.AVAILABLE and found["c"] is JobState.AVAILABLE


async def test_a_workflow_retry_racing_the_sweep_never_cancels_its_steps_again(any_engine: Engine) -> None:
    """The leader's sweep may run while a retry puts a workflow's failed steps back: it must never
    see a step waiting again on a dependency still discarded (and cancel it anew)."""
    workflow = Workflow().add("a", step()).add("b", step(), deps=["a"]).add("c", step(), deps=["b"])
    ids = await enqueue(any_engine, workflow)
    await run(any_engine, ids, "a")
    stop, swept = asyncio.Event(), asyncio.Event()

    async def sweep() -> None:
        while not stop.is_set():
            await any_engine.sweep_steps(now=T0)
            swept.set()
            await asyncio.sleep(0)

    for _ in range(15):
        await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
        assert (await states(any_engine, ids))["c"] is JobState.CANCELLED
        stop.clear()
        swept.clear()
        sweeper = asyncio.create_task(sweep())
        await swept.wait()  # the sweeps are under way: the retry runs among them
        retried = await retry_workflow(any_engine, workflow.id, now=T0)
        stop.set()
        await sweeper
        assert sorted(retried) == sorted([ids["b"], ids["c"]])
        assert await states(any_engine, ids) == {
            "a": JobState.COMPLETED,
            "b": JobState.AVAILABLE,
            "c": JobState.SUSPENDED,
        }
    await run(any_engine, ids, "b")
    await run(any_engine, ids, "c")
    assert set((await states(any_engine, ids)).values()) == {JobState.COMPLETED}


# -- in a caller's transaction (conn=) ------------------------------------------------------------
# While the caller's transaction is open the cases only read through the engine (on SQLite the
# caller holds the one write lock until it ends).
async def end(conn: Any, commit: bool) -> None:
    await (conn.commit() if commit else conn.rollback())


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_steps_added_in_the_callers_transaction_settle_in_it(
    any_engine: Engine, caller_conn: Any, commit: bool
) -> None:
    ids = await enqueue(any_engine, Workflow(id="graft-tx").add("a", step()).add("b", step(), deps=["a"]))
    await run(any_engine, ids, "a")
    added = (
        Workflow.adding_to("graft-tx", ["a", "b"]).add("c", step(), deps=["a"]).add("d", step(), deps=["b"])
    )
    requests, hold = added.requests()
    c, d = (int(i) for i in await any_engine.insert(requests, now=T0, hold=hold, conn=caller_conn))
    await any_engine.add_dependents("graft-tx", added.new_dependents(), conn=caller_conn)
    assert await any_engine.settle_steps([c, d], now=T0, conn=caller_conn) == {c: JobState.AVAILABLE}
    assert await any_engine.get_job(c) is None  # not visible before the commit
    assert (await job(any_engine, ids["b"])).meta.get("dependents", []) == []
    await end(caller_conn, commit)
    stored = await any_engine.workflow_jobs("graft-tx")
    assert [step_name(j) for j in stored] == (["a", "b", "c", "d"] if commit else ["a", "b"])
    assert (await job(any_engine, ids["b"])).meta.get("dependents", []) == (["d"] if commit else [])
    if commit:
        assert (await job(any_engine, c)).state is JobState.AVAILABLE
        assert (await job(any_engine, d)).state is JobState.SUSPENDED
        await run(any_engine, ids, "b")  # b lists d from the commit on: its ack settles d
        assert (await job(any_engine, d)).state is JobState.AVAILABLE


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_hold_steps_joins_the_callers_transaction(
    any_engine: Engine, caller_conn: Any, commit: bool
) -> None:
    ids = await enqueue(any_engine, Workflow().add("a", step()).add("b", step(), deps=["a"]))
    await run(any_engine, ids, "a", outcome=JobState.DISCARDED)
    assert await states(any_engine, ids) == {"a": JobState.DISCARDED, "b": JobState.CANCELLED}
    held = await any_engine.hold_steps([ids["a"], ids["b"]], conn=caller_conn)
    assert held == sorted([ids["a"], ids["b"]])
    assert (await job(any_engine, ids["a"])).state is JobState.DISCARDED  # until the commit
    await end(caller_conn, commit)
    held = {"a": JobState.SUSPENDED, "b": JobState.SUSPENDED}
    assert await states(any_engine, ids) == (
        held if commit else {"a": JobState.DISCARDED, "b": JobState.CANCELLED}
    )


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_cancelling_a_step_in_the_callers_transaction_cancels_the_steps_after_it(
    any_engine: Engine, caller_conn: Any, commit: bool
) -> None:
    ids = await enqueue(any_engine, diamond())
    assert await any_engine.cancel_jobs(JobFilter(ids=(ids["a"],)), now=T0, conn=caller_conn) == [ids["a"]]
    assert (await states(any_engine, ids))["b"] is JobState.SUSPENDED  # until the commit
    await end(caller_conn, commit)
    found = set((await states(any_engine, ids)).values())
    assert found == ({JobState.CANCELLED} if commit else {JobState.AVAILABLE, JobState.SUSPENDED})


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_retrying_steps_in_the_callers_transaction_holds_them_in_it(
    any_engine: Engine, caller_conn: Any, commit: bool
) -> None:
    workflow = Workflow().add("a", step()).add("b", step(), deps=["a"]).add("c", step(), deps=["b"])
    ids = await enqueue(any_engine, workflow)
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    failed = {"a": JobState.COMPLETED, "b": JobState.DISCARDED, "c": JobState.CANCELLED}
    assert await states(any_engine, ids) == failed
    retried = await any_engine.retry_jobs(JobFilter(ids=(ids["b"], ids["c"])), now=T0, conn=caller_conn)
    assert sorted(retried) == sorted([ids["b"], ids["c"]])
    assert await states(any_engine, ids) == failed  # until the commit
    await end(caller_conn, commit)
    if not commit:
        assert await states(any_engine, ids) == failed
        return
    assert await states(any_engine, ids) == {
        "a": JobState.COMPLETED,
        "b": JobState.AVAILABLE,
        "c": JobState.SUSPENDED,
    }
    await run(any_engine, ids, "b")
    assert (await job(any_engine, ids["c"])).state is JobState.AVAILABLE
