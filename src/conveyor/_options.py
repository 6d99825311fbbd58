"""Validation of the options every job carries into the database.

Each check raises :class:`~conveyor.errors.ValidationError` naming the field and the value, so bad
input is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from enum import Enum
from math import copysign
from typing import Any

import orjson

from conveyor.errors import ValidationError
from conveyor.job import ExistingJobId, JobId
from conveyor.job_ids import JobIds

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
# A JSON "\u0000" escape (a NUL character, which jsonb cannot store): preceded by an even number of
# backslashes, so the text "\\u0000" (an escaped backslash, then "u0000") does not match.
NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


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


# -- args and meta ----------------------------------------------------------------------------
# A job's args and meta are stored as JSON and must come back as they went in (or be refused): only
# dict (string keys), list, tuple (read back as a list), str, int, float, bool and None are accepted.
# orjson would write more (datetime, UUID, Enum, dataclass, str subclasses ...), each as a string, a
# number or an object that reads back as something else; these options make it hand every such value
# (but UUIDs and enums, which it always writes) to ``_refuse``, and ``_plain`` catches the rest.
_JSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)
#: The ids enqueue returns: int subclasses, stored (and read back) as the plain ints they are, so a
#: job's id can go straight into another job's args.
_JOB_IDS = frozenset({JobId, ExistingJobId})
#: Types stored exactly whatever their value (floats are looked at: see ``_plain``).
_SCALARS = frozenset({str, int, bool, type(None), *_JOB_IDS})
#: The deepest nesting orjson writes, counting args (or meta) itself as level 1.
MAX_JSON_DEPTH = 254
#: Integers orjson writes; both engines store them exactly and read them back as int.
MIN_JSON_INT = -(2**63)
MAX_JSON_INT = 2**64 - 1
#: PostgreSQL keeps JSON numbers as decimals, so a float from 1e16 on (orjson writes "1e+16") comes
#: back as an integer, and not always an equal one; from 2**64 on it comes back as a float again.
INTEGRAL_FLOAT = 1e16
FLOAT_AGAIN = 2.0**64


def _refuse(value: Any) -> Any:
    if type(value) in _JOB_IDS:
        return int(value)
    if type(value) is JobIds:  # what enqueue_many returned: a list of ints
        return value.tolist()
    raise TypeError  # orjson reports "Type is not JSON serializable"; _unfaithful says where and why


def _plain(values: Iterable[Any]) -> bool:
    """True when every value (and everything inside it) is stored exactly, as it is.

    False means a closer look (``_unfaithful``): a type JSON does not carry, NaN, an infinity, a
    float PostgreSQL would turn into an integer, or -0.0 (which is stored as 0.0).
    """
    for item in values:
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is float:
            # Fails for NaN and the infinities too; a zero passes only when it is not -0.0.
            if -INTEGRAL_FLOAT < item < INTEGRAL_FLOAT and (item or copysign(1.0, item) > 0):
                continue
            return False
        if kind is dict:
            if not _plain(item.values()):
                return False
        elif kind is list or kind is tuple:
            if not _plain(item):
                return False
        elif kind is not JobIds:  # a JobIds holds 64-bit ints only (stored as a list)
            return False
    return True


def encode_mapping(field: str, value: Any) -> bytes:
    """Check that ``value`` is a mapping with string keys whose values JSON stores exactly; return
    its JSON. Anything else raises ``ValidationError`` naming where the bad value sits.

    What finds nothing costs little: orjson refuses most bad types itself, one pass over the values
    (``_plain``) catches the others and odd floats, and a NUL character needs a backslash in the
    JSON. Only when one of them finds something does the slower walk (``_unfaithful``) run.
    """
    if type(value) is not dict:  # the common case skips the (slow) abstract-class check
        if not isinstance(value, Mapping):
            raise ValidationError(field, value, "must be a mapping (dict) of JSON-serialisable values")
        value = dict(value)
    try:
        encoded = orjson.dumps(value, default=_refuse, option=_JSON_OPTIONS)
    except TypeError as exc:
        refusal = _refusal(field, value) or ValidationError(field, value, f"is not JSON-serialisable: {exc}")
        raise refusal from None
    # 92 is a backslash: "in" with a byte is a memchr, with a bytes needle several times slower.
    if not _plain(value.values()) or (92 in encoded and NUL_ESCAPE.search(encoded)):
        found = _refusal(field, value)
        if found is not None:
            raise found
        # Only -0.0 is left. PostgreSQL stores it as 0.0 (a decimal has no negative zero): store
        # 0.0 on every engine, so they give back the same value (equal to the original anyway).
        encoded = orjson.dumps(_positive_zeros(value))
    # A copy of exactly the right size: orjson hands back its whole working buffer (4 KiB at least)
    # with the JSON at its start, and a request keeps its JSON until it is inserted. Kept as is,
    # 100,000 requests of a bulk insert held 400 MB; copied, 6 MB, and they are built 3x faster
    # because fewer fresh pages have to be touched.
    return b"%b" % encoded


def _refusal(field: str, value: dict[str, Any]) -> ValidationError | None:
    """The error naming the first value in ``value`` that JSON cannot store exactly, if any."""
    found = _unfaithful(value, field, 1)
    if found is None:
        return None
    what, where, why = found
    if len(where) > 160:  # nested hundreds deep
        where = f"{where[:80]}...{where[-60:]}"
    return ValidationError(field, value, f"holds {what} at {where}{why}")


#: What ``_unfaithful`` finds: what the value is, where it sits, and why it cannot be stored.
Unfaithful = tuple[str, str, str]


def _unfaithful(value: Any, path: str, depth: int) -> Unfaithful | None:
    """The first value in ``value`` (found at ``path``, nested ``depth`` deep) that JSON would not
    store exactly; None when there is none."""
    kind = type(value)
    if kind is str:
        return _bad_text(value, path)
    if kind is bool or value is None or kind is JobIds:
        return None
    if kind is int or kind in _JOB_IDS:
        if MIN_JSON_INT <= value <= MAX_JSON_INT:
            return None
        return str(value), path, ", an integer beyond the 64 bits JSON is written with (-2**63 to 2**64-1)"
    if kind is float:
        if not math.isfinite(value):
            return repr(value), path, ", which JSON cannot represent"
        if INTEGRAL_FLOAT <= abs(value) < FLOAT_AGAIN:
            return (
                repr(value),
                path,
                (
                    ", a float that PostgreSQL would give back as an integer (it stores JSON numbers as "
                    "decimals, and floats from 1e16 to 2**64 in magnitude are whole): pass an int or a str"
                ),
            )
        return None
    if kind is not dict and kind is not list and kind is not tuple:
        return (
            f"a {_type_name(value)} ({_short_repr(value)})",
            path,
            (
                f", which JSON would give back as something else: convert it (e.g. {_conversion(value)}); "
                "args and meta take dict, list, tuple, str, int, float, bool and None"
            ),
        )
    if depth > MAX_JSON_DEPTH:
        return (
            f"a {kind.__name__}",
            path,
            f" nested more than {MAX_JSON_DEPTH} deep, beyond what JSON is written with",
        )
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return (
                    f"the key {_short_repr(key)}",
                    path,
                    f" (of type {_type_name(key)}): JSON object keys are strings",
                )
            here = f"{path}[{key!r}]"
            found = _bad_text(key, here) or _unfaithful(item, here, depth + 1)
            if found is not None:
                return found
        return None
    for index, item in enumerate(value):
        found = _unfaithful(item, f"{path}[{index}]", depth + 1)
        if found is not None:
            return found
    return None


def _bad_text(text: str, path: str) -> Unfaithful | None:
    if "\x00" in text:
        return "a NUL character (\\x00)", path, ", which PostgreSQL cannot store in JSON"
    if not is_utf8(text):
        return f"the string {_short_repr(text)}", path, " with a lone surrogate, which is not valid UTF-8"
    return None


def _positive_zeros(value: Any) -> Any:
    """``value`` with every -0.0 turned into 0.0 (containers copied, tuples as lists)."""
    kind = type(value)
    if kind is float:
        return 0.0 if value == 0.0 else value
    if kind is dict:
        return {key: _positive_zeros(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_positive_zeros(item) for item in value]
    return value


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real problem
        text = object.__repr__(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _conversion(value: Any) -> str:
    """How to turn ``value`` into something JSON stores exactly, as named in the error."""
    if isinstance(value, Enum):
        return "value.value"
    if isinstance(value, datetime | date | time):
        return "value.isoformat()"
    if dataclasses.is_dataclass(value):
        return "dataclasses.asdict(value)"
    if isinstance(value, timedelta):
        return "value.total_seconds()"
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64 text"
    if isinstance(value, set | frozenset):
        return "sorted(value)"
    for base in (bool, str, int, float, dict, list):  # subclasses, numpy's float64 among them
        if isinstance(value, base):
            return f"{base.__name__}(value)"
    if isinstance(value, tuple):
        return "list(value)"  # a named tuple: or value._asdict()
    return "str(value)"


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
