"""An ack batch's writes on MySQL/MariaDB: two statements, however many acks.

``ack_targets.sql`` locks the rows the acks name that are executing; each ack is checked against
its row in Python (the same attempt, the claiming node when one is given, one ack an attempt) and
its ``errors`` and ``meta`` are merged there, where another client's junk in either column cannot
make the batch fail. The acks that apply are then written in two groups:

* plain completions (no error, no meta, no schedule, no snooze: most acks) in one ``UPDATE ...
  WHERE id IN`` (``ack_completed.sql``);
* every other ack in one ``UPDATE`` joined to the batch as rows of ``JSON_TABLE``
  (``ack_rows.sql``): each its state, new ``scheduled_at``, attempt given back, and the ``errors`` and
  ``meta`` built here (NULL: unchanged); one such statement per megabyte of that text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql.rows import stored_json
from conveyor.job import JobState

_FINAL = frozenset({"completed", "discarded", "cancelled"})
_COMPLETED = JobState.COMPLETED
#: How ``ack_rows.sql`` reads a time out of its JSON document (naive UTC, as the columns store).
_TIME = "%Y-%m-%d %H:%M:%S.%f"
#: The most JSON text (bytes) one ``ack_rows.sql`` carries: a batch of long errors goes in several
#: statements, each far under the server's ``max_allowed_packet`` (16 MB by default on MariaDB,
#: 64 MB on MySQL 8), which a whole batch of them could pass.
ROWS_TEXT_LIMIT = 1 << 20


def is_step(meta: Any) -> bool:
    """Whether a stored meta names a workflow (the text is searched before it is parsed)."""
    text = meta.decode() if isinstance(meta, bytes) else meta
    if not isinstance(text, str) or "workflow_id" not in text:
        return False
    found = stored_json(text)
    return isinstance(found, dict) and found.get("workflow_id") is not None


def acked_meta(stored: Any, ack: Ack) -> str | None:
    """The meta an applied ack writes (None: unchanged). Top-level keys of the ack's meta replace
    the stored ones (null values kept); a snooze counts ``snoozed`` up and drops the unique markers
    of a job that is not unique while executing (scheduled again, it must not meet a twin)."""
    if ack.meta is None and not ack.snoozed:
        return None
    meta = stored if isinstance(stored, dict) else {}
    if ack.snoozed:
        count = meta.get("snoozed")
        count = min(max(int(count), 0), 1_000_000_000) if isinstance(count, int | float) else 0
        meta = {**meta, "snoozed": count + 1}
        states = meta.get("uniq_states")
        if meta.get("uniq_key") is not None and not (isinstance(states, list) and "executing" in states):
            meta = {k: v for k, v in meta.items() if k not in ("uniq_key", "uniq_states")}
    if ack.meta is not None:
        meta = {**meta, **ack.meta}
    return orjson.dumps(meta).decode()


def _is_plain(ack: Ack) -> bool:
    return (
        ack.state is _COMPLETED
        and ack.error is None
        and ack.meta is None
        and ack.schedule_in is None
        and not ack.snoozed
    )


@dataclass
class AckWrites:
    """What one batch writes: the acks that apply, grouped into the two statements."""

    clock: datetime
    #: The ids of the acks that apply, in the batch's order (what ``ack_jobs`` returns).
    written: list[int] = field(default_factory=list)
    #: Workflow steps that ended: the steps after them settle once the batch commits.
    steps: list[int] = field(default_factory=list)
    #: Plain completions (``ack_completed.sql``).
    completed: list[int] = field(default_factory=list)
    #: The others, one ``[id, state, scheduled_at, attempt given back, errors, meta]`` each
    #: (``ack_rows.sql``).
    rows: list[list[Any]] = field(default_factory=list)

    @classmethod
    def of(
        cls, acks: Iterable[Ack], targets: Mapping[int, Sequence[Any]], node: str | None, clock: datetime
    ) -> AckWrites:
        """The writes of ``acks`` given the rows ``ack_targets.sql`` locked (id, attempt,
        attempted_by, errors, meta) by id."""
        writes = cls(clock)
        rows = dict(targets)
        for ack in acks:
            row = rows.pop(ack.job_id, None)  # popped: a second ack of one attempt never applies
            if row is None or row[1] != ack.attempt:
                continue
            if node is not None:
                claim = stored_json(row[2])
                if not (isinstance(claim, list) and claim and claim[0] == node):
                    continue
            writes.add(ack, row)
        return writes

    def add(self, ack: Ack, row: Sequence[Any]) -> None:
        """``ack``, checked against ``row``: written."""
        self.written.append(ack.job_id)
        state = ack.state.value
        if state in _FINAL and is_step(row[4]):
            self.steps.append(ack.job_id)
        if _is_plain(ack):
            self.completed.append(ack.job_id)
            return
        errors = None
        if ack.error is not None:
            stored = stored_json(row[3])
            errors = orjson.dumps([*(stored if isinstance(stored, list) else []), ack.error]).decode()
        scheduled = None
        if ack.schedule_in is not None:
            scheduled = (self.clock + timedelta(seconds=ack.schedule_in)).strftime(_TIME)
        meta = acked_meta(stored_json(row[4]), ack)
        self.rows.append([ack.job_id, state, scheduled, 1 if ack.snoozed else 0, errors, meta])

    async def write(self, cursor: Any, files: SqlFiles) -> None:
        """Both statements, in the transaction of ``cursor`` that locked the targets (the second
        once per ``ROWS_TEXT_LIMIT`` of its rows' text)."""
        if self.completed:
            await cursor.execute(files["ack_completed"], {"ids": tuple(self.completed), "now": self.clock})
        for acks in json_arrays(self.rows, ROWS_TEXT_LIMIT):
            await cursor.execute(files["ack_rows"], {"acks": acks, "now": self.clock})


def json_arrays(rows: Iterable[Any], limit: int) -> Iterator[str]:
    """``rows`` as JSON arrays in order, each of at most ``limit`` bytes unless one row alone is
    longer (then it goes alone)."""
    parts: list[bytes] = []
    size = 2
    for row in rows:
        text = orjson.dumps(row)
        if parts and size + len(text) > limit:
            yield (b"[" + b",".join(parts) + b"]").decode()
            parts, size = [], 2
        parts.append(text)
        size += len(text) + 1
    if parts:
        yield (b"[" + b",".join(parts) + b"]").decode()
