"""Validation of the options every job carries into the database.

Each check raises :class:`~conveyor.errors.ValidationError` naming the field and the value, so bad
input is refused before anything is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor.errors import ValidationError

QUEUE_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,127}")
MAX_SMALLINT = 32767
#: The longest PostgreSQL identifier, in bytes (NAMEDATALEN - 1): channel names are identifiers too.
MAX_IDENTIFIER_BYTES = 63
#: The longest suffix Oban puts after ``<prefix>`` in a notification channel (``.oban_insert``,
#: ``.oban_signal``, ``.oban_leader``, ``.oban_gossip``).
CHANNEL_SUFFIX_BYTES = len(".oban_insert")
#: The longest prefix whose channel names still fit an identifier: 51 characters.
MAX_PREFIX_LENGTH = MAX_IDENTIFIER_BYTES - CHANNEL_SUFFIX_BYTES
PREFIX_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 0
DEFAULT_MAX_ATTEMPTS = 20
#: The longest delay accepted (100 years): longer ones overflow PostgreSQL's timestamps.
MAX_DELAY_SECONDS = 100 * 366 * 86_400


def check_queue(value: Any, field: str = "queue") -> str:
    if not isinstance(value, str):
        raise ValidationError(field, value, "must be a string")
    if not QUEUE_PATTERN.fullmatch(value):
        raise ValidationError(
            field,
            value,
            "must be 1-128 characters of letters, digits, '_', '.', ':' or '-' "
            "and not start with punctuation other than '_'",
        )
    return value


def check_queues(value: Any, field: str = "queues") -> list[str]:
    """A collection of queue names (a single string is refused: it is not a list of its letters)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(field, value, "must be a list of queue names")
    return [check_queue(queue, field) for queue in value]


def check_prefix(value: Any) -> str:
    """A PostgreSQL schema name for the tables: a plain identifier, so it is safe in every statement,
    short enough that ``<prefix>.oban_insert`` and the other channel names fit PostgreSQL's 63-byte
    identifiers (a longer channel name makes every ``pg_notify``, so every enqueue, fail)."""
    if not isinstance(value, str) or not PREFIX_PATTERN.fullmatch(value):
        raise ValidationError(
            "prefix",
            value,
            f"must be 1-{MAX_PREFIX_LENGTH} letters, digits or '_' and not start with a digit",
        )
    if len(value) > MAX_PREFIX_LENGTH:
        raise ValidationError(
            "prefix",
            value,
            f"is {len(value)} characters; at most {MAX_PREFIX_LENGTH} fit, so that the notification "
            f"channel '<prefix>.oban_insert' stays within PostgreSQL's {MAX_IDENTIFIER_BYTES}-byte names",
        )
    return value


#: Job ids are 64-bit (PostgreSQL's bigint, SQLite's INTEGER): no job has an id outside this range.
MIN_JOB_ID, MAX_JOB_ID = -(2**63), 2**63 - 1


def check_job_id(value: Any, field: str = "id") -> int:
    """A job id as the database can compare it: an integer within 64 bits (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, value, "must be a job id (an integer)")
    if not MIN_JOB_ID <= value <= MAX_JOB_ID:
        raise ValidationError(field, value, "is beyond the 64-bit range of job ids")
    return value if type(value) is int else int(value)  # a JobId: drivers want plain ints


#: The longest lock key taken (it is stored in meta and indexed).
MAX_LOCK_KEY = 255


def check_lock_key(field: str, value: Any) -> str:
    """An ordered or queueing lock key: non-empty text that JSON and both engines store exactly."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value or not is_utf8(value):
        raise ValidationError(
            field, value, "must be a non-empty string without NUL characters or lone surrogates"
        )
    if len(value) > MAX_LOCK_KEY:
        raise ValidationError(field, value, f"must be at most {MAX_LOCK_KEY} characters")
    return value


def check_priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError("priority", value, "must be an integer from 0 (first) to 9 (last)")
    if not 0 <= value <= 9:
        raise ValidationError("priority", value, "must be from 0 (first) to 9 (last)")
    return value


def check_max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError("max_attempts", value, "must be an integer >= 1")
    if not 1 <= value <= MAX_SMALLINT:
        raise ValidationError("max_attempts", value, f"must be from 1 to {MAX_SMALLINT}")
    return value


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate), as databases need."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_texts(field: str, value: Any) -> list[str]:
    """A list of strings a database can take (no NUL, no lone surrogate); a single string is refused:
    it is not a list of its letters."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(field, value, "must be a list of strings")
    texts = list(value)
    for text in texts:
        if not isinstance(text, str) or "\x00" in text or not is_utf8(text):
            raise ValidationError(
                field, value, f"each must be a string without NUL characters or lone surrogates; got {text!r}"
            )
    return texts


def normalise_tag(tag: str) -> str:
    """A tag as Oban stores it: surrounding blanks trimmed, lowercased (``str.lower``, as oban-py)."""
    return tag.strip().lower()


def check_tags(value: Any) -> tuple[str, ...]:
    """Tags normalised as Oban does on insert: each trimmed and lowercased, blank ones dropped,
    duplicates dropped (the first kept, in order). Anything but text is refused."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError("tags", value, "must be a list of strings")
    tags: dict[str, None] = {}
    for tag in value:
        if not isinstance(tag, str) or "\x00" in tag or not is_utf8(tag):
            raise ValidationError(
                "tags",
                value,
                f"each tag must be a string without NUL characters or lone surrogates; got {tag!r}",
            )
        normal = normalise_tag(tag)
        if normal:
            tags[normal] = None
    return tuple(tags)


def check_aware(field: str, value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise ValidationError(field, value, "must be a datetime")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValidationError(
            field, value, "is a naive datetime; give a timezone-aware one (e.g. tzinfo=UTC)"
        )
    if value.year in (1, 9999):  # the only years where the UTC time can fall outside datetime's range
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValidationError(field, value, "is out of range once converted to UTC") from None
    return value


def check_delay(field: str, value: Any) -> float:
    """A delay in seconds, given as a number or a ``timedelta``; never negative."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValidationError(field, value, "must be a number of seconds or a timedelta")
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise ValidationError(field, value, f"must be from 0 to {MAX_DELAY_SECONDS} seconds (100 years)")
    return seconds
