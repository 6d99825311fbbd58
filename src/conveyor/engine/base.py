"""The engine seam: the one interface through which Conveyor touches a database.

An engine owns every statement (insert, fetch, ack, stage, prune, rescue, leadership, notifications,
job queries, queue state). The app and the runtime depend on this Protocol only, so a new database
slots in by implementing it and registering a factory in ``tests/conformance/conftest.py``
(``ENGINES``): the conformance suite in ``tests/conformance/`` is the executable form of the
docstrings below (see ``docs/adding-an-engine.md``).

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from conveyor.acks import Ack
from conveyor.filters import JobFilter
from conveyor.fleet import (
    CronTick,
    LeaderInfo,
    ProducerBeat,
    ProducerInfo,
    QueuePoll,
    QueueState,
    RescueResult,
)
from conveyor.job import Job, JobState
from conveyor.limits import FetchLimits
from conveyor.request import JobRequest
from conveyor.retention import Pruned, Retention
from conveyor.stats import JobCount, JobStats, QueueCounts, StatsQuery

#: Receives the logical channel name and the decoded payload of each notification.
NotificationHandler = Callable[[str, dict[str, Any]], None]


@runtime_checkable
class Engine(Protocol):
    """What every database engine provides. See ``docs/architecture.md`` for how it is used."""

    #: Short engine name ("postgres", "sqlite"), used in messages and metrics.
    name: str

    async def open(self) -> None:
        """Acquire connections (and fail fast, with the reason, when the database cannot be reached).
        Calling it twice is harmless. Methods that use the engine's own connections raise
        ``EngineClosedError`` (a transient error) before ``open`` and after ``close``. An engine is
        not meant to be opened again after ``close``: build a new one."""

    async def close(self) -> None:
        """Release every connection. Calling it twice, or before ``open``, is harmless."""

    def abandon(self) -> None:
        """Let go of what ``open`` acquired on an event loop that is gone (closed, or stopped for
        good), without that loop: close what can be closed synchronously, drop the rest. The engine
        can then be opened again on another loop (``Conveyor`` does this when an app is used from a
        new loop: a pytest-asyncio test after another, a second ``asyncio.run``)."""

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        """Create or upgrade the schema (idempotent); return the schema version now installed."""

    async def uninstall(self) -> None:
        """Drop every object the schema installed; ``schema_version`` is None afterwards."""

    async def schema_version(self) -> int | None:
        """The installed schema version, or None when nothing is installed."""

    async def check_schema(self) -> None:
        """Raise SchemaError, saying what to run, unless the schema is installed and current."""

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any = None,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        """Insert jobs atomically and return their ids in input order (an empty input: an empty
        sequence). The built-in engines return a ``JobIds``, gathered chunk by chunk at 8 bytes an
        id; ``Conveyor.enqueue_many`` makes one of any other sequence.

        A request that matches a job already stored, where a feature says it must not be inserted
        twice (unique jobs), gets that job's id as an ``ExistingJobId`` (``conflict`` True) in its
        place, and no row; every other id is a plain ``int`` (or a ``JobId``) of a new row.

        Each job is ``available`` when its ``scheduled_at`` (or ``now`` + ``schedule_in``; ``now``
        when neither is given) is at or before ``now``, else ``scheduled``; ``inserted_at`` is
        ``now``; ``attempt`` 0. Anything in ``requests`` that is not a ``JobRequest`` fails the whole
        call with a message naming ``JobRequest``; an iterable that raises midway writes nothing.
        Notifies "insert" once per queue that gained available jobs.

        With ``conn`` (a caller's connection or session) the insert joins the caller's transaction:
        their commit makes the jobs visible and sends the insert notifications, their rollback
        leaves nothing. Large inputs are written in bounded chunks, never one giant statement.

        ``hold`` lists input positions whose jobs are then made ``suspended`` in the same
        transaction (workflow steps with dependencies: no node fetches them until they settle).
        """

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        """``insert`` through a caller's synchronous connection or session."""

    # -- managing jobs -----------------------------------------------------------------------
    async def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None. A row that cannot be decoded still comes back, with
        ``Job.unreadable`` saying why."""

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        """Matching jobs, newest (highest id) first, at most ``criteria.limit`` (100 when None).

        Criteria combine with AND; each list matches any of its values, except ``tags``, which
        matches jobs carrying all of them; ``before_id`` keeps ids below it (the next page),
        ``after_id`` ids above it."""

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        """Cancel every matching job that is not final yet (available, scheduled, retryable,
        executing): state ``cancelled``, ``cancelled_at`` = now. Final jobs are left alone. With
        ``criteria.limit``, the lowest matching ids go first. Return the ids cancelled, ascending.

        For each job that was executing, send ``{"action": "pkill", "job_id": id}`` on "signal" so
        its node stops it; that node's late ack no longer applies (the row is not executing). List
        each such job in its producer's row (by ``attempted_by[1]``, the producer uuid), so it keeps
        its ordered lock and global-limit slot until that producer's beats stop holding it (see
        ``record_producers``).

        ``conn``, here and in ``retry_jobs``/``delete_jobs``: a caller's async connection or
        session, as ``insert`` takes; the change and its notifications then belong to the caller's
        transaction (commit publishes both, rollback leaves nothing)."""

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        """Make every matching job that is not available or executing available now:
        ``scheduled_at`` = now, ``completed_at``/``cancelled_at``/``discarded_at`` cleared,
        ``attempt`` and ``errors`` kept, and ``max_attempts`` raised to ``attempt + 1`` if the job
        had used them all up (one more try). With ``criteria.limit``, the lowest ids go first.
        Return the ids retried, ascending; notify "insert" once per queue among them.

        A workflow step with dependencies never goes on before they finish: a ``suspended`` one is
        left alone (it waits already); any other is held ``suspended`` instead, in the same
        statement or transaction as the rest, then settled (``settle_steps``) once that is written:
        it goes on at once if its dependencies completed, waits if one is unfinished (a dependency
        this call retried too), or is cancelled again by its policy if one stays failed, and then
        is not among the ids returned."""

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        """Delete every matching job that is not executing (its node still owns it); with
        ``criteria.limit``, the lowest ids first. Return the ids deleted, ascending."""

    # -- counts and statistics -----------------------------------------------------------------
    async def count_jobs(self, criteria: JobFilter) -> int:
        """The exact number of jobs matching ``criteria``, as ``list_jobs`` selects them
        (``before_id`` included). A ``limit`` is refused with a ``ValidationError`` on ``limit``
        (``conveyor.stats.countable``)."""

    async def estimate_jobs(self, criteria: JobFilter, *, exact_up_to: int) -> JobCount:
        """How many jobs match ``criteria`` (as ``count_jobs``), fast whatever their number: exact
        (``estimated`` False) when at most ``exact_up_to`` match and counting them is quick; else an
        estimate marked ``estimated``, never below the matches counted. An engine that always
        counts quickly may always count exactly. A ``limit`` is refused as by ``count_jobs``."""

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        """One ``QueueCounts`` per queue holding jobs, by queue name: the jobs in each state, and
        the earliest ``scheduled_at`` of its available jobs; ``measured_at`` is ``now``. A count
        the engine cannot have exactly in time may be an estimate: its state is then in
        ``estimated`` (an engine that counts everything exactly never sets it)."""

    async def job_stats(self, query: StatsQuery, *, now: datetime | None = None) -> JobStats:
        """What happened in each bucket of ``query``'s window, which ends at ``now``
        (``conveyor.stats.build_stats`` lays the buckets out: boundaries at ``query.bounds(now)``,
        a start included, an end excluded). In each bucket: the jobs of ``query.queues`` (all when
        None) whose ``completed_at``, ``discarded_at`` or ``cancelled_at`` falls in it, as completed,
        discarded and cancelled; and as retried, the ``errors`` entries whose ``at`` falls in it,
        except the entry of the attempt that ended a discarded or cancelled job (its ``attempt``
        equals the job's). An entry or an ``at`` that is not a readable time is skipped, never an
        error. A figure extrapolated from a sample marks its bucket ``estimated``."""

    # -- the hot path ------------------------------------------------------------------------
    async def fetch_jobs(
        self,
        queue: str,
        demand: int,
        *,
        node: str,
        producer: str,
        now: datetime | None = None,
        limits: FetchLimits | None = None,
        ended: Sequence[tuple[int, int]] = (),
        dead_after: float | None = None,
    ) -> list[Job]:
        """Claim up to ``demand`` (>= 0) available jobs of ``queue`` whose ``attempt`` is below
        ``max_attempts``, in (priority, scheduled_at, id) order, and return them in that order.

        Each claimed job becomes ``executing`` with ``attempt`` + 1, ``attempted_at`` = now and
        ``attempted_by`` = ``(node, producer)`` (rescue and ``lost_claims`` find a producer's jobs
        by it). Scheduled, retryable and final jobs are never claimed, whatever their time.
        Safe to call from many tasks, processes and nodes at once: no job is claimed twice.
        Sends no notification.

        ``limits`` adds caps counted across the fleet, which hold however many nodes fetch at once
        (claims of one queue under a cap are serialised): with ``global_limit``, the claim stops
        where the queue's executing jobs, on every node together, would exceed it; with ``rate``, it
        starts no more than ``rate.allowed`` less the starts recorded for the queue in the ``rate.period``
        seconds before now (any start recorded after that moment counts, later ones included), and
        records its own. Under limits the result is a ``Claimed`` list whose ``capped`` says whether a
        limit, rather than an empty queue, stopped the claim.

        ``ended`` lists (job id, attempt) of this node's jobs that have finished but whose acks may not
        be written yet: a global limit does not count them as running (a row still executing that
        attempt is one of them; once acked, or claimed again under a new attempt, it is not).

        ``dead_after`` (seconds): nor does it count the executing jobs of a producer whose row has
        ``fleet.OWN_PRODUCER`` and an ``updated_at`` more than ``dead_after`` before now (other than
        ``producer``): their node stopped beating, so their slots are free before the leader
        rescues them. None: every executing job counts."""

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        """Write many finished attempts at once; return the ids written (any order).

        An ack applies only while its job is still ``executing`` the same ``attempt`` and, given
        ``node``, while that node holds the claim (``attempted_by[0]``: a node acks only its own
        runs, even where a claim undone by a crash of the server was taken again elsewhere with the
        same attempt); any other ack (a stale or future attempt, another node's claim, a job
        cancelled, rescued, released, deleted or acked already, an unknown id) is skipped and
        changes nothing. What an applied ack writes:

        - ``state`` = the ack's; ``completed_at``/``discarded_at``/``cancelled_at`` = now for
          completed/discarded/cancelled; ``scheduled_at`` = now + ``schedule_in`` when given;
        - ``error``, when given, appended to ``errors``;
        - ``meta`` merged into the job's meta key by key (top level; a given key replaces the old
          value, nested objects included; null values are kept);
        - a snooze (``snoozed``) gives the attempt back (``attempt`` - 1) and counts
          ``meta["snoozed"]`` up by one (its ``meta`` is merged too).

        Values another client stored in ``errors``/``meta`` never make the batch fail. A batch
        holds one ack per attempt; given two for the same attempt, exactly one applies (which one
        is unspecified: PostgreSQL and SQLite pick differently) and the id is returned once.
        Notifies "ended" with the ids written."""

    # -- workflows ---------------------------------------------------------------------------
    async def settle_steps(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: Any = None
    ) -> dict[int, JobState]:
        """Let suspended workflow steps go on where they can: those among ``ids``, and those that
        depend on the steps among ``ids``. A step goes on once none of its dependencies (``meta.deps``,
        names of steps with its ``meta.workflow_id``) is unfinished: it becomes ``available``
        (``scheduled`` when its ``scheduled_at`` is ahead), or ``cancelled`` when a dependency was
        cancelled, discarded or no longer exists, unless its meta says ``ignore_cancelled``,
        ``ignore_discarded`` or ``ignore_deleted``; a step cancelled so settles the steps after it.
        Returns the settled steps' new states. Notifies "insert" for queues that gained jobs.

        Run after the change that ended the dependencies is committed (``ack_jobs`` and
        ``cancel_jobs`` call it so): of two steps ending at once on two nodes, the settle that starts
        last sees both. A step goes on once, however many settles see it ready. With ``conn``, in
        the caller's transaction."""

    async def sweep_steps(self, *, now: datetime | None = None, limit: int = 10_000) -> dict[int, JobState]:
        """``settle_steps`` for every suspended step (up to ``limit``, in id order): what no ack
        settled (a node that died after its ack's commit, steps deleted by hand, another client's
        ack). The leader runs it on every stage."""

    async def hold_steps(self, ids: Sequence[int], *, conn: Any = None) -> list[int]:
        """Make the jobs among ``ids`` that are available, scheduled, cancelled or discarded
        ``suspended`` (a failed one gets one more attempt if it used them up, and loses its end
        time); return the ids held. A workflow retry sends failed steps back to wait with it."""

    async def add_dependents(
        self, workflow_id: str, added: Mapping[str, Sequence[str]], *, conn: Any = None
    ) -> None:
        """Steps added to a stored workflow: append the new names in ``added`` (stored step name ->
        new step names) to the ``meta.dependents`` of those stored steps."""

    async def workflow_jobs(self, workflow_id: str) -> list[Job]:
        """The steps of a workflow, in id order."""

    # -- relay: progress, signals to jobs, waiting for jobs ------------------------------------
    async def job_states(self, ids: Sequence[int]) -> dict[int, JobState]:
        """The state of each job among ``ids`` that exists (a missing id: no such job)."""

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        """Store each (job id, attempt, fields) as the job's ``meta["progress"]`` (replacing the
        object there; the other meta keys stay), only while the job is executing that attempt.
        Return the ids written. Sends no notification."""

    async def signal_job(
        self, job_id: int, message: bytes, *, now: datetime | None = None, limit: int = 1000
    ) -> tuple[JobState, int | None] | None:
        """Append ``message`` (a JSON object, encoded) to the job's ``meta["signals"]`` array unless
        the job is final or already holds ``limit`` messages. Return None when no job has this id,
        else the job's state afterwards and the message's position in the array (counting its JSON
        objects only), or None in its place when it was not appended.

        A ``scheduled`` job whose ``meta["awaiting_signal"]`` is an object becomes ``available``
        now (``scheduled_at`` = now; notify "insert"); an ``executing`` job's node is told on
        "inbox". One transaction."""

    async def wake_awaiting(self, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
        """Make available now the ``scheduled`` jobs among ``ids`` whose ``meta["awaiting_signal"]``
        has a ``position`` below the number of JSON objects in ``meta["signals"]``: a message they
        wait for came while they were letting go of their slot. Return the ids woken; notify
        "insert" for their queues."""

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        """Give executing (id, attempt) pairs back as available without spending the attempt
        (``attempt`` - 1), at shutdown. Pairs whose job is not executing that attempt are skipped.
        Return the ids released; notify "insert" once per queue among them."""

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        """Make up to ``limit`` (>= 0) due scheduled/retryable jobs (``scheduled_at`` <= now)
        available, earliest ``scheduled_at`` (then id) first. Return ``{queue: count}`` of the jobs
        staged (``{}`` for none) and notify "insert" once per queue among them, waking those
        queues' producers on every node."""

    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` hold jobs a fetch could claim now (available, attempts left): a
        node's one poll for all its queues (``_runtime/poller.py``). A read: it changes nothing,
        and costs about one index probe per queue whatever the size of the table. Jobs inserted by
        any client, notified or not, are seen. A string instead of a list of names, or an invalid
        name, is refused with a ValidationError."""

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        """A node's one poll, as one read (one transaction on a server: the node's idle cost): which
        of ``awake`` hold jobs a fetch could claim (as ``waiting_queues``), and the persisted states
        of the instance ``name`` for those of ``queues`` that have one (as ``load_queue_states``).
        Bad names are refused as ``waiting_queues`` refuses them."""

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        """Send ``payload`` (a JSON object) on the logical channel ``name`` ("insert", "signal",
        "leader", ...) to every listener of that channel, in this process and on other nodes.
        Notifications from one sender arrive in the order sent."""

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> Listener:
        """Deliver notifications on the named channels (only those) to ``handler(name, payload)``
        until the returned listener is stopped. The handler first gets
        ``("listener", {"event": "connected"})`` once listening has begun, and again after each
        reconnect, so the node can look again for what it missed. Delivery is best effort: polling
        stays the correctness guarantee."""

    # -- leadership --------------------------------------------------------------------------
    async def elect_leader(
        self,
        name: str,
        node: str,
        ttl: float,
        *,
        now: datetime | None = None,
        take_from_foreign: bool = False,
        stale_after: float | None = None,
    ) -> LeaderInfo | None:
        """Take or renew the lease ``name`` for ``ttl`` seconds; None when another node holds it.

        A lease held by ``node`` is renewed (``expires_at`` = now + ttl, ``elected_at`` kept); one
        held by another node is taken only once strictly past its ``expires_at`` (``elected_at`` =
        now). Leases of different names are independent. With ``take_from_foreign`` (a mixed
        fleet), a live lease is taken at once from a node of another runtime: one that has producer
        rows and none with ``fleet.OWN_PRODUCER`` (an oban-py node). With ``stale_after``, a live
        lease is also taken from a node whose heartbeats stopped: it has producer rows of this
        instance with ``fleet.OWN_PRODUCER`` and every one of them is more than ``stale_after``
        seconds old (a node killed or frozen while leading; rescue judges the same rows dead)."""

    async def resign_leader(self, name: str, node: str) -> bool:
        """Drop the lease ``name`` if ``node`` holds it, and announce it on "leader"
        (``{"action": "resign", "node": node, "name": name}``) so another node takes over at once.
        Return whether a lease was dropped (False, and no notification, otherwise)."""

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        """The holder of the lease ``name`` while ``now`` <= its ``expires_at``, else None."""

    # -- producers, rescue, pruning, cron ------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        """Insert or refresh the heartbeat rows of a node's producers (by uuid): a new row starts
        with ``started_at`` = ``updated_at`` = now; a known one gets the beat's meta and
        ``updated_at`` = now. An empty ``beats`` does nothing.

        The row also keeps the jobs a cancel stopped while the producer ran them (``cancel_jobs``
        lists them): those still in the beat's ``holding`` stay listed, the others are forgotten.
        A listed job, whatever its state, keeps its ordered lock and counts against its queue's
        global limit in ``fetch_jobs``, so a run that cannot stop at once (a thread) is never
        overlapped; deleting the row (a clean stop, or the leader forgetting a dead node) lets go."""

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        """Delete these producers' rows (a clean stop); unknown uuids are ignored."""

    async def list_producers(self) -> list[ProducerInfo]:
        """Every producer row, by node then queue."""

    async def rescue_jobs(
        self,
        *,
        timeout: float,
        backstop: float,
        limit: int = 1000,
        live: Sequence[str] = (),
        foreign_timeout: float | None = None,
        now: datetime | None = None,
    ) -> RescueResult:
        """Rescue up to ``limit`` orphaned executing jobs (lowest ids first) and return them.

        Orphans are the executing jobs of dead producers and, as a backstop, executing jobs with no
        producer row at all claimed more than ``backstop`` seconds ago (dated by ``scheduled_at``
        when another client left ``attempted_at`` NULL: no attempt begins before its job is due).
        A producer row whose meta
        holds ``"runtime": "conveyor"`` (``fleet.OWN_PRODUCER``) is dead when its ``updated_at`` is
        more than ``timeout`` seconds before now; any other row (another runtime's: oban-py,
        Elixir Oban) when it is more than ``foreign_timeout`` seconds old, and never while
        ``foreign_timeout`` is None (meta that is not an object counts as another runtime's). A
        job whose producer row is fresh is never touched, however long it runs; producers whose
        uuid is in ``live`` (the caller's own, known to be running) are never dead, however old
        their rows.

        A rescued job becomes ``available`` (its attempt stays spent) or, when ``attempt`` >=
        ``max_attempts``, ``discarded`` with ``discarded_at`` = now; either way ``meta["rescued"]``
        counts up by one and an entry ``{"attempt", "at", "error"}`` is appended to ``errors``: the
        attempt, now (ISO 8601, UTC), and why (the node, from ``attempted_by``, stopped sending
        heartbeats, or the backstop; rescued or discarded). Notify "insert" once per queue that got
        available jobs. Then delete the dead producers (outside ``live``) that own no executing job
        any more; one that still does (beyond ``limit``) stays until a later pass rescues the rest."""

    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        """Delete at most ``limit`` final jobs that ``retention`` lets go; return how many went,
        by state. Fewer than ``limit`` means nothing more is due (rows other transactions hold
        locked are skipped until a later call).

        Only completed, cancelled and discarded jobs are ever deleted, in statements of one bounded
        batch each (``engine/_prune_plan.py`` gives the order). Each final job is governed by the
        first rule of ``retention.ordered`` that matches its queue, worker and state, else by the
        defaults. A governed job goes when it ended (``completed_at``/``cancelled_at``/
        ``discarded_at``) more than the rule's ``max_age`` seconds before now, or, among the jobs
        of its rule that are young enough to stay, when it is not one of the newest ``max_rows``
        (highest ids; for the defaults, ``keep_per_queue`` per queue). Then, with
        ``retention.max_rows``, the final jobs beyond that many newest of those left go too. A
        finished workflow step (``meta.workflow_id``) is never deleted while a step of its workflow
        is ``suspended``, and it counts in no rule's rows. Also forget cron ticks older than
        ``max(retention.max_age, 1 day)`` (none when it is None), except each entry's latest
        (``last_cron_ticks`` stays right)."""

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        """How many final jobs calling ``prune_jobs`` until it comes back short would delete, by
        state, changing nothing (barring jobs that end or age in between)."""

    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick (name, tick moment) that nobody handled before; return
        the new ids, ascending.

        A tick is claimed by recording it, so concurrent leaders and repeated calls insert it
        once, and a tick listed twice in one call is one job. Each job is inserted ``available``
        with ``scheduled_at`` = ``inserted_at`` = now and the request's queue, worker, args, meta,
        tags, priority and max_attempts. Notify "insert" once per queue that got a job. Recorded
        ticks are kept until ``prune_jobs`` forgets them (see there)."""

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        """The latest tick recorded for each named cron entry (aware UTC); entries never ticked
        are absent."""

    # -- queue state -------------------------------------------------------------------------
    async def save_queue_state(
        self,
        name: str,
        queue: str,
        *,
        paused: bool | None = None,
        limit: int | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        """Persist a pause, a limit or fleet-wide limits of ``queue`` for the instance ``name`` so
        nodes starting the queue later apply them. None leaves that part as it was; ``limits`` (as a
        scale signal carries them) replace the keys they name and keep the others."""

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        """Every persisted queue state of the instance ``name``, by queue (parts never saved are
        None)."""

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        """The ids among ``attempts`` (job id, attempt) whose rows are still executing that attempt
        (the others were cancelled, deleted, or rescued and maybe claimed again, behind the
        caller's back); with ``producers``, only where the claim is one of theirs
        (``attempted_by``'s second item): a claim that a crash of the server undid can be taken
        again elsewhere with the same attempt."""

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        """(id, attempt) of the jobs executing for these producers (by ``attempted_by``), claimed
        more than ``older_than`` seconds before now (strictly); ``[]`` for no producers. A producer
        that is not running one of them lost the reply to the fetch that claimed it (the claim
        committed, the answer never came) and gives it back."""

    # -- failures ----------------------------------------------------------------------------
    def is_transient(self, exc: BaseException) -> bool:
        """Is ``exc`` (raised by one of these methods) worth retrying unchanged?

        True when the database could not be reached, was busy, restarting or out of resources:
        the same statement may succeed later. False when the statement itself was refused (a value
        it carried is invalid): retrying it unchanged would fail forever, so the caller must
        isolate what is wrong (the acker splits its batch).
        """


class Listener(Protocol):
    """What ``Engine.listen`` returns."""

    async def stop(self) -> None:
        """Stop delivering; the handler hears nothing more once this returns. Harmless twice."""
