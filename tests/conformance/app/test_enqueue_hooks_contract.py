"""``Conveyor.before_enqueue`` on both engines: a hook reads the caller's context once per enqueue and
changes every request of it, whichever way it is inserted (single, bulk through COPY, streamed, a
workflow's steps, unique, in the caller's transaction, blocking from another thread); a hook with
nothing to add leaves the requests alone, and hooks apply in order until removed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import pytest

from conveyor import Conveyor, JobRequest, Workflow
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError

WORKER = "tests.conformance.jobs.noop"
tag: ContextVar[str | None] = ContextVar("tag", default=None)


class TagHook:
    """Adds ``meta[key]`` = the caller's ``tag``, and counts its calls (one per enqueue)."""

    def __init__(self, key: str = "tag") -> None:
        self.key = key
        self.calls = 0

    def __call__(self) -> Callable[[JobRequest], JobRequest] | None:
        self.calls += 1
        value = tag.get()
        if value is None:
            return None
        key = self.key
        return lambda request: request.with_meta({**request.meta, key: value})


async def metas(app: Conveyor, ids: Sequence[int]) -> list[dict[str, Any]]:
    found = [await app.get_job(i) for i in ids]
    return [dict(job.meta) for job in found if job is not None]


async def test_every_insert_path_carries_what_the_hook_adds(any_engine: Engine, caller_conn: Any) -> None:
    app = Conveyor(engine=any_engine)
    hook = TagHook()
    app.before_enqueue(hook)
    token = tag.set("ctx-1")
    try:
        single = await app.enqueue(JobRequest(WORKER, meta={"mine": 1}))
        bulk = await app.enqueue_many([JobRequest(WORKER, args={"i": i}) for i in range(250)])
        streamed = await app.enqueue_many(JobRequest(WORKER, args={"i": i}) for i in range(3))
        flow = Workflow()
        flow.add("a", JobRequest(WORKER))
        flow.add("b", JobRequest(WORKER), deps=["a"])
        steps = await app.enqueue_many(flow)
        unique = await app.enqueue(JobRequest(WORKER, args={"u": 1}, unique=True))
        again = await app.enqueue(JobRequest(WORKER, args={"u": 1}, unique=True))
        locked = await app.enqueue(JobRequest(WORKER, lock="account-7"))
        in_transaction = await app.enqueue(JobRequest(WORKER), conn=caller_conn)
        await caller_conn.commit()
    finally:
        tag.reset(token)
    assert again.conflict and again == unique
    ids = [single, *bulk, *streamed, *steps, unique, locked, in_transaction]
    found = await metas(app, ids)
    assert len(found) == len(ids)
    assert all(meta.get("tag") == "ctx-1" for meta in found), [m for m in found if m.get("tag") != "ctx-1"]
    assert found[0]["mine"] == 1
    step_metas = await metas(app, list(steps))
    assert [m["name"] for m in step_metas] == ["a", "b"] and step_metas[1]["deps"] == ["a"]
    assert (await metas(app, [locked]))[0]["lock_key"] == "account-7"
    assert hook.calls == 8  # once per enqueue call, not per request


async def test_a_blocking_enqueue_reads_the_callers_context_in_its_thread(any_engine: Engine) -> None:
    app = Conveyor(engine=any_engine)
    app.before_enqueue(TagHook())

    def from_a_thread() -> list[int]:
        tag.set("thread")  # the thread's own context (asyncio.to_thread runs in a copy)
        first = app.enqueue_sync(JobRequest(WORKER))
        return [first, *app.enqueue_many_sync([JobRequest(WORKER), JobRequest(WORKER)])]

    ids = await asyncio.to_thread(from_a_thread)
    assert [m.get("tag") for m in await metas(app, ids)] == ["thread"] * 3


async def test_nothing_to_add_leaves_requests_alone_and_hooks_apply_in_order(any_engine: Engine) -> None:
    app = Conveyor(engine=any_engine)
    seen: list[str] = []

    def first() -> Callable[[JobRequest], JobRequest]:
        return lambda r: (seen.append("first"), r.with_meta({**r.meta, "order": ["first"]}))[1]

    def second() -> Callable[[JobRequest], JobRequest]:
        def add(r: JobRequest) -> JobRequest:
            seen.append("second")
            return r.with_meta({**r.meta, "order": [*r.meta["order"], "second"]})

        return add

    tagging = TagHook()
    remove_tag = app.before_enqueue(tagging)
    plain = await app.enqueue(JobRequest(WORKER, meta={"kept": True}))
    assert (await metas(app, [plain])) == [{"kept": True}] and tagging.calls == 1
    remove_first = app.before_enqueue(first)
    app.before_enqueue(second)
    ordered = await app.enqueue(JobRequest(WORKER))
    assert (await metas(app, [ordered]))[0]["order"] == ["first", "second"]
    assert seen == ["first", "second"]
    remove_first()
    remove_tag()
    seen.clear()
    with _tagged("gone"):
        later = await app.enqueue(JobRequest(WORKER, meta={"order": []}))
    assert (await metas(app, [later])) == [{"order": ["second"]}] and tagging.calls == 2


@contextlib.contextmanager
def _tagged(value: str) -> Iterator[None]:
    token = tag.set(value)
    try:
        yield
    finally:
        tag.reset(token)


async def test_a_transform_returning_no_request_is_refused_before_anything_is_written(
    any_engine: Engine,
) -> None:
    app = Conveyor(engine=any_engine, testing="manual")
    remove = app.before_enqueue(lambda: lambda request: None)
    try:
        with pytest.raises(ValidationError, match="must return a JobRequest"):
            await app.enqueue_many([JobRequest("a.B"), JobRequest("a.C")])
    finally:
        remove()
    assert await app.list_jobs() == []
