"""The JSON of a job's args and meta: encoded once, refused unless it comes back as it went in.

A job's args and meta are stored as JSON and must come back as they went in (or be refused): only
dict (string keys), list, tuple (read back as a list), str, int, float, bool and None are accepted.
orjson would write more (datetime, UUID, Enum, dataclass, str subclasses ...), each as a string, a
number or an object that reads back as something else; ``_JSON_OPTIONS`` make it hand every such value
(but UUIDs and enums, which it always writes) to ``_refuse``, and ``_plain`` catches the rest.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from enum import Enum
from math import copysign
from typing import Any

import orjson

from conveyor._options import is_utf8
from conveyor.errors import ValidationError
from conveyor.job import ExistingJobId, JobId
from conveyor.job_ids import JobIds

# A JSON "\u0000" escape (a NUL character, which jsonb cannot store): preceded by an even number of
# backslashes, so the text "\\u0000" (an escaped backslash, then "u0000") does not match.
NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
#: What orjson hands to ``_refuse`` instead of writing it (see the module's docstring).
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
