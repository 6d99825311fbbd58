"""Log line formats of ``conveyor start --log-format``, usable in your own logging setup too.

``TEXT_FORMAT`` is the text line's ``logging.Formatter`` format. ``JsonFormatter`` writes one JSON
object per line: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``message``, then
every ``extra`` attribute of the record as a key (a job's outcome line carries job_id, worker,
queue, attempt, max_attempts, state, outcome, duration_ms, queue_time_ms and error_type), and
``exception`` (the formatted traceback) when the record has one. Values JSON cannot hold are
written as their ``str()``; text that is not valid Unicode (a lone surrogate) is escaped, so a line
is always written.

The library never configures logging itself; ``conveyor start`` does (see ``conveyor.cli.logs``)::

    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level="INFO", handlers=[handler])
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Attributes every ``LogRecord`` has: the rest were given through ``extra``.
STANDARD_ATTRIBUTES = frozenset(
    {
        *logging.LogRecord("", 0, "", 0, "", None, None).__dict__,
        "message",
        "asctime",
        "taskName",
    }
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module's documentation)."""

    #: The whole second last formatted, and its text: the date is formatted once a second.
    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        attributes = record.__dict__
        for key in _extra_keys(tuple(attributes)):
            entry[key] = attributes[key]
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        try:
            return _dumps(entry)
        except orjson.JSONEncodeError:
            return _dumps({str(key): _safe(value) for key, value in entry.items()})

    def _timestamp(self, created: float) -> str:
        """``created`` in UTC, ISO 8601 with milliseconds (``2025-01-07T10:15:02.114+00:00``)."""
        whole = int(created)
        second, text = self._second
        if second != whole:
            text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = (whole, text)
        return f"{text}.{int((created - whole) * 1000):03d}+00:00"


#: The extra attributes of each shape of record seen (its attribute names, in order): a job's line
#: has one shape, so its extras are found once, not by testing some thirty names on every line.
_EXTRAS: dict[tuple[str, ...], tuple[str, ...]] = {}
#: The keys the formatter writes itself, which an extra attribute of the same name does not replace.
_OWN = frozenset({"ts", "level", "logger", "message"})


def _extra_keys(names: tuple[str, ...]) -> tuple[str, ...]:
    found = _EXTRAS.get(names)
    if found is None:
        found = tuple(key for key in names if key not in STANDARD_ATTRIBUTES and key not in _OWN)
        if len(_EXTRAS) < 256:  # records of ever new shapes are looked at, not kept
            _EXTRAS[names] = found
    return found


def _dumps(entry: dict[str, Any]) -> str:
    return orjson.dumps(entry, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _safe(value: Any) -> Any:
    """``value`` as JSON surely holds it: plain scalars as they are, anything else as escaped text."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**64:  # what JSON numbers orjson writes
        return value
    text = value if isinstance(value, str) else _text(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception as exc:  # a value whose __str__ fails still leaves a line
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
