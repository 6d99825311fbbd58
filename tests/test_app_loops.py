"""An app outlives event loops: a module-level app serves one pytest-asyncio test after another
(each on a loop of its own), a second ``asyncio.run``, and a sync script exits cleanly."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor import Conveyor, JobRequest, JobState
from conveyor.errors import ConveyorError
from tests.conformance import api_jobs
from tests.conftest import DSN
from tests.helpers import poll

SCHEMA = f"conveyor_loops_{uuid.uuid4().hex[:10]}"
SQLITE_FILE = Path(f"/tmp/conveyor-loops-{uuid.uuid4().hex[:10]}.db")

# Made once, at import, as an application module would: every test below runs on a new loop.
APPS = {
    "postgres": Conveyor(DSN, prefix=SCHEMA, queues={"default": 2}, poll_interval=0.05, leadership=False),
    "sqlite": Conveyor(
        f"sqlite:///{SQLITE_FILE}", queues={"default": 2}, poll_interval=0.05, leadership=False
    ),
}


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    for app in APPS.values():
        app.install_sync()
    yield
    for app in APPS.values():
        app.close_sync()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE'.encode())
    for path in SQLITE_FILE.parent.glob(f"{SQLITE_FILE.name}*"):
        path.unlink()


@pytest.fixture(params=sorted(APPS))
def app(request: pytest.FixtureRequest) -> Conveyor:
    return APPS[request.param]


@pytest.mark.parametrize("round_", range(4))
async def test_one_test_after_another(app: Conveyor, round_: int) -> None:
    job_id = await app.enqueue(api_jobs.greet.new(f"round {round_}"))
    stored = await app.get_job(job_id)
    assert stored is not None and stored.args == {"name": f"round {round_}"}


@pytest.mark.parametrize("round_", range(3))
async def test_a_node_left_running_by_the_last_test_is_replaced(app: Conveyor, round_: int) -> None:
    """Each round starts the node and never stops it: its loop ends with the test. The next
    round's start builds a new node on the new loop, which runs the job."""
    await app.start()
    assert app.node is not None and app.node.started
    job_id = await app.enqueue(api_jobs.greet.new(f"node {round_}"))
    await poll(
        lambda: app.get_job(job_id),
        lambda found: found is not None and found.state is JobState.COMPLETED,
        what=f"job {job_id} to complete",
    )


def test_an_app_in_use_on_a_loop_that_still_runs_refuses_another(app: Conveyor) -> None:
    ready, done = threading.Event(), threading.Event()
    loop = asyncio.new_event_loop()

    async def hold() -> None:
        await app.get_job(1)
        ready.set()
        await asyncio.to_thread(done.wait)
        await app.close()  # that loop's own clean end

    thread = threading.Thread(target=loop.run_until_complete, args=(hold(),))
    thread.start()
    try:
        assert ready.wait(10)
        with pytest.raises(ConveyorError, match="event loop that still runs"):
            asyncio.run(app.get_job(1))
    finally:
        done.set()
        thread.join()
        loop.close()
    asyncio.run(app.get_job(1))  # that loop is done: this one may use the app


SCRIPT = """
import asyncio, sys
from conveyor import Conveyor, job

@job
def hello(name: str) -> None: ...

app = Conveyor(sys.argv[1], prefix=sys.argv[2]) if sys.argv[2] else Conveyor(sys.argv[1])
app.install_sync()

async def main():
    return await app.enqueue(hello.new(name="x"))

first = asyncio.run(main())
second = asyncio.run(main())
third = app.enqueue_sync(hello.new(name="y"))
print(first, second, third)
"""


@pytest.mark.parametrize("engine", ["postgres", "sqlite"])
def test_a_script_runs_on_several_loops_and_exits_cleanly(engine: str, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    schema = f"conveyor_script_{uuid.uuid4().hex[:8]}"
    url, prefix = (DSN, schema) if engine == "postgres" else (f"sqlite:///{tmp_path / 'x.db'}", "")
    try:
        done = subprocess.run(
            [sys.executable, "-X", "dev", str(script), url, prefix],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "2", "3"]
    assert "Task was destroyed" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_a_call_waiting_on_the_portal_fails_when_the_portal_stops() -> None:
    """A thread job enqueueing through ``*_sync`` while its app closes must not wait for ever (it
    held the interpreter at exit)."""
    from conveyor._app.portal import Portal

    portal = Portal("test-portal")
    started = threading.Event()
    outcome: list[BaseException | None] = []

    async def never() -> None:
        started.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            portal.call(never)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=caller)
    thread.start()
    assert started.wait(5)
    portal.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome[0], ConveyorError)
    assert "closed while this call ran" in str(outcome[0])


def test_a_call_fails_when_the_portal_stops_before_it_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The portal may stop between a call's submission and its registration as pending (its
    coroutine already running): the call must fail then too, not wait for ever."""
    from conveyor._app.portal import Portal

    portal = Portal("test-portal")
    started = threading.Event()
    submit = asyncio.run_coroutine_threadsafe

    def submit_then_stop(coroutine: Any, loop: asyncio.AbstractEventLoop) -> Any:
        future = submit(coroutine, loop)
        assert started.wait(5)
        portal.stop()  # before call() has put the future among the pending ones
        return future

    async def never() -> None:
        started.set()
        await asyncio.Event().wait()

    outcome: list[BaseException | None] = []

    def caller() -> None:
        try:
            portal.call(never)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", submit_then_stop)
    thread = threading.Thread(target=caller, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome[0], ConveyorError)
    assert "closed while this call ran" in str(outcome[0])


async def test_sync_twins_of_an_app_given_an_engine_run_on_the_engines_loop(tmp_path: Path) -> None:
    """An engine handed in is bound to the loop that opened it: a blocking call from another thread
    runs there (using it from the portal's loop too mixed two loops in one pool and hung)."""
    from conveyor.engine.sqlite import SqliteEngine

    engine = SqliteEngine(str(tmp_path / "given.db"))
    app = Conveyor(engine=engine)
    await app.install()
    try:
        ids = await asyncio.to_thread(lambda: [app.enqueue_sync(JobRequest("a.B")) for _ in range(3)])
        assert len(await app.list_jobs()) == 3 == len(set(ids))
    finally:
        await app.close()
        await engine.close()
