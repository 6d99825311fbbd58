"""Jobs that do not fit this node's code: their worker cannot be imported here, or their stored args
do not fit the job function's signature.

In a rolling deploy that is the normal state of a job for a few minutes: new code enqueues a job an
old node takes (or the other way round). Such a job is not failed on the spot: it is snoozed (the
attempt given back, so ``max_attempts`` is not spent) and offered to the whole fleet again, with its
reason appended to ``errors`` each time, until ``Settings.unfit_job_patience`` has passed since it
first did not fit. Only then is it discarded, saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from conveyor.acks import Ack
from conveyor.job import Job, JobState
from conveyor.outcomes import Discard

#: Where the job's meta keeps the moment it first did not fit (ISO 8601, UTC): the patience is
#: counted from there, across nodes and attempts. Set to null once a node runs the job.
UNFIT_SINCE = "unfit_since"
#: The first pause before the job is offered again (seconds); the pause then grows with the time
#: spent waiting (roughly doubling) up to ``MAX_PAUSE``.
MIN_PAUSE = 1.0
#: The longest pause: a fitting node that has just come up waits at most this long for the job.
MAX_PAUSE = 30.0


class ArgsDoNotFit(Discard):
    """The job's stored args do not fit its function here (missing, unknown, or not of the annotated
    type). A ``Discard`` for code that runs a job by itself (``process_job``); a node's runner
    gives it the unfit job's patience first."""


def first_unfit(job: Job, now: datetime) -> datetime:
    """When ``job`` first did not fit (its meta's mark, else ``now``)."""
    mark = job.meta.get(UNFIT_SINCE) if isinstance(job.meta, Mapping) else None
    if isinstance(mark, str):
        try:
            since = datetime.fromisoformat(mark)
        except ValueError:
            return now
        if since.tzinfo is not None and since <= now:
            return since
    return now


def pause(waited: float, left: float) -> float:
    """Seconds until the next offer: about the time waited so far (so the offers thin out
    geometrically), between ``MIN_PAUSE`` and ``MAX_PAUSE``, and never past the patience's end."""
    return max(0.0, min(max(MIN_PAUSE, waited), MAX_PAUSE, left))


def unfit_ack(
    job: Job, reason: str, *, now: datetime, patience: float, entry: Callable[[str], dict[str, Any]]
) -> Ack:
    """The ack of an attempt of ``job`` that could not start here for ``reason``: a snooze (attempt
    given back) while the patience lasts, then a discard. ``entry`` makes the ``errors`` entry of a
    text."""
    since = first_unfit(job, now)
    waited = (now - since).total_seconds()
    left = patience - waited
    mark = since.isoformat()
    if patience <= 0:  # no patience: discarded at once, as without a fleet to wait for
        return Ack(job.id, job.attempt, JobState.DISCARDED, error=entry(f"discarded: {reason}"))
    if left <= 0:
        text = f"discarded: {reason} (no node ran it within unfit_job_patience, {patience:g}s since {mark})"
        return Ack(job.id, job.attempt, JobState.DISCARDED, error=entry(text))
    deadline = (since + timedelta(seconds=patience)).isoformat()
    text = f"{reason} (this node's code does not fit; offered again to every node until {deadline})"
    return Ack(
        job.id,
        job.attempt,
        JobState.SCHEDULED,
        schedule_in=pause(waited, left),
        error=entry(text),
        meta={UNFIT_SINCE: mark},
        snoozed=True,
    )
