"""Heartbeats: every running queue keeps its ``oban_producers`` row fresh, so the leader can tell a
dead node's jobs (rescue them) from a live node's long-running ones (leave them)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from conveyor._runtime.acker import Acker
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.producer import Producer
from conveyor._runtime.service import Service
from conveyor.engine.base import Engine
from conveyor.fleet import OWN_PRODUCER, ProducerBeat

log = logging.getLogger("conveyor.heartbeat")

#: Looks for lost claims per ``lost_after``: a claim counts only once that old, so looking at every
#: beat (a statement each time, on an idle node too) would find it barely sooner.
LOST_CLAIM_LOOKS = 3


def producer_meta(producer: Producer) -> dict[str, Any]:
    """What a producer's row says about it (``conveyor queues`` shows it): that a Conveyor node wrote
    it (``OWN_PRODUCER``: rescue judges it by Conveyor's heartbeats), its local limit, pause and
    running count, and the fleet-wide limits it claims under, named as Oban Pro's producers do."""
    meta: dict[str, Any] = {
        **OWN_PRODUCER,
        "local_limit": producer.limit,
        "paused": producer.paused,
        "running": len(producer.running),
    }
    limits = producer.limits
    if limits.global_limit is not None:
        meta["global_limit"] = limits.global_limit.to_json()
    if limits.rate is not None:
        meta["rate_limit"] = limits.rate.to_json()
    return meta


class Heartbeat(Service):
    name = "heartbeat"

    def __init__(
        self,
        engine: Engine,
        producers: Iterable[Producer],
        *,
        name: str,
        node: str,
        interval: float,
        acker: Acker,
        lost_after: float = 15.0,
        clock: Clock = SYSTEM_CLOCK,
        crontab: Sequence[dict[str, str]] = (),
    ) -> None:
        self.acker = acker
        #: The cron entries this node runs as it tells the fleet (``conveyor.cron.announcement``):
        #: the dashboard of a web process that never imported the job modules lists them.
        self.crontab = list(crontab)
        super().__init__(interval, clock)
        #: A job claimed for one of our producers this long ago that none of them runs was claimed
        #: by a fetch whose reply never arrived: it is given back.
        self.lost_after = lost_after
        self.engine = engine
        self.producers = list(producers)
        self.instance = name
        self.node = node
        #: When (loop time) the current unbroken run of written heartbeats began; None while the
        #: last one failed. The lifeline rescues only after a long enough run (see Lifeline).
        self.contact_since: float | None = None
        #: When (loop time) the last look for lost claims was completed; None: never yet.
        self._claims_looked: float | None = None
        #: When (loop time) the last heartbeat was written; None: never yet.
        self._beat_at: float | None = None
        #: Called when a heartbeat follows a silence longer than ``lost_after`` (the node's
        #: ``producer_timeout``): the node was frozen or its loop stalled, and the fleet may have
        #: judged it dead meanwhile (a leader checks its lease at once).
        self.on_gap: list[Callable[[], None]] = []

    def beats(self) -> list[ProducerBeat]:
        beats = [ProducerBeat(p.uuid, p.queue, producer_meta(p), holding=p.holding()) for p in self.producers]
        if beats and self.crontab:
            # One row per node carries the crontab (whichever producer comes first): the rows are
            # rewritten at every beat, and one copy is all a reader needs.
            beats[0].meta["crontab"] = self.crontab
        return beats

    @property
    def live_producers(self) -> list[str]:
        """The uuids of this node's running producers."""
        return [p.uuid for p in self.producers]

    def contact_for(self) -> float:
        """Seconds of unbroken contact with the database (0 when the last heartbeat failed)."""
        if self.contact_since is None:
            return 0.0
        return self.clock.monotonic() - self.contact_since

    def trusted(self, timeout: float) -> float | None:
        """``timeout`` once this node's contact has lasted that long, else None: only then does a
        producer row older than ``timeout`` prove its node dead (every live node has beaten since;
        see ``Lifeline``). What rescue, the fetch's global limit and the leader's lease go by."""
        return timeout if self.contact_for() >= timeout else None

    async def tick(self) -> None:
        # Producers whose stopped runs this beat lets go of (a cancelled job's lock or global slot):
        # they fetch once it is written. Taken before the beats, so a run ending meanwhile waits.
        released = [p for p in self.producers if p.released]
        for producer in released:
            producer.released = False
        try:
            if self.producers:
                now = self.clock.database_now()
                await self.engine.record_producers(self.instance, self.node, self.beats(), now=now)
            else:  # nothing to record, but contact with the database is still measured
                await self.engine.get_leader(self.instance, now=self.clock.database_now())
        except Exception:
            self.contact_since = None
            for producer in released:
                producer.released = True  # the next beat lets go of them
            raise
        beat_at = self.clock.monotonic()
        if self.contact_since is None:
            self.contact_since = beat_at
        elif self._beat_at is not None and beat_at - self._beat_at > self.lost_after:
            # A silence that long breaks the contact as an outage does: our rows looked dead, so
            # other nodes may have rescued our jobs and taken the lease.
            log.warning(
                "no heartbeat for %.1fs (the process was frozen or its loop stalled)", beat_at - self._beat_at
            )
            self.contact_since = beat_at
            for hook in self.on_gap:
                hook()
        self._beat_at = beat_at
        for producer in released:
            producer.wake()
        # A job cancelled (or deleted) while its pkill signal was missed still gets stopped, and so
        # does one rescued from us while we were cut off from the database.
        running = [(job_id, r.context.job.attempt) for p in self.producers for job_id, r in p.running.items()]
        if running:
            alive = await self.engine.still_executing(running, producers=[p.uuid for p in self.producers])
            # Only jobs we asked about: one fetched while the query ran is not in ``alive`` either.
            gone = {job_id for job_id, _ in running} - alive
            for producer in self.producers:
                for job_id in [j for j in producer.running if j in gone]:
                    producer.disown_job(job_id)
        if self._claims_looked is None or (
            self.clock.monotonic() - self._claims_looked >= self.lost_after / LOST_CLAIM_LOOKS
        ):
            await self.give_back_lost_claims()

    async def give_back_lost_claims(self) -> None:
        """Release jobs claimed for our producers that none of them runs: the claim committed but
        the fetch's reply was lost (the connection broke on the way). Nobody else would ever rescue
        them, since their producer is alive. Producers fetching right now are left out (their
        claims are on the way), and only claims older than ``lost_after`` count."""
        settled = [p for p in self.producers if not p.fetching]
        if not settled:
            return
        claimed = await self.engine.lost_claims(
            [p.uuid for p in settled], older_than=self.lost_after, now=self.clock.database_now()
        )
        # A job that finished but whose ack is not written yet is still executing in the database.
        ours = {job_id for p in self.producers for job_id in p.running} | self.acker.held()
        lost = [(job_id, attempt) for job_id, attempt in claimed if job_id not in ours]
        if any(p.fetching for p in settled):  # a fetch began while we asked: try again next time
            return
        self._claims_looked = self.clock.monotonic()
        if lost:
            released = await self.engine.release_jobs(lost)
            if released:
                log.warning("gave back %d jobs whose claim reply was lost: %s", len(released), released)

    async def forget(self) -> None:
        """Remove this node's rows at a clean stop, once its jobs are acked or given back."""
        await self.engine.delete_producers([p.uuid for p in self.producers])
