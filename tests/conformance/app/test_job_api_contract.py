"""The job API on every engine: arguments bound to the signature, typed args stored as JSON and
handed back typed, ``send.enqueue``/``relay`` on the current app, ``options(...)``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from conveyor import Conveyor, JobRequest, JobState, UnknownOptionError, ValidationError
from conveyor.current_app import NoCurrentAppError, current_app, default_app, set_default_app
from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError
from conveyor.testing import drain_queue
from tests.conformance import api_jobs
from tests.conformance.api_jobs import Address, Color, Customer
from tests.conformance.conftest import BLOCKING_CALLER_CONNECTIONS
from tests.helpers import poll


@pytest.fixture
async def app(any_engine: Engine) -> AsyncIterator[Conveyor]:
    """An app on each engine that stores jobs and runs none (tests drain them)."""
    api_jobs.SEEN.clear()
    app = Conveyor(engine=any_engine, testing="manual")
    yield app
    await app.close()


def typed_args() -> dict[str, Any]:
    return {
        "when": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "day": date(2026, 2, 3),
        "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "amount": Decimal("10.25"),
        "color": Color.BLUE,
        "address": Address("Main St", date(2020, 1, 1)),
        "customer": Customer(name="Ada", joined=datetime(2021, 5, 6, tzinfo=UTC)),
        "refs": [uuid.UUID(int=1), uuid.UUID(int=2)],
    }


# -- binding ----------------------------------------------------------------------------------
def test_arguments_bind_like_a_call() -> None:
    assert api_jobs.greet.new("ada").args == {"name": "ada"}
    assert api_jobs.greet.new("ada", "?").args == {"name": "ada", "punctuation": "?"}
    assert api_jobs.greet.new(name="ada", punctuation=".").args == {"name": "ada", "punctuation": "."}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: api_jobs.greet.new(), "missing name"),
        (lambda: api_jobs.greet.new(name="a", nme="b"), "unknown nme"),
        (lambda: api_jobs.greet.new("a", "b", "c"), "too many positional arguments"),
        (lambda: api_jobs.greet.new("a", name="b"), "multiple values for argument 'name'"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_naming_the_job(call: Any, expected: str) -> None:
    with pytest.raises(ValidationError) as refused:
        call()
    assert "tests.conformance.api_jobs.greet" in str(refused.value) and expected in str(refused.value)


def test_typed_args_are_stored_as_json() -> None:
    stored = api_jobs.typed.new(**typed_args()).args
    assert stored == {
        "when": "2026-01-02T03:04:05.678000+00:00",
        "day": "2026-02-03",
        "ref": "12345678-1234-5678-1234-567812345678",
        "amount": "10.25",
        "color": "blue",
        "address": {"street": "Main St", "since": "2020-01-01"},
        "customer": {"name": "Ada", "joined": "2021-05-06T00:00:00Z"},
        "refs": [str(uuid.UUID(int=1)), str(uuid.UUID(int=2))],
    }
    # Their JSON forms are accepted too (checked by decoding them), and None where it is allowed.
    again = api_jobs.typed.new(**{**stored, "maybe": None})
    assert again.args == {**stored, "maybe": None}


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("when", "yesterday", "must be a datetime"),
        ("when", 5, "must be a datetime"),
        ("day", datetime(2020, 1, 1), "must be a date"),
        ("ref", "not-a-uuid", "must be a UUID"),
        ("amount", 1.5, "must be a Decimal"),
        ("amount", "NaN", "must be a Decimal"),
        ("color", "green", "must be a Color"),
        ("address", {"street": "x"}, "must be a Address"),
        ("address", {"street": "x", "since": "2020-01-01", "extra": 1}, "unknown fields extra"),
        ("customer", {"name": "Ada"}, "must be a Customer"),
        ("refs", "abc", "must be a sequence"),
        ("refs", ["abc"], "must be a sequence"),
    ],
)
def test_bad_typed_values_are_refused_naming_the_argument(name: str, value: Any, expected: str) -> None:
    with pytest.raises(ValidationError) as refused:
        api_jobs.typed.new(**{**typed_args(), name: value})
    assert refused.value.field == f"args.{name}" and expected in str(refused.value)


async def test_a_job_gets_its_typed_args_back(app: Conveyor) -> None:
    job_id = await app.enqueue(api_jobs.typed.new(**typed_args(), maybe=date(2022, 2, 2)))
    assert await drain_queue(app=app) == {
        "cancelled": 0,
        "completed": 1,
        "discarded": 0,
        "retryable": 0,
        "scheduled": 0,
    }
    assert api_jobs.SEEN["typed"] == {**typed_args(), "maybe": date(2022, 2, 2)}
    assert await app.get_result(job_id) == {
        "when": "datetime",
        "day": "date",
        "ref": "UUID",
        "amount": "Decimal",
        "color": "Color",
        "address": "Address",
        "customer": "Customer",
        "refs": "list",
        "maybe": "date",
    }


async def test_stored_args_that_do_not_fit_discard_the_job_at_once_saying_why(app: Conveyor) -> None:
    """A row another client wrote (or a job enqueued before the function changed): no attempt can
    do better, so the first one ends it, with the reason in its errors."""
    missing = await app.enqueue(JobRequest(worker=api_jobs.greet.definition.name, args={}))
    bad = await app.enqueue(
        JobRequest(
            worker=api_jobs.typed.definition.name,
            args={**api_jobs.typed.new(**typed_args()).args, "day": "x"},
        )
    )
    fine = await app.enqueue(api_jobs.greet.new("ada"))
    counts = await drain_queue(app=app, with_safety=True)
    assert counts["discarded"] == 2 and counts["completed"] == 1
    for job_id, expected in ((missing, "missing name"), (bad, "args.day")):
        stored = await app.get_job(job_id)
        assert stored is not None and stored.state is JobState.DISCARDED and stored.attempt == 1
        assert expected in stored.errors[-1]["error"]
    assert await app.get_result(fine) == "hello ada!"


def test_unreadable_annotations_fail_clearly_on_first_use() -> None:
    from conveyor import job

    @job
    async def later(thing: NotDefinedYet) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(ConveyorError, match=r"annotations of job .*later cannot be read"):
        later.new(thing=1)


# -- the current app --------------------------------------------------------------------------
async def test_without_a_current_app_enqueue_says_how_to_name_one() -> None:
    previous = default_app()
    set_default_app(None)
    try:
        with pytest.raises(NoCurrentAppError, match="pass app="):
            await api_jobs.greet.enqueue("ada")
    finally:
        set_default_app(previous)


async def test_the_current_app_is_the_one_entered_or_made_default(app: Conveyor, any_engine: Engine) -> None:
    other = Conveyor(engine=any_engine, testing="manual")
    with app.as_current():
        first = await api_jobs.greet.enqueue("ada")
        with other.as_current():
            assert current_app() is other
        assert current_app() is app
    previous = default_app()
    try:
        app.make_default()
        second = api_jobs.greet.enqueue_sync("bob")
    finally:
        set_default_app(previous)
    async with other:  # (closes the engine the two apps share when it ends)
        assert current_app() is other
        third = await api_jobs.greet.options(queue="later").enqueue("cy")
        jobs = {job.id: job for job in await app.list_jobs()}
        names = {jobs[first].args["name"], jobs[second].args["name"], jobs[third].args["name"]}
        assert names == {"ada", "bob", "cy"} and jobs[third].queue == "later"
    with pytest.raises(NoCurrentAppError):
        current_app()


async def test_options_name_the_app_and_the_request_options(app: Conveyor) -> None:
    job_id = await api_jobs.greet.options(app=app, priority=3, schedule_in=60, tags=["t"]).enqueue("ada")
    stored = await app.get_job(job_id)
    assert stored is not None and stored.state is JobState.SCHEDULED
    assert (stored.priority, stored.tags, stored.args) == (3, ("t",), {"name": "ada"})
    with pytest.raises(UnknownOptionError):
        api_jobs.greet.options(app=app, queu="x")
    with pytest.raises(ValidationError, match="priority"):
        api_jobs.greet.options(app=app, priority=99)


async def test_options_conn_joins_the_callers_transaction(app: Conveyor, caller_conn: Any) -> None:
    await api_jobs.greet.options(app=app, conn=caller_conn).enqueue("rolled back")
    await caller_conn.rollback()
    kept = await api_jobs.greet.options(app=app, conn=caller_conn).enqueue("committed")
    await caller_conn.commit()
    assert [job.id for job in await app.list_jobs()] == [kept]
    with pytest.raises(ValidationError, match="cannot wait inside your transaction"):
        await api_jobs.greet.options(app=app, conn=caller_conn).relay("x")


async def test_relay_on_the_function_returns_the_recorded_value(node_app: Conveyor) -> None:
    assert await api_jobs.greet.options(app=node_app, timeout=10).relay("ada", "?") == "hello ada?"
    with node_app.as_current():
        assert await api_jobs.greet.relay("bob") == "hello bob!"


async def test_jobs_on_a_node_enqueue_on_the_app_that_runs_them(node_app: Conveyor) -> None:
    api_jobs.SEEN.clear()
    previous = default_app()
    set_default_app(None)  # nothing but the node's own app to find
    try:
        await node_app.enqueue(api_jobs.parent.new(children=2))
        await node_app.enqueue(api_jobs.parent_in_thread.new(children=2))
        await node_app.enqueue(api_jobs.which_app.new())
        # Generous: a thread job's enqueue_sync opens the portal's own pool first, slow on a loaded
        # machine.
        await poll(
            lambda: len(api_jobs.SEEN.get("children", [])) >= 4 and "app" in api_jobs.SEEN,
            timeout=30,
            what=f"four children and the app seen: {api_jobs.SEEN}",
        )
    finally:
        set_default_app(previous)
    assert sorted(api_jobs.SEEN["children"]) == [0, 0, 1, 1]
    assert api_jobs.SEEN["app"] is node_app


async def test_abstract_collections_of_typed_values_convert_too(app: Conveyor) -> None:
    request = api_jobs.ids_of.new([uuid.UUID(int=3)], {"a": date(2020, 1, 2)})
    assert request.args == {"refs": [str(uuid.UUID(int=3))], "by_name": {"a": "2020-01-02"}}
    job_id = await app.enqueue(request)
    await drain_queue(app=app)
    assert await app.get_result(job_id) == ["UUID", "date"]


async def test_list_jobs_sync_with_a_connection_reads_in_its_transaction(
    engine_name: str, any_engine: Engine
) -> None:
    """``list_jobs_sync(conn=)``: the caller's uncommitted jobs are listed (what a Django TestCase's
    assertions need), through its connection, while the app's own connections see none of them."""
    app = Conveyor(engine=any_engine)

    def plain() -> None:
        with BLOCKING_CALLER_CONNECTIONS[engine_name](any_engine) as conn:
            ids = app.enqueue_many_sync([api_jobs.greet.new("a"), api_jobs.greet.new("b")], conn=conn)
            listed = app.list_jobs_sync(conn=conn)
            assert [job.id for job in listed] == sorted(ids, reverse=True)
            assert listed[0].args == {"name": "b"} and listed[0].state is JobState.AVAILABLE
            assert [job.id for job in app.list_jobs_sync(limit=1, conn=conn)] == [max(ids)]
            assert app.list_jobs_sync(states=["completed"], conn=conn) == []
            assert app.list_jobs_sync() == []  # not committed: nobody else sees them
            conn.rollback()

    await asyncio.to_thread(plain)
