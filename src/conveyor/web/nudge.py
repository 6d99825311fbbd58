"""An ASGI endpoint that nudges a queue: ``POST /?queue=mail`` makes its producers fetch now.

Framework-neutral: mount it in Starlette/FastAPI (``app.mount("/jobs/nudge", NudgeEndpoint(conveyor))``)
or any ASGI server. Useful when jobs are written by something other than Conveyor (SQL, another
service) and should start without waiting for the next poll.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import orjson

from conveyor._options import check_queue
from conveyor.app import Conveyor
from conveyor.errors import ValidationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class NudgeEndpoint:
    """An ASGI app that nudges a queue: ``POST ?queue=mail`` (or no queue: all) answers 202 and makes the
    producers of every node fetch now (``Conveyor.nudge``); another method gets 405, a bad queue name 400."""

    def __init__(self, conveyor: Conveyor) -> None:
        self.conveyor = conveyor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _respond(send, 405, {"error": "use POST"}, [(b"allow", b"POST")])
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        queue = query.get("queue", [None])[0]
        try:
            if queue is not None:
                check_queue(queue)
        except ValidationError as exc:
            await _respond(send, 400, {"error": str(exc)})
            return
        await self.conveyor.nudge(queue)
        await _respond(send, 202, {"nudged": queue or "*"})


async def _respond(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": data})
