"""Bad arguments to the bulk entry points get a ValidationError naming the argument, on every engine,
before the database sees them: never a TypeError or UnicodeEncodeError from deep inside a driver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conveyor import Conveyor, JobFilter, JobRequest
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError

SURROGATE = "\ud800"
NOT_REQUESTS = [5, None, "abc", b"abc", {"a": 1}, JobRequest("tests.w.Job")]


@pytest.fixture
async def app(any_engine: Engine) -> Conveyor:
    return Conveyor(engine=any_engine)


@pytest.mark.parametrize("requests", NOT_REQUESTS, ids=repr)
async def test_enqueue_many_refuses_what_is_not_an_iterable_of_requests(app: Conveyor, requests: Any) -> None:
    with pytest.raises(ValidationError, match=r"invalid requests=.*iterable of JobRequest"):
        await app.enqueue_many(requests)
    with pytest.raises(ValidationError, match=r"invalid requests="):
        await app.enqueue_many_sync(requests)  # type: ignore[misc]


@pytest.mark.parametrize("requests", NOT_REQUESTS, ids=repr)
async def test_engines_refuse_what_is_not_an_iterable_of_requests(any_engine: Engine, requests: Any) -> None:
    with pytest.raises(ValidationError, match=r"invalid requests="):
        await any_engine.insert(requests)


async def test_a_hook_does_not_hide_a_bad_argument(app: Conveyor) -> None:
    app.before_enqueue(lambda: lambda request: request)
    with pytest.raises(ValidationError, match=r"invalid requests="):
        await app.enqueue_many(5)  # type: ignore[arg-type]


FILTERS = {
    "workers": SURROGATE,
    "tags": ["ok", f"a{SURROGATE}"],
    "worker_suffix": SURROGATE,
    "queues": SURROGATE,
    "args_contains": {SURROGATE: 1},
}


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize("action", ["list_jobs", "count_jobs", "cancel_jobs", "retry_jobs", "delete_jobs"])
async def test_string_filters_with_a_lone_surrogate_are_refused_naming_the_filter(
    app: Conveyor, action: str, name: str
) -> None:
    call: Callable[..., Any] = getattr(app, action)
    with pytest.raises(ValidationError, match=rf"invalid {name}="):
        await call(**{name: FILTERS[name]})
    with pytest.raises(ValidationError, match=rf"invalid {name}="):
        JobFilter.build(**{name: FILTERS[name]})
    assert await app.count_jobs() == 0  # nothing was done meanwhile


async def test_cron_names_and_nudged_queues_with_a_lone_surrogate_are_refused(app: Conveyor) -> None:
    with pytest.raises(ValidationError, match=r"invalid names="):
        await app.cron_ticks([SURROGATE])
    with pytest.raises(ValidationError, match=r"invalid names="):
        await app.last_cron_ticks(["ok", SURROGATE])
    with pytest.raises(ValidationError, match=r"invalid names="):
        await app.cron_ticks("hourly")  # type: ignore[arg-type]  # not a list of its letters
    with pytest.raises(ValidationError, match=r"invalid queue="):
        await app.nudge(SURROGATE)
