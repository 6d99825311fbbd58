"""The lifecycle contract: open and close, install and uninstall, a closed engine, transient failures."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import JobFilter, JobState, SchemaError, ValidationError
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import EngineClosedError
from tests.conformance.contract import T0, Heard, job, req


async def test_install_is_idempotent(any_engine: Engine) -> None:
    version = await any_engine.schema_version()
    assert version is not None and version >= 1
    assert await any_engine.install() == version
    await any_engine.check_schema()


async def test_uninstall_removes_the_schema_and_install_brings_it_back(any_engine: Engine) -> None:
    version = await any_engine.schema_version()
    await any_engine.insert([req()], now=T0)
    await any_engine.uninstall()
    assert await any_engine.schema_version() is None
    with pytest.raises(SchemaError):
        await any_engine.check_schema()
    assert await any_engine.install() == version
    await any_engine.check_schema()
    assert await any_engine.list_jobs(JobFilter()) == []


async def test_open_and_close_twice_are_harmless(any_engine: Engine) -> None:
    (job_id,) = await any_engine.insert([req()], now=T0)
    await any_engine.open()
    assert (await job(any_engine, job_id)).state is JobState.AVAILABLE
    await any_engine.close()
    await any_engine.close()


async def test_close_before_open_is_harmless(unopened_engine: Engine) -> None:
    await unopened_engine.close()


CALLS = {
    "get_job": lambda e: e.get_job(1),
    "list_jobs": lambda e: e.list_jobs(JobFilter()),
    "insert": lambda e: e.insert([req()], now=T0),
    "fetch_jobs": lambda e: e.fetch_jobs("default", 1, node="n", producer="p", now=T0),
    "ack_jobs": lambda e: e.ack_jobs([Ack(1, 1, JobState.COMPLETED)], now=T0),
    "stage_jobs": lambda e: e.stage_jobs(10, now=T0),
    "notify": lambda e: e.notify("signal", {"action": "x"}),
    "elect_leader": lambda e: e.elect_leader("app", "n", 10, now=T0),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("closed", [False, True], ids=["never-opened", "closed"])
async def test_an_engine_not_open_refuses_work_with_a_transient_error(
    unopened_engine: Engine, call: str, closed: bool
) -> None:
    if closed:
        await unopened_engine.open()
        await unopened_engine.close()
    with pytest.raises(EngineClosedError) as caught:
        await CALLS[call](unopened_engine)
    assert unopened_engine.is_transient(caught.value)


@pytest.mark.parametrize(
    "exc",
    [ValidationError("now", 1, "is wrong"), ValueError("bad value"), RuntimeError("bug"), KeyError("k")],
    ids=["validation", "value", "runtime", "key"],
)
def test_errors_of_the_caller_are_not_transient(any_engine: Engine, exc: BaseException) -> None:
    assert not any_engine.is_transient(exc)


async def test_stopping_a_listener_twice_is_harmless(any_engine: Engine) -> None:
    heard = Heard()
    listener = await any_engine.listen(["signal"], heard)
    await heard.wait_for("listener", {"event": "connected"})
    await listener.stop()
    await listener.stop()
    await any_engine.notify("signal", {"after": "stop"})
    other: list[Any] = []
    second = await any_engine.listen(["signal"], lambda name, payload: other.append(payload))
    await second.stop()
    assert ("signal", {"after": "stop"}) not in heard.items
