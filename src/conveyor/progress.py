"""Progress reporting from inside a job: ``await progress(phase="render", done=3, total=10)``.

The fields merge into the job's stored progress (``meta["progress"]``, readable as ``Job.progress``
from anywhere, kept after the job ends). A field set once stays until set again, so coroutines or
threads of one job reporting different fields at once lose none of them. Reporting is cheap: it
updates the job's context at once, and the node writes the latest fields of each job at most once
per ``progress_interval`` (the first report of an attempt at once), all reporting jobs of the node in
one statement; the job's ack carries whatever was not written yet.
"""

from __future__ import annotations

from typing import Any

from conveyor._job_json import encode_mapping
from conveyor.context import current_job
from conveyor.errors import ValidationError

#: The most a job's progress may hold, as JSON.
MAX_PROGRESS_BYTES = 8_000


def check_progress(fields: dict[str, Any]) -> None:
    """Refuse progress that JSON cannot store exactly, or that is too large, naming the field."""
    encoded = encode_mapping("progress", fields)
    if len(encoded) > MAX_PROGRESS_BYTES:
        raise ValidationError(
            "progress", fields, f"is {len(encoded)} bytes as JSON; at most {MAX_PROGRESS_BYTES} are kept"
        )


def report(fields: dict[str, Any]) -> dict[str, Any]:
    """Merge ``fields`` into the running job's progress; return all its fields."""
    if not fields:
        raise ValidationError("progress", fields, "give at least one field, e.g. progress(done=3, total=10)")
    context = current_job()
    merged = context.progress.merge(fields, check_progress)
    if context.link is not None:
        context.link.progress_changed(context)
    return merged


async def progress(**fields: Any) -> dict[str, Any]:
    """Merge ``fields`` (JSON values) into this job's stored progress; return all its fields. The
    write happens in the background, at most once per ``progress_interval``."""
    return report(fields)


def progress_sync(**fields: Any) -> dict[str, Any]:
    """``progress`` for blocking jobs (threads and processes)."""
    return report(fields)
