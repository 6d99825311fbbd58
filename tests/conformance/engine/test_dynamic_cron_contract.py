"""Stored cron entries (``oban_crons``) through the engine API, on every engine."""

from __future__ import annotations

from datetime import UTC

from conveyor.engine.base import Engine
from conveyor.fleet import StoredCron


async def test_stored_entries_are_added_listed_updated_and_deleted(any_engine: Engine) -> None:
    opts = {"args": {"n": 1, "deep": {"x": [1, 2]}}, "timezone": "Europe/Paris", "queue": "mail"}
    first = StoredCron("b-entry", "*/5 * * * *", "app.jobs.send", opts)
    assert await any_engine.add_cron(first)
    assert await any_engine.add_cron(StoredCron("a-entry", "@daily", "app.jobs.other", paused=True))
    assert not await any_engine.add_cron(StoredCron("b-entry", "@hourly", "x.y"))  # the name is taken

    listed = await any_engine.list_crons()
    assert [c.name for c in listed] == ["a-entry", "b-entry"]
    a, b = listed
    assert (a.expression, a.worker, a.opts, a.paused) == ("@daily", "app.jobs.other", {}, True)
    assert (b.expression, b.worker, b.opts, b.paused) == ("*/5 * * * *", "app.jobs.send", opts, False)
    assert b.inserted_at is not None and b.inserted_at.tzinfo is UTC and b.updated_at is not None

    assert await any_engine.update_cron(StoredCron("b-entry", "@hourly", "app.jobs.send", {"args": {}}, True))
    assert not await any_engine.update_cron(StoredCron("missing", "@hourly", "x.y"))
    b = (await any_engine.list_crons())[1]
    assert (b.expression, b.opts, b.paused) == ("@hourly", {"args": {}}, True)

    assert await any_engine.delete_cron("a-entry")
    assert not await any_engine.delete_cron("a-entry")
    assert [c.name for c in await any_engine.list_crons()] == ["b-entry"]


async def test_declared_queues_are_put_replaced_listed_and_deleted(any_engine: Engine) -> None:
    from conveyor.fleet import StoredQueue

    opts = {"local_limit": 3, "global_limit": {"allowed": 2, "partition": {"args": ["t"]}}, "paused": False}
    await any_engine.put_stored_queue(StoredQueue("mail", opts, {"nodes": ["a", "b"]}))
    await any_engine.put_stored_queue(StoredQueue("bulk", {"local_limit": 1}))
    await any_engine.put_stored_queue(StoredQueue("bulk", {"local_limit": 9, "paused": True}))  # replaced
    listed = await any_engine.list_stored_queues()
    assert [(q.name, q.opts, q.only) for q in listed] == [
        ("bulk", {"local_limit": 9, "paused": True}, {}),
        ("mail", opts, {"nodes": ["a", "b"]}),
    ]
    assert listed[0].updated_at is not None and listed[0].updated_at.tzinfo is UTC
    assert await any_engine.delete_stored_queue("bulk")
    assert not await any_engine.delete_stored_queue("bulk")
    assert [q.name for q in await any_engine.list_stored_queues()] == ["mail"]
