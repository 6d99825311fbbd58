"""How an attempt ended, as the engine writes it back: one ``Ack`` per finished job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor.job import JobState

#: The longest text kept in one ``errors`` entry. A longer one keeps its head and its tail (where a
#: traceback names the exception) around a marker saying how much was cut.
MAX_ERROR_CHARS = 16_000
_KEEP_HEAD = MAX_ERROR_CHARS // 2
_KEEP_TAIL = MAX_ERROR_CHARS // 2 - 100


def safe_error_text(text: str) -> str:
    """``text`` as every engine can store it inside a JSON string.

    PostgreSQL's jsonb refuses ``\\u0000``, and a lone surrogate cannot be encoded at all: both are
    written as visible escapes (``\\x00``, ``\\ud800``). Text over ``MAX_ERROR_CHARS`` is cut in the
    middle, with a marker giving the number of characters removed.
    """
    if not isinstance(text, str):
        text = repr(text)
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_CHARS:
        cut = len(text) - _KEEP_HEAD - _KEEP_TAIL
        text = f"{text[:_KEEP_HEAD]}\n... [{cut} characters cut] ...\n{text[-_KEEP_TAIL:]}"
    return text


def error_entry(attempt: int, at: datetime, text: str) -> dict[str, Any]:
    """One element of ``errors``, as Oban writes them: ``{"attempt", "at", "error"}``."""
    return {"attempt": attempt, "at": at.isoformat(), "error": safe_error_text(text)}


@dataclass(frozen=True, slots=True)
class Ack:
    """The end of one attempt of one job.

    ``attempt`` guards the write: an ack applies only while the row is still ``executing`` the same
    attempt, so a job that was rescued and claimed again is never overwritten by a stale ack.
    """

    job_id: int
    attempt: int
    state: JobState
    #: Seconds from now until the job may run again (retryable and snoozed jobs).
    schedule_in: float | None = None
    #: An entry to append to ``errors``: {"attempt": n, "at": iso time, "error": text}.
    error: dict[str, Any] | None = None
    #: Keys to merge into ``meta`` (recorded results).
    meta: dict[str, Any] | None = None
    #: A snooze gives the attempt back and counts itself in ``meta.snoozed``.
    snoozed: bool = False


def _slot_setter(name: str) -> Any:
    return Ack.__dict__[name].__set__


# The slots' own setters: a frozen dataclass's __init__ assigns each field through
# object.__setattr__ (its own __setattr__ refuses), about twice the cost of these.
_new = object.__new__
_set_job_id, _set_attempt, _set_state = map(_slot_setter, ("job_id", "attempt", "state"))
_set_schedule_in, _set_error = _slot_setter("schedule_in"), _slot_setter("error")
_set_meta, _set_snoozed = _slot_setter("meta"), _slot_setter("snoozed")
_COMPLETED = JobState.COMPLETED


def completed_ack(job_id: int, attempt: int) -> Ack:
    """``Ack(job_id, attempt, JobState.COMPLETED)``, the ack of most runs, for about half the cost."""
    ack: Ack = _new(Ack)
    _set_job_id(ack, job_id)
    _set_attempt(ack, attempt)
    _set_state(ack, _COMPLETED)
    _set_schedule_in(ack, None)
    _set_error(ack, None)
    _set_meta(ack, None)
    _set_snoozed(ack, False)
    return ack
