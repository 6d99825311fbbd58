"""Dynamic cron on every engine, on fake time: entries stored in the database and changed at runtime
by any process take effect at the leader's next tick, once per tick across the fleet, merged with
the entries defined in code; bad entries are refused naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobFilter
from conveyor._runtime.clock import FakeClock
from conveyor._runtime.duties import CronScheduler
from conveyor._runtime.leadership import Leadership
from conveyor.errors import ValidationError
from conveyor.telemetry import Telemetry
from tests.conformance import hardening_jobs as hj
from tests.conformance.app import test_fake_time_contract as fake_time
from tests.conformance.conftest import engines_on_one_database
from tests.helpers import nodes_asleep, poll

AppFactory = Callable[..., Conveyor]
NODE = {"queues": {"default": 5}, "poll_interval": 30.0, "stage_interval": 30.0, "heartbeat_interval": 10.0}
N = {"n": 1}
QUICK = JobFilter(workers=("tests.conformance.hardening_jobs.quick",))


@pytest.fixture
def make(make_app: Callable[..., Conveyor]) -> Callable[..., Conveyor]:
    return make_app


async def advance(clock: FakeClock, seconds: float, step: float = 5) -> None:
    """Fake time moved in steps of 5 s, the nodes on it caught up after each (``nodes_asleep``)."""
    await fake_time.advance(clock, seconds, step)


async def args_of_jobs(app: Conveyor, count: int) -> list[int]:
    """The ``n`` of the cron jobs once there are ``count``, and no more once the node is asleep
    (fake time stands still here: nothing can come due after that)."""
    await poll(lambda: app.list_jobs(QUICK), lambda found: len(found) >= count, what=f"{count} cron jobs")
    await nodes_asleep(app)
    found = await app.list_jobs(QUICK)
    assert len(found) == count, [job.args for job in found]
    return [job.args["n"] for job in sorted(found, key=lambda job: job.id)]


def minute_start() -> datetime:
    return datetime.now(UTC).replace(second=30, microsecond=0) + timedelta(minutes=5)


async def test_entries_changed_by_another_process_take_effect_at_the_next_tick(make: AppFactory) -> None:
    clock = FakeClock(minute_start())
    node = make(clock=clock, **NODE)
    editor = make()  # another process: no node, the same database
    await node.install()
    await editor.add_cron("every-minute", "* * * * *", hj.quick, {"n": 1})
    await node.start()
    assert await args_of_jobs(node, 1) == [1]  # the minute the node started in
    await advance(clock, 60)
    assert await args_of_jobs(node, 2) == [1, 1]

    await editor.pause_cron("every-minute")
    await advance(clock, 120)
    assert await args_of_jobs(node, 2) == [1, 1]
    assert [c.paused for c in await editor.stored_crons()] == [True]

    await editor.resume_cron("every-minute")
    await editor.update_cron("every-minute", args={"n": 2})
    await advance(clock, 60)
    assert await args_of_jobs(node, 3) == [1, 1, 2]

    await editor.update_cron("every-minute", expression="0 0 1 1 *")  # next January
    await advance(clock, 60)
    assert await args_of_jobs(node, 3) == [1, 1, 2]

    await editor.update_cron("every-minute", expression="* * * * *")
    await editor.delete_cron("every-minute")
    await advance(clock, 120)
    assert await args_of_jobs(node, 3) == [1, 1, 2]
    assert await editor.stored_crons() == []


async def test_a_code_entry_is_paused_and_changed_at_runtime_and_comes_back_when_deleted(
    make: AppFactory,
) -> None:
    clock = FakeClock(minute_start())
    node = make(
        clock=clock,
        crontab=[{"expression": "* * * * *", "worker": hj.quick, "args": {"n": 1}, "name": "in-code"}],
        **NODE,
    )
    await node.install()
    await node.start()
    assert await args_of_jobs(node, 1) == [1]
    stored = await node.pause_cron("in-code")  # the code entry is stored, paused
    assert stored.paused and stored.opts["args"] == {"n": 1} and stored.worker == hj.quick.definition.name
    await advance(clock, 120)
    assert await args_of_jobs(node, 1) == [1]
    await node.update_cron("in-code", args={"n": 5})
    await node.resume_cron("in-code")
    await advance(clock, 60)
    assert await args_of_jobs(node, 2) == [1, 5]  # the stored version replaces the code's
    await node.delete_cron("in-code")
    await advance(clock, 60)
    assert await args_of_jobs(node, 3) == [1, 5, 1]  # the code's own again


async def test_a_stored_entry_runs_once_per_tick_however_many_leaders(
    engine_name: str, tmp_path: Path
) -> None:
    minute = minute_start().replace(second=0)
    async with engines_on_one_database(engine_name, tmp_path, 3) as engines:
        app = Conveyor(engine=engines[0])
        await app.add_cron("stored", "* * * * *", hj.quick, {"n": 7})
        schedulers = []
        for i, engine in enumerate(engines):
            leadership = Leadership(engine, Telemetry(), name="conveyor", node=f"n{i}", ttl=2.0)
            leadership.is_leader = True  # the worst case: every node believes it leads
            schedulers.append(CronScheduler(engine, Telemetry(), leadership, [], started_at=minute))
        ids = await asyncio.gather(
            *(s.run_at(minute + timedelta(seconds=1 + i)) for i, s in enumerate(schedulers))
        )
        assert sorted(len(found) for found in ids) == [0, 0, 1]
        await app.close()


async def test_a_stored_row_no_entry_can_be_made_of_is_skipped_and_the_rest_run(
    engine_name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from conveyor.fleet import StoredCron

    minute = minute_start().replace(second=0)
    async with engines_on_one_database(engine_name, tmp_path, 1) as (engine,):
        await engine.add_cron(StoredCron("junk", "61 * * * *", "Elixir.MyApp.Worker", {"args": {}}))
        await engine.add_cron(StoredCron("good", "* * * * *", hj.quick.definition.name, {"args": {"n": 3}}))
        leadership = Leadership(engine, Telemetry(), name="conveyor", node="n", ttl=2.0)
        leadership.is_leader = True
        scheduler = CronScheduler(engine, Telemetry(), leadership, [], started_at=minute)
        assert len(await scheduler.run_at(minute)) == 1
        assert len(await scheduler.run_at(minute + timedelta(minutes=1))) == 1
        skipped = [r for r in caplog.records if "stored cron entry 'junk' is skipped" in r.getMessage()]
        assert len(skipped) == 1  # once, not every minute


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda app: app.add_cron("x", "61 * * * *", hj.quick, N), "cron"),
        (lambda app: app.add_cron("x", "* * * * *", hj.quick, N, timezone="Mars/Olympus"), "timezone"),
        (lambda app: app.add_cron("x", "* * * * *", "no.such.worker"), "worker"),
        (lambda app: app.add_cron("x", "@reboot", hj.quick, N), "expression"),
        (lambda app: app.add_cron("", "* * * * *", hj.quick, N), "name"),
        (lambda app: app.add_cron("x", "* * * * *", hj.quick, N, unique=True), "unique"),
        (lambda app: app.add_cron("x", "* * * * *", hj.quick, N, priority=12), "priority"),
        (lambda app: app.add_cron("x", "* * * * *", hj.quick, args=[1]), "args"),
        (lambda app: app.update_cron("missing", args={}), "name"),
        (lambda app: app.pause_cron("missing"), "name"),
        (lambda app: app.delete_cron("missing"), "name"),
    ],
)
async def test_bad_entries_are_refused_naming_the_field(make: AppFactory, call: Any, field: str) -> None:
    app = make()
    await app.install()
    with pytest.raises(ValidationError) as caught:
        await call(app)
    assert caught.value.field == field or caught.value.field.startswith(field), caught.value
    assert await app.stored_crons() == []


async def test_a_name_is_stored_once_and_a_foreign_worker_is_accepted_when_said(make: AppFactory) -> None:
    app = make()
    await app.install()
    stored = await app.add_cron(
        "elixir", "@hourly", "MyApp.Workers.Report", {"day": 1}, foreign=True, queue="reports"
    )
    assert stored.opts == {"args": {"day": 1}, "timezone": "UTC", "queue": "reports"}
    with pytest.raises(ValidationError, match="exists"):
        await app.add_cron("elixir", "@daily", hj.quick, N)
    assert app.pause_cron_sync("elixir").paused  # the sync twins work from outside a loop too
    assert [c.worker for c in app.stored_crons_sync()] == ["MyApp.Workers.Report"]
