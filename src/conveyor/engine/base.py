"""The engine seam: the one interface through which Conveyor touches a database.

An engine owns every statement (insert, fetch, ack, stage, prune, rescue, leadership, notifications,
job queries, queue state). The app and the runtime depend on this Protocol only, so a new database
slots in by implementing it and registering a factory in ``tests/conformance/conftest.py``
(``ENGINES``): the conformance suite in ``tests/conformance/engine/`` is the executable form of
the docstrings of its roles, one Protocol per duty in ``conveyor.engine.roles`` (see
``docs/adding-an-engine.md``).

Conventions every method keeps:

* Time. Every time-dependent operation takes an optional ``now`` (a timezone-aware datetime; a naive
  one is refused with ``ValidationError`` before anything is written). ``None`` means the engine's
  own clock (the database server's, or the machine's where there is no server); tests pass a value
  to control time. Times read back are aware UTC datetimes, exact to the microsecond.
* Ids. Job ids are positive integers, increasing in insertion order and never reused, even after the
  newest job is deleted. Methods returning ids return them in ascending order unless stated.
* Atomicity. Each method's change to jobs is one transaction: it happens entirely or not at all,
  and the notifications it causes go out when (and only if) it commits. ``prune_jobs`` and
  ``rescue_jobs`` may commit their later steps (each batch of a prune, cron ticks; forgetting dead
  producers) separately: each step is safe to repeat on the next pass.
* Producer uuids are UUIDs in canonical lowercase text (``str(uuid.uuid4())``): PostgreSQL stores
  them as ``uuid`` and refuses anything else, and rescue matches them against ``attempted_by``.
* Notifications. Channel names are logical ("insert", "signal", "leader"); payloads are JSON
  objects. Besides ``notify``, operations send these themselves:

  - ``{"queue": q}`` on "insert", once per queue that gained *available* jobs, after ``insert``
    (and ``insert_sync``), ``retry_jobs``, ``release_jobs``, ``rescue_jobs`` (rescued to available,
    not discarded), ``stage_jobs`` and ``insert_cron_jobs``. Nothing is sent when no job became
    available (scheduled inserts, stale releases, already handled ticks). ``fetch_jobs`` and
    ``ack_jobs`` send nothing.
  - ``{"action": "pkill", "job_id": id}`` on "signal", from ``cancel_jobs``, for each cancelled job
    that was executing (its node stops running it).
  - ``{"action": "resign", "node": node, "name": name}`` on "leader", from ``resign_leader`` when a
    lease was dropped.
  - ``{"ids": [id, ...]}`` on "ended", from ``ack_jobs`` (the ids of the acks applied, whatever
    state they wrote) and ``cancel_jobs`` (the ids cancelled), at most 500 ids per notification:
    whoever waits for a job (``Conveyor.wait``) looks at it again.
  - ``{"job_id": id}`` on "inbox", from ``signal_job`` when the job signalled is executing: its
    node hands the message to the running job.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from conveyor.engine.roles import (
    Abandoning,
    Cluster,
    Failures,
    HotPath,
    Inserting,
    Jobs,
    Lifecycle,
    Listener,
    NotificationHandler,
    Notifications,
    Polling,
    Relay,
    Schema,
    SchemaReport,
    Stats,
    Workflows,
)

__all__ = ["Abandoning", "Engine", "Listener", "NotificationHandler", "SchemaReport"]


@runtime_checkable
class Engine(
    Lifecycle,
    Schema,
    Inserting,
    Jobs,
    Stats,
    HotPath,
    Polling,
    Notifications,
    Cluster,
    Workflows,
    Relay,
    Failures,
    Protocol,
):
    """What every database engine provides: every required role (``conveyor.engine.roles``), one
    per duty. See ``docs/architecture.md`` for how it is used. ``Abandoning`` is optional and not
    part of it."""
