"""An app pointed at a database it cannot reach says why within seconds, from any entry point."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

import pytest

from conveyor import Conveyor, JobRequest
from conveyor.errors import DatabaseUnreachableError


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql://postgres@127.0.0.1:5432/no_such_db", 'database "no_such_db" does not exist'),
        ("postgresql://no_such_role@127.0.0.1:5432/test", 'role "no_such_role" does not exist'),
        (f"postgresql://postgres@127.0.0.1:{free_port()}/test", "Connection refused"),
    ],
    ids=["no-database", "no-role", "no-server"],  # stable across collections (pytest-xdist)
)
async def test_start_and_enqueue_fail_fast_with_the_servers_reason(url: str, reason: str) -> None:
    for action in ("start", "enqueue"):
        app = Conveyor(url, queues={"default": 1})
        began = time.monotonic()
        with pytest.raises(DatabaseUnreachableError, match=reason):
            if action == "start":
                await app.start()
            else:
                await app.enqueue(JobRequest("a.b"))
        assert time.monotonic() - began < 5
        await app.close()


async def test_a_node_starts_its_process_workers_before_connecting_and_stops_them_when_that_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool's workers (fresh interpreters, slow to import) start before the database opens, so
    their imports overlap connecting; a start that then fails leaves none of them running."""
    from conveyor._runtime.process_pool import ProcessPool

    events: list[str] = []
    pools: list[ProcessPool] = []
    start = ProcessPool.start

    async def recording(pool: ProcessPool, preload: Sequence[str] = ()) -> None:
        events.append("pool started")
        pools.append(pool)
        await start(pool, preload)

    monkeypatch.setattr(ProcessPool, "start", recording)
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    app = Conveyor(url, queues={"cpu": {"limit": 2, "executor": "process"}}, processes=2)
    app.before_connect = lambda: events.append("connecting")
    with pytest.raises(DatabaseUnreachableError, match="Connection refused"):
        await app.start()
    assert events == ["pool started", "connecting"]
    (pool,) = pools
    assert pool._stopped and not pool._all  # every worker it started is stopped
    assert app.node is None
    await app.close()
