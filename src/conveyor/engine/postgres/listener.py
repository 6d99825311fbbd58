"""LISTEN on a dedicated connection and hand each notification to the node, reconnecting on loss."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

import psycopg

from conveyor._tasks import join
from conveyor.engine import _payloads as payloads
from conveyor.engine.base import NotificationHandler
from conveyor.engine.postgres.dsn import scrub
from conveyor.errors import one_line

log = logging.getLogger("conveyor.listener")


#: Seconds between attempts to reconnect, growing with consecutive failures. Capped at 1 s: the
#: reconnect is how a node learns that the server is back, and it fetches at once when it does.
RECONNECT_DELAYS = (0.1, 0.25, 0.5, 1.0)


class PostgresListener:
    """One connection per node listening on ``<prefix>.oban_<name>`` channels."""

    def __init__(
        self,
        dsn: str,
        prefix: str,
        names: Iterable[str],
        handler: NotificationHandler,
        *,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._dsn = dsn
        self._channels = {f"{prefix}.oban_{name}": name for name in names}
        self._handler = handler
        # Awaited after a lost connection is back, before the handler hears "connected".
        self._on_reconnect = on_reconnect
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="conveyor-listener")
        # Wait until LISTEN is in place so nothing sent after start() is missed.
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if self._task.done():
            self._task.result()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await join(self._task)
            self._task = None

    async def _run(self) -> None:
        failures = 0
        lost = False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as conn:
                    for channel in self._channels:
                        await conn.execute(f'LISTEN "{channel}"'.encode())
                    failures = 0
                    if lost:
                        lost = False
                        log.warning("listener connection is back")
                        await self._reconnected()
                    self._ready.set()
                    # Anything sent while we were away was missed: tell the node to look again.
                    self._handler("listener", {"event": "connected"})
                    async for note in conn.notifies():
                        self._dispatch(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except psycopg.OperationalError as exc:
                if not self._ready.is_set() and failures == 0:
                    raise
                delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
                failures += 1
                # One line when the connection is lost (and one when it is back): the attempts in
                # between, several a second, would repeat libpq's multi-line message each time.
                level = logging.DEBUG if lost else logging.WARNING
                reason = one_line(scrub(str(exc), self._dsn))
                log.log(level, "listener connection lost (%s); reconnecting in %.1fs", reason, delay)
                lost = True
                await asyncio.sleep(delay)

    async def _reconnected(self) -> None:
        if self._on_reconnect is None:
            return
        try:
            await self._on_reconnect()
        except Exception:
            log.exception("the reconnect hook failed")

    def _dispatch(self, channel: str, text: str) -> None:
        name = self._channels.get(channel)
        payload = payloads.decode(text)
        if name is None or payload is None:
            log.debug("ignoring notification on %s: %r", channel, text[:200])
            return
        try:
            self._handler(name, payload)
        except Exception:
            log.exception("notification handler failed for %s %r", name, payload)
