"""The checks and answers of the relay's entry points (``Conveyor.wait``, ``relay``, ``signal``); the
waiting itself is ``conveyor._app.waiters``'."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor._options import check_delay
from conveyor.engine.base import Engine
from conveyor.errors import JobNotFoundError, ValidationError
from conveyor.inbox import MAX_MESSAGES, encode_message
from conveyor.job import FINAL_STATES, JobState


def check_wait(timeout: float | None, through_retries: bool) -> float | None:
    """A wait's ``timeout`` (None: no limit), checked with its ``through_retries``."""
    if timeout is not None:
        timeout = check_delay("timeout", timeout)
    if not isinstance(through_retries, bool):
        raise ValidationError("through_retries", through_retries, "must be True or False")
    return timeout


async def signal_job(engine: Engine, job_id: int, message: Mapping[str, Any]) -> JobState:
    """Store ``message`` with the job and tell it; the job's state afterwards. A job that does not
    exist, has ended or holds ``MAX_MESSAGES`` already refuses it, by name."""
    encoded = encode_message(message)
    found = await engine.signal_job(job_id, encoded, limit=MAX_MESSAGES)
    if found is None:
        raise JobNotFoundError(job_id)
    state, position = found
    if position is None:
        problem = (
            f"job {job_id} is {state.value}: a finished job receives no signals"
            if state in FINAL_STATES
            else f"job {job_id} already holds {MAX_MESSAGES} signals"
        )
        raise ValidationError("job_id" if state in FINAL_STATES else "message", job_id, problem)
    return state
