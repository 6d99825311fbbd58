"""Telemetry: named events with data, delivered to the handlers attached to one app.

``app.on("job.", handler)`` (or ``app.telemetry.attach(handler, prefix="job.")``) calls
``handler(event, data)`` for every event whose name starts with the prefix; ``""`` means every
event. Handlers run inline on the task that emits the event, so they must be quick, and they must not
modify ``data`` (every handler of an event gets the same dict). A handler that raises (anything:
``SystemExit`` and ``KeyboardInterrupt`` too) is logged on ``conveyor.telemetry``, its first
failure with the traceback and then at most once a minute with a count, and the error goes no
further: it never reaches the job, the service that emitted the event, or the other handlers.

Events are named ``subject.verb``. Durations are seconds (float); ``job`` is the ``Job`` as fetched.

Jobs (every run emits ``job.start`` and then exactly one of ``job.stop`` or ``job.exception``):

- ``job.start``: job, worker, queue, attempt, max_attempts, queue_time (scheduled_at to attempted_at)
- ``job.stop`` (the code returned, or returned or raised an outcome: ``Snooze``, ``Cancel``,
  ``Discard``, ``Record``): the fields of ``job.start`` and duration, state (the ``JobState`` the
  attempt ends in), outcome (``"completed"``, ``"snoozed"``, ``"cancelled"``, ``"discarded"``),
  ack (the ``Ack`` written)
- ``job.exception`` (the code raised, timed out, was cancelled, or could not run): the fields of
  ``job.stop``, with outcome ``"retryable"``, ``"discarded"`` (no attempts left, or the row could
  not be read), ``"cancelled"`` or ``"released"`` (given back at shutdown: state ``available``,
  ack None), and error_type (the exception's class name), message, exception (the exception
  itself), final (True when the job will not run again)
- ``job.progress``: job, progress (every field the attempt reported so far)

Node, producers and acker:

- ``node.start``: node, name (the instance), queues (names); ``node.stop``: node, name, released
  (jobs given back at the shutdown deadline)
- ``node.signal``: node, action, queue (None for ``pkill``), job_id (``pkill`` only), ident,
  from (``"notification"``: arrived on the signal channel, from any client; ``"local"``: this app's
  own call, applied at once), payload
- ``queue.paused``, ``queue.resumed``: node, queue; ``queue.scaled``: node, queue, limit, previous
  (the limit before), limits (the fleet-wide ``FetchLimits``); ``queue.started``: node, queue,
  limit; ``queue.stopped``: node, queue. Emitted only when a running node's queue changes.
- ``producer.fetch``: node, queue, demand (free slots asked for), count (jobs claimed), duration,
  capped (a fleet-wide limit stopped the claim)
- ``acker.acked``: count (acks in the batch), applied (those the database applied: the others were
  stale), duration, states (count per state name, e.g. ``{"completed": 98, "retryable": 2}``)
- ``stager.staged``: count, queues (count per queue)

Cluster duties (on the leader):

- ``leader.elected``, ``leader.lost``, ``leader.resigned``: node, name
- ``lifeline.rescued``: count, available, discarded (job ids)
- ``pruner.pruned``: count, completed, cancelled, discarded (how many of each state went)
- ``cron.inserted``: count, job_ids
- ``priority.aged``: count, job_ids (the waiting jobs that gained a step of priority)
- ``sweeper.settled``: count, available, cancelled (job ids)

The emit path is cheap: which handlers want an event is worked out once per event name (again
after each attach or detach), and the emitting code asks ``listens(event)`` before it builds the
data of a costly event, so an event nobody listens to costs one dictionary lookup.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from conveyor.errors import ValidationError

log = logging.getLogger("conveyor.telemetry")

Handler = Callable[[str, dict[str, Any]], None]

#: After its first failure (logged at once, with the traceback), a failing handler is logged at most
#: once per this many seconds, with the count of failures in between.
FAILURE_LOG_INTERVAL = 60.0
#: Event names whose routes are remembered at most (emitting code uses a fixed catalogue; this only
#: bounds a program that makes up names).
MAX_ROUTES = 1024


class _Attachment:
    """One ``attach`` call: the handler, its prefix, and the record of its failures."""

    __slots__ = ("handler", "logged_at", "prefix", "unlogged")

    def __init__(self, handler: Handler, prefix: str) -> None:
        self.handler = handler
        self.prefix = prefix
        #: Failures since the last one logged; when that was (monotonic seconds; None: never).
        self.unlogged = 0
        self.logged_at: float | None = None


Routes = dict[str, tuple[_Attachment, ...]]


class Telemetry:
    """The handlers attached to one app, and the events its node emits to them."""

    def __init__(self) -> None:
        # One snapshot, replaced as a whole on attach and detach: an emit on the node's loop never
        # sees a route list from one snapshot with the attachments of another.
        self._state: tuple[tuple[_Attachment, ...], Routes] = ((), {})
        self._lock = threading.Lock()

    def attach(self, handler: Handler, prefix: str = "") -> Callable[[], None]:
        """Call ``handler(event, data)`` for every event whose name starts with ``prefix``.

        Returns a function that detaches the handler (calling it again does nothing).
        """
        if not callable(handler):
            raise ValidationError("handler", handler, "must be callable as handler(event, data)")
        if not isinstance(prefix, str):
            raise ValidationError("prefix", prefix, "must be a string (an event name or its start)")
        entry = _Attachment(handler, prefix)
        with self._lock:
            self._state = ((*self._state[0], entry), {})

        def detach() -> None:
            with self._lock:
                attached = self._state[0]
                if entry in attached:
                    self._state = (tuple(a for a in attached if a is not entry), {})

        return detach

    def listens(self, event: str) -> bool:
        """Whether any handler wants ``event``: emitting code asks first when its data costs."""
        attached, routes = self._state
        if not attached:  # the common case: nobody listens to anything
            return False
        route = routes.get(event)
        return bool(route if route is not None else self._route(event))

    def emit(self, event: str, **data: Any) -> None:
        self.dispatch(event, data)

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """``emit`` with the data as a dict, which the handlers get as it is (the hot path's way:
        no copy of keyword arguments)."""
        route = self._state[1].get(event)
        if route is None:
            route = self._route(event)
        if not route:
            return
        for entry in route:
            try:
                entry.handler(event, data)
            except BaseException as exc:  # nothing a handler raises may stop a node or a job
                self._failed(entry, event, exc)

    def _route(self, event: str) -> tuple[_Attachment, ...]:
        attached, routes = self._state
        route = routes.get(event)
        if route is None:
            route = tuple(entry for entry in attached if event.startswith(entry.prefix))
            if len(routes) >= MAX_ROUTES:
                routes.clear()
            routes[event] = route
        return route

    @staticmethod
    def _failed(entry: _Attachment, event: str, exc: BaseException) -> None:
        """Log a handler's failure: the first at once, then at most once per interval."""
        now = time.monotonic()
        if entry.logged_at is None:
            entry.logged_at = now
            log.error(
                "telemetry handler %r failed on %s (it stays attached; further failures are logged "
                "at most every %gs)",
                entry.handler,
                event,
                FAILURE_LOG_INTERVAL,
                exc_info=exc,
            )
            return
        entry.unlogged += 1
        if now - entry.logged_at >= FAILURE_LOG_INTERVAL:
            log.error(
                "telemetry handler %r failed %d more times in %.0fs, the last on %s: %s: %s",
                entry.handler,
                entry.unlogged,
                now - entry.logged_at,
                event,
                type(exc).__name__,
                exc,
            )
            entry.logged_at, entry.unlogged = now, 0
