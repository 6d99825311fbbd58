"""A node embedded in a web application, with the ASGI nudge endpoint mounted beside it.

The application starts the node when the server starts (ASGI lifespan) and stops it gracefully at
shutdown. FastAPI and Starlette do the same with ``lifespan=`` (see docs/guides/running-nodes.md);
this example speaks plain ASGI so that it needs no web framework, and plays the server itself.

The nudge: here another service writes a job row with plain SQL, which sends no notification, and
the node polls only every 30 seconds. ``POST /jobs/nudge?queue=default`` makes it fetch at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import psycopg
from _support import DATABASE_URL, PREFIX, wait_until_final
from psycopg import sql
from psycopg.types.json import Jsonb

from conveyor import Conveyor, job
from conveyor.web import NudgeEndpoint

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

conveyor = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"default": 5}, notifications=False, poll_interval=30)


#: Paths the job recorded (printed once it has run, so the output's order never depends on timing).
VISITS: list[str] = []


@job
async def record_visit(path: str) -> None:
    VISITS.append(path)


class WebApp:
    """The web application: the lifespan runs the node; /jobs/nudge is Conveyor's endpoint."""

    def __init__(self) -> None:
        self.nudge = NudgeEndpoint(conveyor)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await conveyor.start()  # what FastAPI's lifespan does with `async with conveyor:`
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await conveyor.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        elif scope["path"] == "/jobs/nudge":
            await self.nudge(scope, receive, send)
        else:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})


async def post(app: WebApp, path: str, query: bytes) -> tuple[int, bytes]:
    """Play an ASGI server for one POST request; return the status and the body."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "query_string": query, "headers": []}
    await app(scope, receive, send)
    return sent[0]["status"], sent[1]["body"]


def insert_with_plain_sql(path: str) -> int:
    """Another service writes a job directly: a row, but no notification."""
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("INSERT INTO {} (worker, queue, args) VALUES (%s, 'default', %s) RETURNING id").format(
                sql.Identifier(PREFIX, "oban_jobs")
            ),
            (record_visit.definition.name, Jsonb({"path": path})),
        ).fetchone()
        assert row is not None
        return int(row[0])


async def main() -> None:
    await conveyor.install()
    await conveyor.delete_jobs()
    app = WebApp()
    startup: asyncio.Queue[Message] = asyncio.Queue()
    replies: list[Message] = []
    replied = asyncio.Event()

    async def lifespan_send(message: Message) -> None:
        replies.append(message)
        replied.set()

    server = asyncio.create_task(app({"type": "lifespan"}, startup.get, lifespan_send))
    await startup.put({"type": "lifespan.startup"})
    await replied.wait()
    print(f"server: {replies[-1]['type']}")

    await asyncio.sleep(0.3)  # let the node's first poll pass, so only a nudge can find the job
    job_id = insert_with_plain_sql("/pricing")
    started = time.monotonic()
    status, body = await post(app, "/jobs/nudge", b"queue=default")
    print(f"POST /jobs/nudge?queue=default -> {status} {body.decode()}")
    await wait_until_final(app=conveyor, ids=[job_id], timeout=10)
    print(f"job ran: visit to {', '.join(VISITS)}")
    print(f"job done within 5 s of the nudge (poll interval 30 s): {time.monotonic() - started < 5}")

    status, body = await post(app, "/jobs/nudge", b"queue=no%20spaces")
    print(f"POST /jobs/nudge?queue=no%20spaces -> {status}")

    await startup.put({"type": "lifespan.shutdown"})
    await server
    print(f"server: {replies[-1]['type']}")


if __name__ == "__main__":
    asyncio.run(main())
