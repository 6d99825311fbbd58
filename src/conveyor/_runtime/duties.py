"""Leader-only duties: rescuing orphaned jobs, pruning old ones, inserting cron jobs.

Each runs on every node but does its work only while its node leads, so exactly one node does it at
a time; the statements are safe even if two nodes briefly both think they lead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from conveyor._runtime.heartbeat import Heartbeat
from conveyor._runtime.leadership import Leadership
from conveyor._runtime.service import Service
from conveyor.cron import CronEntry, floor_minute
from conveyor.dynamic_cron import merged
from conveyor.encryption import Keyring, sealed
from conveyor.engine.base import Engine
from conveyor.fleet import CronTick, StoredCron
from conveyor.retention import Pruned, Retention
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.duties")


class LeaderDuty(Service):
    """A service that works only while its node leads; it keeps time by its leadership's clock."""

    def __init__(self, engine: Engine, telemetry: Telemetry, leadership: Leadership, interval: float) -> None:
        super().__init__(interval, leadership.clock)
        self.engine = engine
        self.telemetry = telemetry
        self.leadership = leadership

    async def tick(self) -> None:
        if self.leadership.is_leader:
            await self.lead()

    async def lead(self) -> None:
        """The duty's work, run only on the leader."""
        raise NotImplementedError


class Lifeline(LeaderDuty):
    """Rescues executing jobs whose producer stopped sending heartbeats (and, as a long backstop,
    executing jobs without any producer row).

    A stale heartbeat proves a producer dead only if its node could have written one. After an
    outage every producer of the fleet looks stale, live ones included, until each has beaten
    again. So the rule: rescue only after this node's own heartbeats have reached the database
    without a break for ``producer_timeout`` (every live node, beating more often than that, has
    then refreshed its rows), and never the jobs of this node's own running producers, whatever
    their rows say (the event loop may have been too busy to beat).

    Rows another runtime wrote (oban-py, Elixir Oban: no ``OWN_PRODUCER`` mark) are judged by
    ``foreign_timeout``, a margin over how often that runtime beats, and only once this node's
    contact has lasted that long too (the other runtime's live nodes have beaten again by then).
    """

    name = "lifeline"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        leadership: Leadership,
        *,
        interval: float,
        producer_timeout: float,
        backstop: float,
        heartbeat: Heartbeat,
        foreign_timeout: float,
    ) -> None:
        super().__init__(engine, telemetry, leadership, interval)
        self.producer_timeout = producer_timeout
        self.foreign_timeout = foreign_timeout
        self.backstop = backstop
        self.heartbeat = heartbeat

    async def lead(self) -> None:
        contact = self.heartbeat.contact_for()
        if contact < self.producer_timeout:
            log.debug("no rescue yet: in contact with the database for %.1fs only", contact)
            return
        result = await self.engine.rescue_jobs(
            timeout=self.producer_timeout,
            foreign_timeout=self.foreign_timeout if contact >= self.foreign_timeout else None,
            backstop=self.backstop,
            live=self.heartbeat.live_producers,
            now=self.clock.database_now(),
        )
        count = len(result.available) + len(result.discarded)
        if count:
            log.warning("rescued %d orphaned jobs (%d discarded)", count, len(result.discarded))
            self.telemetry.emit(
                "lifeline.rescued", count=count, available=result.available, discarded=result.discarded
            )


async def prune_all(
    engine: Engine,
    retention: Retention,
    *,
    limit: int,
    now: datetime | None = None,
    going_on: Callable[[], bool] = lambda: True,
    on_batch: Callable[[Pruned], None] | None = None,
) -> Pruned:
    """Call ``prune_jobs`` until a call comes back short (nothing more is due) or ``going_on()``
    turns false; return the sum. ``on_batch`` sees the running total after each call."""
    total = Pruned()
    while going_on():
        deleted = await engine.prune_jobs(retention, limit=limit, now=now)
        total += deleted
        if on_batch is not None:
            on_batch(total)
        if deleted.count < limit:
            break
        await asyncio.sleep(0.01)  # let other work in between batches
    return total


class Pruner(LeaderDuty):
    """Deletes the final jobs the retention policy lets go, batch by batch."""

    name = "pruner"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        leadership: Leadership,
        *,
        interval: float,
        retention: Retention,
        limit: int,
    ) -> None:
        super().__init__(engine, telemetry, leadership, interval)
        self.retention = retention
        self.limit = limit

    async def lead(self) -> None:
        total = await prune_all(
            self.engine,
            self.retention,
            limit=self.limit,
            now=self.clock.database_now(),
            going_on=lambda: not self._stopping and self.leadership.is_leader,
        )
        if total.count:
            self.telemetry.emit("pruner.pruned", count=total.count, **total.by_state())


class CronScheduler(LeaderDuty):
    """Inserts the jobs of due cron entries at each minute; the database makes each tick unique.

    The entries are the code's (``entries``) merged with those stored in the database, read again
    at every tick (``conveyor.dynamic_cron``): a change made on any node takes effect at the next
    minute without a restart.
    """

    name = "cron"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        leadership: Leadership,
        entries: Sequence[CronEntry],
        *,
        started_at: datetime,
        encryption_keys: tuple[str, ...] = (),
    ) -> None:
        super().__init__(engine, telemetry, leadership, 60.0)
        self.entries = tuple(entries)
        #: Seals the jobs of ``encrypted=True`` workers, as an enqueue would (``conveyor.encryption``).
        self.keyring = Keyring.from_setting(encryption_keys)
        self.started_at = started_at
        self._rebooted = False
        #: Stored rows already reported as unusable, with what they held (reported again if changed).
        self._reported: dict[str, StoredCron] = {}

    async def tick(self) -> None:
        if self.leadership.is_leader:
            await self.lead()
        else:
            # Look again as often as leadership is checked: a node that takes over runs the current
            # minute at once instead of finishing a minute-long sleep (and skipping that tick).
            self.interval = self.leadership.check_interval

    async def lead(self) -> None:
        now = self.clock.now()
        await self.run_at(now)
        # Sleep until just after the next minute starts.
        following = floor_minute(now) + timedelta(minutes=1, seconds=0.05)
        self.interval = max(0.05, (following - now).total_seconds())

    async def run_at(self, now: datetime) -> list[int]:
        """Insert every tick due at ``now`` (and missed ones for back-filling entries)."""
        minute = floor_minute(now)
        ticks: list[CronTick] = []
        entries = merged(self.entries, await self.engine.list_crons(), self._report)
        backfilling = [e for e in entries if e.backfill and not e.expression.reboot]
        last = await self.engine.last_cron_ticks([e.name for e in backfilling]) if backfilling else {}
        for entry in entries:
            if entry.expression.reboot:
                if not self._rebooted:
                    ticks.append(self._tick(entry, floor_minute(self.started_at)))
                continue
            if entry.backfill and entry.name in last:
                due = list(entry.ticks(last[entry.name], minute))[-entry.backfill_limit :]
            else:
                due = list(entry.ticks(minute - timedelta(minutes=1), minute))
            ticks += [self._tick(entry, moment) for moment in due]
        ids: list[int] = await self.engine.insert_cron_jobs(ticks, now=self.clock.database_now())
        self._rebooted = True
        if ids:
            self.telemetry.emit("cron.inserted", count=len(ids), job_ids=ids)
        return ids

    def _report(self, cron: StoredCron, exc: Exception) -> None:
        """Log a stored row that describes no entry, once per content (every minute would flood)."""
        if self._reported.get(cron.name) != cron:
            self._reported[cron.name] = cron
            log.warning("stored cron entry %r is skipped: %s", cron.name, exc)

    def _tick(self, entry: CronEntry, moment: datetime) -> CronTick:
        job = sealed(entry.job_for(moment), self.keyring)
        return CronTick(entry.name, moment.astimezone(UTC).replace(tzinfo=None), job)
