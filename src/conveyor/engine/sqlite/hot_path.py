"""The hot path on SQLite: fetch, ack, release and stage, each one write transaction."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine import _partitions
from conveyor.engine._partitions import KeySyntax, Shape
from conveyor.engine.sqlite.core import FILES, compose
from conveyor.engine.sqlite.database import Tx, WriteTx
from conveyor.engine.sqlite.rows import check_now, fetch_order, later_text, read_jobs, time_text, utc_clock
from conveyor.engine.sqlite.workflows import SqliteWorkflows, settle_beside
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.limits import Claimed, FetchLimits, capped_by

RATE_RECORD = FILES["rate_starts_record"]
RATE_FORGET = FILES["rate_starts_forget"]
CLAIM_LEFT = FILES.compose(
    "limited_claim_left",
    running_jobs="running_jobs",
    still_running="still_running",
    stopping_ids="stopping_ids",
    own_producer="own_producer",
)
PARTITIONED_LEFT = FILES.compose(
    "partitioned_claim_left",
    lock_free="lock_free",
    stopping_ids="stopping_ids",
)

#: Partition keys on SQLite: a JSON array of the worker and the values under the keys (read through
#: a quoted JSON path, so a key with dots or brackets is one key; a column that is not JSON reads as
#: null instead of failing the claim).
KEYS = KeySyntax(
    read=lambda column, param: f"(CASE WHEN json_valid({column}) THEN {column} -> :{param} END)",
    array=lambda items: f"json_array({', '.join(items)})",
    param=lambda key: f'$."{key}"',
)


def dead_before(clock: datetime, dead_after: float | None) -> str | None:
    """The time before which a producer's last heartbeat makes it dead (``fetch_jobs``' ``dead_after``):
    its executing jobs no longer take slots of a global limit. None: every producer counts."""
    return None if dead_after is None else time_text(clock - timedelta(seconds=dead_after))


class SqliteHotPath(SqliteWorkflows):
    """``fetch_jobs``, ``ack_jobs``, ``release_jobs``, ``stage_jobs``."""

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
        check_now(now)
        if isinstance(demand, bool) or not isinstance(demand, int) or demand < 0:
            raise ValidationError("demand", demand, "must be an integer >= 0")
        if demand == 0:
            return []
        statement = self._fetch
        params: dict[str, Any] = {"queue": queue, "demand": demand, "node": node, "producer": producer}
        if limits is None or limits.unlimited:

            def run(tx: Tx) -> list[Any]:
                return tx.conn.execute(statement, params | {"now": time_text(utc_clock(now))}).fetchall()

            jobs = read_jobs(await self.database.write(run))
            jobs.sort(key=fetch_order)
            return jobs
        params["ended"] = orjson.dumps([list(pair) for pair in ended]).decode()
        params["dead_after"] = dead_after
        if limits.partitioned:
            return await self._fetch_partitioned(params, demand, now, limits)
        # One writer at a time: the counts in the statement see every process's claims.
        rate = limits.rate
        params |= {
            "global_limit": limits.global_limit.allowed if limits.global_limit else None,
            "rate_allowed": rate.allowed if rate else None,
        }
        limited = self._fetch_limited

        def run_limited(tx: Tx) -> tuple[list[Any], tuple[Any, ...]]:
            clock = utc_clock(now)
            window_start = time_text(clock - timedelta(seconds=rate.period)) if rate else None
            # Rows are forgotten a margin past the window, as on PostgreSQL (record_starts.sql).
            forget_before = time_text(clock - timedelta(seconds=2 * rate.period + 60)) if rate else None
            values = params | {
                "now": time_text(clock),
                "window_start": window_start,
                "forget_before": forget_before,
                "dead_before": dead_before(clock, dead_after),
            }
            rows = tx.conn.execute(limited, values).fetchall()
            if rate is not None:
                if rows:
                    tx.conn.execute(RATE_RECORD, values | {"started": len(rows)})
                tx.conn.execute(RATE_FORGET, values)
            left = tx.conn.execute(CLAIM_LEFT, values).fetchone()
            return rows, tuple(left) if left else (None, None)

        rows, (running, started) = await self.database.write(run_limited)
        claimed = Claimed(sorted(read_jobs(rows), key=fetch_order))
        claimed.capped = capped_by(limits, running, started)
        return claimed

    async def _fetch_partitioned(
        self, params: dict[str, Any], demand: int, now: datetime | None, limits: FetchLimits
    ) -> Claimed:
        fetch, record = self._partitioned_statements(_partitions.limits_shape(limits))
        cap, rate = limits.global_limit, limits.rate
        params = params | _partitions.partitioned_params(KEYS, limits)
        params |= {
            "global_limit": cap.allowed if cap else None,
            "rate_allowed": rate.allowed if rate else None,
            "scan": _partitions.scan_size(demand),
        }

        def run(tx: Tx) -> tuple[list[Any], bool]:
            clock = utc_clock(now)
            values = params | {
                "now": time_text(clock),
                "dead_before": dead_before(clock, params["dead_after"]),
                "window_start": time_text(clock - timedelta(seconds=rate.period)) if rate else None,
                "forget_before": time_text(clock - timedelta(seconds=2 * rate.period + 60)) if rate else None,
            }
            rows = tx.conn.execute(fetch, values).fetchall()
            if rate is not None:
                if rows:
                    ids = orjson.dumps([row[0] for row in rows]).decode()
                    tx.conn.execute(record, values | {"ids": ids})
                tx.conn.execute(RATE_FORGET, values)
            left = tx.conn.execute(PARTITIONED_LEFT, values).fetchone()
            return rows, bool(left and left[0])

        rows, waiting = await self.database.write(run)
        claimed = Claimed(sorted(read_jobs(rows), key=fetch_order))
        claimed.capped = len(claimed) < demand and waiting
        return claimed

    def _partitioned_statements(self, shapes: tuple[Shape, Shape]) -> tuple[str, str]:
        """The claim and the record of its starts for partitions of these shapes, composed once."""
        found = self._partitioned.get(shapes)
        if found is None:
            fetch = _partitions.render(compose("fetch_partitioned", ""), KEYS, shapes)
            record = _partitions.render(FILES["partitioned_record"], KEYS, shapes)
            found = self._partitioned[shapes] = (fetch, record)
        return found

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        check_now(now)
        if not acks:
            return []
        statement = FILES["ack_jobs"]

        def run(tx: Tx) -> list[int]:
            clock = utc_clock(now)
            records = [
                {
                    "id": ack.job_id,
                    "attempt": ack.attempt,
                    "state": ack.state.value,
                    "scheduled_at": later_text(clock, ack.schedule_in),
                    "error": ack.error,
                    "meta": ack.meta,
                    "snoozed": ack.snoozed,
                }
                for ack in acks
            ]
            at = time_text(clock)
            params = {"acks": orjson.dumps(records).decode(), "now": at, "node": node}
            rows = tx.conn.execute(statement, params).fetchall()
            steps = [row[0] for row in rows if row[1]]
            if steps:  # in the ack's transaction: one writer at a time, so nothing slips between
                settle_beside(tx, steps, now)
            written = [row[0] for row in rows]
            if written:
                notify_ended(tx, written, at)
            return written

        return await self.database.write(run)

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        given = orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode()
        statement = FILES["release_jobs"]

        def run(tx: Tx) -> list[int]:
            rows = tx.conn.execute(statement, {"jobs": given}).fetchall()
            clock = time_text(utc_clock(None))
            for queue in sorted({row[1] for row in rows}):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(row[0] for row in rows)

        return await self.database.write(run)

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        check_now(now)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError("limit", limit, "must be an integer >= 0")
        statement = FILES["stage_jobs"]

        def run(tx: Tx) -> dict[str, int]:
            clock = time_text(utc_clock(now))
            staged = Counter(row[0] for row in tx.conn.execute(statement, {"now": clock, "limit": limit}))
            for queue in sorted(staged):
                tx.notify("insert", {"queue": queue}, clock)
            return dict(staged)

        return await self.database.write(run)


#: Ids per notification on "ended" (as PostgreSQL, whose payloads are capped).
ENDED_CHUNK = 500


def notify_ended(tx: WriteTx, ids: Sequence[int], clock: str) -> None:
    """Announce jobs that ended (or were acked at all) to whoever waits for them."""
    for start in range(0, len(ids), ENDED_CHUNK):
        tx.notify("ended", {"ids": list(ids[start : start + ENDED_CHUNK])}, clock)
