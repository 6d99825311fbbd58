"""What each setting may hold: its type and range, checked wherever the value comes from.

``Settings`` checks every field when it is built; the loaders (``conveyor.settings``) check each
value as they read it, so an error names the source (a variable, a file) it came from.
"""

from __future__ import annotations

import math
from typing import Any

from conveyor import _options as opt
from conveyor.cron import CronEntry
from conveyor.encryption import check_keys
from conveyor.errors import ValidationError
from conveyor.queue_settings import QueueSettings
from conveyor.retention import check_distinct

#: Durations in seconds that must be greater than 0: a zero would spin a loop, or expire a lease or a
#: heartbeat the moment it is written.
POSITIVE_DURATIONS = frozenset(
    {
        "poll_interval",
        "stage_interval",
        "leader_ttl",
        "heartbeat_interval",
        "producer_timeout",
        "foreign_heartbeat_interval",
        "foreign_producer_timeout",
        "rescue_interval",
        "rescue_backstop",
        "prune_interval",
        "priority_aging_after",
        "priority_aging_interval",
    }
)
#: Durations in seconds that may be 0 (no grace, no ack delay, prune as soon as final).
DURATIONS = POSITIVE_DURATIONS | {
    "shutdown_grace",
    "cancel_grace",
    "ack_delay",
    "ack_max_delay",
    "prune_max_age",
    "prune_workflow_records",
    "progress_interval",
    "unfit_job_patience",
}
#: The longest duration accepted (100 years); longer ones overflow timers and timestamps.
MAX_DURATION = opt.MAX_DELAY_SECONDS
BOOLEANS = frozenset({"notifications", "leadership", "prune", "mixed_fleet", "synchronous_commit"})
#: Durations that may also be None (``foreign_producer_timeout``: derived from the interval).
OPTIONAL_DURATIONS = frozenset({"foreign_producer_timeout", "priority_aging_after", "prune_workflow_records"})
COUNTS = frozenset({"stage_limit", "ack_batch_size", "pool_size", "prune_limit", "priority_aging_limit"})
OPTIONAL_COUNTS = frozenset({"threads", "processes", "prune_keep_per_queue", "prune_max_rows"})
#: Optional settings an environment variable can unset with "none" (or an empty text).
UNSET_FROM_TEXT = frozenset(
    {"prune_keep_per_queue", "prune_max_rows", "foreign_producer_timeout", "priority_aging_after"}
)
#: Counts end up in SQL integers.
MAX_COUNT = 2**31 - 1
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
#: The values of ``pooler`` (see ``engine/postgres/pooler.py``).
POOLER_MODES = ("auto", "none", "session", "transaction")
#: Names other nodes see (the node's, the instance's): text without control characters.
MAX_NAME_LENGTH = 255


def check_setting(name: str, value: Any) -> None:
    """Refuse a value of the wrong type or out of range for setting ``name`` (``ValidationError``).

    Strict on purpose: ``"false"`` is not a boolean and ``nan`` is not a duration, wherever they
    come from (text from the environment is converted before it gets here).
    """
    if name == "prefix":
        opt.check_prefix(value)
    elif name in OPTIONAL_DURATIONS and value is None:
        return
    elif name in DURATIONS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(name, value, "must be a number of seconds")
        if not math.isfinite(value):
            raise ValidationError(name, value, "must be a finite number of seconds")
        if name in POSITIVE_DURATIONS and value <= 0:
            raise ValidationError(name, value, "must be greater than 0")
        if not 0 <= value <= MAX_DURATION:
            raise ValidationError(name, value, f"must be a number of seconds from 0 to {MAX_DURATION}")
    elif name in BOOLEANS:
        if not isinstance(value, bool):
            raise ValidationError(name, value, "must be true or false (a boolean, not a string or number)")
    elif name in COUNTS or (name in OPTIONAL_COUNTS and value is not None):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
            raise ValidationError(name, value, f"must be an integer from 1 to {MAX_COUNT}")
    elif name in ("node", "name"):
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(name, value, "must be a non-empty name")
        if len(value) > MAX_NAME_LENGTH or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValidationError(
                name, value, f"must be at most {MAX_NAME_LENGTH} characters, without control characters"
            )
    elif name in ("database_url", "listen_url"):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValidationError(name, value, "must be a non-empty URL string")
    elif name == "pooler":
        if not isinstance(value, str) or value.lower() not in POOLER_MODES:
            raise ValidationError(name, value, f"must be one of {', '.join(POOLER_MODES)}")
    elif name == "encryption_keys":
        check_keys(value)
    elif name == "imports":
        if not isinstance(value, tuple) or not all(isinstance(m, str) and m.strip() for m in value):
            raise ValidationError(name, value, "must be a list of module names")
    elif name == "log_level":
        if not isinstance(value, str) or value.upper() not in LOG_LEVELS:
            raise ValidationError(name, value, f"must be one of {', '.join(LOG_LEVELS)}")
    elif name == "log_format":
        if not isinstance(value, str) or value.lower() not in LOG_FORMATS:
            raise ValidationError(name, value, f"must be one of {', '.join(LOG_FORMATS)}")
    elif name == "prune_rules":
        if not isinstance(value, tuple):
            raise ValidationError(name, value, "must be a tuple of PruneRule values")
        check_distinct(value, name)
    elif name in ("queues", "crontab"):
        kind = QueueSettings if name == "queues" else CronEntry
        if not isinstance(value, tuple) or not all(isinstance(item, kind) for item in value):
            raise ValidationError(name, value, f"must be a tuple of {kind.__name__} values")
