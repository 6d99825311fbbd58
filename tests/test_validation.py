"""Bad input is refused with a ValidationError naming the field and the value, before any write."""

from __future__ import annotations

import collections
import dataclasses
import decimal
import enum
import math
import tracemalloc
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from conveyor import (
    Conveyor,
    JobFilter,
    JobRequest,
    UnknownOptionError,
    ValidationError,
    WorkerNotFoundError,
    job,
    worker,
)
from conveyor._resolver import Resolver, import_definition
from conveyor.definition import JobDefinition
from conveyor.engine.urls import engine_from_url
from tests.helpers import CHUNK, count_jobs


@job(queue="resolvable")
async def resolvable_job(n: int) -> int:
    return n


@worker(priority=3)
class ResolvableWorker:
    async def process(self, job: Any) -> None:
        pass

    @worker()
    class Nested:
        def process(self, job: Any) -> None:
            pass


def plain_function(n: int) -> int:
    return n


class Unserialisable:
    pass


def assert_invalid(exc: pytest.ExceptionInfo[ValidationError], field: str, value: Any) -> None:
    assert exc.value.field == field
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(exc.value.value)
    else:
        assert exc.value.value == value
    assert field in str(exc.value)


# -- args and meta ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["args", "meta"])
@pytest.mark.parametrize("value", [[1, 2], "text", 42, None, ("a", 1)])
def test_mapping_fields_must_be_mappings(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", **{field: value})
    assert_invalid(exc, field, value)


@pytest.mark.parametrize("field", ["args", "meta"])
@pytest.mark.parametrize(
    "value",
    [
        {"obj": Unserialisable()},
        {"set": {1, 2}},
        {"nested": {"deep": [object()]}},
        {"huge": 2**70},
        {"bytes": b"raw"},
    ],
    ids=["object", "set", "nested-object", "int-too-big", "bytes"],
)
def test_mapping_fields_must_be_json_serialisable(field: str, value: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", **{field: value})
    assert_invalid(exc, field, value)
    assert "JSON" in exc.value.problem


@pytest.mark.parametrize("field", ["args", "meta"])
@pytest.mark.parametrize(
    "value",
    [{1: "one"}, {"ok": {2: "two"}}, {("a", "b"): 1}, {None: 1}],
    ids=["int", "nested", "tuple", "none"],
)
def test_mapping_keys_must_be_strings(field: str, value: dict[Any, Any]) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", **{field: value})
    assert_invalid(exc, field, value)


@pytest.mark.parametrize(
    "value",
    [{"text": "a\x00b"}, {"a\x00": 1}, {"list": ["ok", "\x00"]}],
    ids=["value", "key", "nested"],
)
def test_mapping_strings_must_not_hold_nul_characters(value: dict[str, Any]) -> None:
    # PostgreSQL cannot store U+0000 in jsonb; refusing it here keeps a bulk enqueue from failing midway.
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", args=value)
    assert_invalid(exc, "args", value)


def test_escaped_backslash_before_u0000_text_is_accepted() -> None:
    # The text "\u0000" (a backslash then "u0000") is an ordinary string, not a NUL character.
    request = JobRequest("tests.w", args={"path": "C:\\u0000", "raw": "\\\\u0000"})
    assert request.args == {"path": "C:\\u0000", "raw": "\\\\u0000"}


def test_any_mapping_is_accepted_and_encoded() -> None:
    request = JobRequest("tests.w", args=MappingProxyType({"a": 1}), meta={"m": [1, "x", None]})
    assert request.args_json == b'{"a":1}'
    assert request.meta_json == b'{"m":[1,"x",null]}'


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("args", {"x": math.nan}, "args['x']"),
        ("args", {"a": [1, None, {"b": math.inf}]}, "args['a'][2]['b']"),
        ("meta", {"m": None, "n": (1.5, -math.inf)}, "meta['n'][1]"),
    ],
)
def test_nan_and_infinity_are_refused_not_turned_into_null(field: str, value: Any, where: str) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", **{field: value})
    assert exc.value.field == field
    assert f"at {where}" in str(exc.value)
    # The same through a definition's template, and a real null stays a null.
    with pytest.raises(ValidationError):
        JobRequest("tests.w").with_args(value)
    assert JobRequest("tests.w", args={"a": None, "b": 1.5}).args_json == b'{"a":null,"b":1.5}'


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 1


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


Pair = collections.namedtuple("Pair", "a b")


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (datetime(2030, 1, 1, tzinfo=UTC), "isoformat()"),
        (date(2030, 1, 1), "isoformat()"),
        (time(9, 30), "isoformat()"),
        (uuid.UUID(int=7), "str(value)"),
        (Colour.RED, "value.value"),
        (Level.HIGH, "value.value"),
        (Point(1), "dataclasses.asdict(value)"),
        (Name("x"), "str(value)"),
        (Pair(1, 2), "list(value)"),
        (decimal.Decimal("1.5"), "str(value)"),
        (frozenset({1}), "sorted(value)"),
        (bytearray(b"x"), "base64"),
        (timedelta(seconds=1), "total_seconds()"),
        (orjson.Fragment(b"{"), "str(value)"),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else "hint",
)
@pytest.mark.parametrize("field", ["args", "meta"])
def test_values_json_would_change_are_refused_with_their_path(field: str, value: Any, hint: str) -> None:
    # orjson would write each of these as a string, a number or an object, which reads back as
    # something else: refused, naming where the value sits and how to convert it.
    mapping = {"ok": 1, "nested": {"list": [0, value]}}
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", **{field: mapping})
    assert exc.value.field == field
    assert f"at {field}['nested']['list'][1]" in exc.value.problem
    assert hint in exc.value.problem
    with pytest.raises(ValidationError):  # the same through a definition's template
        JobRequest("tests.w").with_args(mapping)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (2**64 - 1, b"18446744073709551615"),
        (-(2**63), b"-9223372036854775808"),
        (9_999_999_999_999_998.0, b"9999999999999998.0"),
        (1.5e300, b"1.5e+300"),
        (-(2.0**64), b"-1.8446744073709552e+19"),
        (5e-324, b"5e-324"),
    ],
)
def test_numbers_stored_exactly_are_accepted(value: Any, stored: bytes) -> None:
    assert JobRequest("tests.w", args={"n": value}).args_json == b'{"n":' + stored + b"}"


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30])
def test_integers_beyond_64_bits_are_refused(value: int) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", args={"a": [value]})
    assert "at args['a'][0]" in exc.value.problem
    assert "64 bits" in exc.value.problem


@pytest.mark.parametrize("value", [1e16, -1e16, 1.2345678901234567e18, 2.0**64 - 4096])
def test_floats_postgresql_would_return_as_integers_are_refused(value: float) -> None:
    # jsonb keeps 1.2345678901234567e18 as the decimal 1234567890123456700, an int that is not
    # even equal to the float. From 2**64 on, orjson reads such decimals back as floats again.
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", meta={"m": {"f": value}})
    assert "at meta['m']['f']" in exc.value.problem
    assert "integer" in exc.value.problem


def test_negative_zero_is_stored_as_zero() -> None:
    # A decimal has no -0.0: PostgreSQL gives 0.0 back, and SQLite is given 0.0 too.
    request = JobRequest("tests.w", args={"z": -0.0, "l": [1, (-0.0, -0.001)], "s": "-0.0"})
    assert request.args_json == b'{"z":0.0,"l":[1,[0.0,-0.001]],"s":"-0.0"}'
    assert request.args == {"z": -0.0, "l": [1, (-0.0, -0.001)], "s": "-0.0"}


def test_nesting_beyond_what_json_is_written_with_is_refused_with_its_depth() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):  # far deeper than repr itself can go
        inner.append([])
        inner = inner[0]
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", args={"deep": deep})
    assert "nested more than 254 deep" in exc.value.problem
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValidationError, match="nested more than 254 deep"):
        JobRequest("tests.w", meta={"c": cyclic})


def test_keys_and_strings_name_their_path() -> None:
    with pytest.raises(ValidationError, match=r"the key 1 at args\['a'\] \(of type int\)"):
        JobRequest("tests.w", args={"a": {1: "x"}})
    with pytest.raises(ValidationError, match=r"NUL character .* at args\['a'\]\['k\\x00'\]"):
        JobRequest("tests.w", args={"a": {"k\x00": "x"}})
    with pytest.raises(ValidationError, match=r"lone surrogate") as exc:
        JobRequest("tests.w", args={"a": ["\ud800"]})
    assert "at args['a'][0]" in exc.value.problem


def test_a_value_with_a_broken_repr_is_still_reported() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    with pytest.raises(ValidationError, match=r"at args\['b'\]"):
        JobRequest("tests.w", args={"b": Broken()})


def test_requests_keep_their_json_compact() -> None:
    # A bulk insert holds its requests (chunk by chunk) until they are written: each must cost a
    # few hundred bytes, not the 4 KiB buffer orjson encodes into.
    template = JobRequest("tests.w", args={"n": 0})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [JobRequest("tests.w", args={"n": n}) for n in range(1_000)]
        kept += [template.with_args({"n": n}) for n in range(1_000)]
        per_request = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert [request.args_json for request in kept[999:1001]] == [b'{"n":999}', b'{"n":0}']
    assert per_request < 1_000, f"{per_request:.0f} bytes per request"


# -- worker ----------------------------------------------------------------------------------


# A lone surrogate cannot be encoded for either database (found by tests/test_properties.py).
@pytest.mark.parametrize("value", ["", "   ", None, 42, "a\x00b", "w\ud800"])
def test_worker_must_be_a_non_empty_string(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest(value)
    assert_invalid(exc, "worker", value)


# -- queue -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["", "with space", " leading", "*", "mail*", "-dash-first", ".dot", "q" * 129, "naïve", "a/b"],
)
def test_bad_queue_names(value: str) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", queue=value)
    assert_invalid(exc, "queue", value)


@pytest.mark.parametrize("value", [None, 1, b"mail", ["mail"]])
def test_queue_must_be_a_string(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", queue=value)
    assert_invalid(exc, "queue", value)


@pytest.mark.parametrize("value", ["q", "default", "_private", "mail.high:eu-1", "q" * 128, "9lives"])
def test_good_queue_names(value: str) -> None:
    assert JobRequest("tests.w", queue=value).queue == value


# -- priority, max_attempts -------------------------------------------------------------------


@pytest.mark.parametrize("value", [-1, 10, 100, True, False, 1.0, "1", None])
def test_bad_priority(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", priority=value)
    assert_invalid(exc, "priority", value)
    assert type(exc.value.value) is type(value)


@pytest.mark.parametrize("value", [0, 9])
def test_priority_bounds_are_inclusive(value: int) -> None:
    assert JobRequest("tests.w", priority=value).priority == value


@pytest.mark.parametrize("value", [0, -1, 32768, True, 2.0, "3", None])
def test_bad_max_attempts(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", max_attempts=value)
    assert_invalid(exc, "max_attempts", value)


# -- scheduling ------------------------------------------------------------------------------


def test_naive_scheduled_at_is_refused() -> None:
    naive = datetime(2030, 1, 1, 12, 0)
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", scheduled_at=naive)
    assert_invalid(exc, "scheduled_at", naive)
    assert "naive" in exc.value.problem


@pytest.mark.parametrize("value", ["2030-01-01T00:00:00Z", 1_900_000_000, datetime(2030, 1, 1).date()])
def test_scheduled_at_must_be_a_datetime(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", scheduled_at=value)
    assert_invalid(exc, "scheduled_at", value)


@pytest.mark.parametrize("value", [-1, -0.001, timedelta(seconds=-1), math.nan, math.inf, -math.inf, 1e13])
def test_bad_schedule_in(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", schedule_in=value)
    assert_invalid(exc, "schedule_in", value)


@pytest.mark.parametrize("value", ["60", True, complex(1, 1), [1]])
def test_schedule_in_must_be_seconds_or_timedelta(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", schedule_in=value)
    assert_invalid(exc, "schedule_in", value)


def test_schedule_in_accepts_numbers_and_timedeltas() -> None:
    assert JobRequest("tests.w", schedule_in=0).schedule_in == 0.0
    assert JobRequest("tests.w", schedule_in=90).schedule_in == 90.0
    assert JobRequest("tests.w", schedule_in=timedelta(minutes=2)).schedule_in == 120.0


@pytest.mark.parametrize(
    "value",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
    ],
    ids=["before-year-1", "after-year-9999"],
)
def test_scheduled_at_beyond_the_datetime_range_in_utc_is_refused(value: datetime) -> None:
    # Found by tests/test_properties.py: built fine, then the insert raised OverflowError.
    with pytest.raises(ValidationError, match="out of range once converted to UTC") as exc:
        JobRequest("tests.w", scheduled_at=value)
    assert_invalid(exc, "scheduled_at", value)
    edge = datetime(1, 1, 1, tzinfo=UTC)
    assert JobRequest("tests.w", scheduled_at=edge).scheduled_at_utc == edge.replace(tzinfo=None)


def test_scheduled_at_and_schedule_in_together_are_refused() -> None:
    when = datetime(2030, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", scheduled_at=when, schedule_in=5)
    assert_invalid(exc, "schedule_in", 5)
    request = JobRequest("tests.w", schedule_in=5)
    with pytest.raises(ValidationError) as exc:
        request.with_options(scheduled_at=when)
    assert_invalid(exc, "schedule_in", 5.0)


# -- tags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["single-string", b"bytes", 7, None, ["ok", 3], [None], ["a\x00"], ["\udfff"]],
)
def test_bad_tags(value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobRequest("tests.w", tags=value)
    assert_invalid(exc, "tags", value)


def test_tags_are_normalised_as_oban_does() -> None:
    # Trimmed, lowercased, blanks dropped, duplicates dropped (the first kept, in order).
    request = JobRequest("tests.w", tags=[" B ", "a", "b", "", "   ", "A ", "Zoë", "ZOË"])
    assert request.tags == ("b", "a", "zoë")
    assert JobRequest("tests.w", tags=["", " "]).tags == ()


def test_filter_tags_compare_normalised_and_refuse_blanks() -> None:
    assert JobFilter(tags=(" VIP", "vip ", "Eu")).tags == ("vip", "eu")
    assert JobFilter.build(tags="Mail").tags == ("mail",)
    with pytest.raises(ValidationError) as exc:
        JobFilter(tags=("vip", "  "))
    assert exc.value.field == "tags"


# -- option names ----------------------------------------------------------------------------


def test_with_options_refuses_unknown_option() -> None:
    request = JobRequest("tests.w")
    with pytest.raises(UnknownOptionError) as exc:
        request.with_options(queue="ok", prioritee=3)
    assert_invalid(exc, "prioritee", 3)
    assert "queue" in exc.value.problem  # it lists the known options


@pytest.mark.parametrize("name", ["worker", "args", "args_json", "meta_json"])
def test_with_options_refuses_non_option_fields(name: str) -> None:
    with pytest.raises(UnknownOptionError) as exc:
        JobRequest("tests.w").with_options(**{name: "x"})
    assert_invalid(exc, name, "x")


def test_with_options_validates_values() -> None:
    request = JobRequest("tests.w", queue="mail")
    with pytest.raises(ValidationError) as exc:
        request.with_options(priority=11)
    assert_invalid(exc, "priority", 11)
    changed = request.with_options(priority=2, tags=["x"])
    assert (changed.queue, changed.priority, changed.tags) == ("mail", 2, ("x",))
    assert request.priority == 0  # the original is unchanged


@pytest.mark.parametrize("name", ["que", "scheduled_at", "schedule_in", "attempt"])
def test_job_decorator_refuses_unknown_option(name: str) -> None:
    with pytest.raises(UnknownOptionError) as exc:

        @job(**{name: 1})
        def fn() -> None:
            pass

    assert_invalid(exc, name, 1)


def test_worker_decorator_refuses_unknown_option() -> None:
    with pytest.raises(UnknownOptionError) as exc:

        @worker(max_attempt=3)
        class W:
            def process(self, job: Any) -> None:
                pass

    assert_invalid(exc, "max_attempt", 3)


@pytest.mark.parametrize(
    ("options", "field", "value"),
    [
        ({"queue": "bad queue"}, "queue", "bad queue"),
        ({"priority": 12}, "priority", 12),
        ({"max_attempts": 0}, "max_attempts", 0),
        ({"tags": "one"}, "tags", "one"),
        ({"meta": []}, "meta", []),
        ({"timeout": -1}, "timeout", -1),
        ({"timeout": 0}, "timeout", 0),
        ({"backoff": 5}, "backoff", 5),
        ({"executor": "gpu"}, "executor", "gpu"),
        ({"executor": "async"}, "executor", "async"),
        ({"record": "yes"}, "record", "yes"),
    ],
)
def test_decorator_options_are_validated_at_decoration(
    options: dict[str, Any], field: str, value: Any
) -> None:
    with pytest.raises(ValidationError) as exc:

        @job(**options)
        def fn() -> None:
            pass

    assert_invalid(exc, field, value)


def test_decorators_refuse_the_wrong_kind_of_target() -> None:
    with pytest.raises(ValidationError) as exc:
        job(ResolvableWorker)
    assert exc.value.field == "job"
    with pytest.raises(ValidationError) as exc:
        worker()(plain_function)  # type: ignore[type-var]
    assert exc.value.field == "worker"
    with pytest.raises(ValidationError) as exc:
        worker()(Unserialisable)
    assert exc.value.field == "worker"
    assert exc.value.value == "Unserialisable"


def test_job_new_binds_positional_args_by_name_and_refuses_extra_ones() -> None:
    assert resolvable_job.new(5).args == {"n": 5}
    with pytest.raises(ValidationError) as exc:
        resolvable_job.new(5, 6)  # type: ignore[call-arg]
    assert exc.value.field == "args"
    assert exc.value.value == (5, 6)
    assert "resolvable_job" in str(exc.value) and "too many positional arguments" in str(exc.value)


# -- filters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("states", ["running", ["available", "done"], [1]])
def test_filter_refuses_unknown_states(states: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobFilter(states=states)
    assert_invalid(exc, "states", states)


def test_filter_accepts_state_names_and_enums() -> None:
    found = JobFilter(states=["available", "scheduled"]).states
    assert [s.value for s in found] == ["available", "scheduled"]
    assert JobFilter(states="completed").states[0].value == "completed"


def test_filter_build_refuses_unknown_filter_name() -> None:
    with pytest.raises(ValidationError) as exc:
        JobFilter.build(state="available")
    assert_invalid(exc, "state", "available")
    assert "states" in exc.value.problem


@pytest.mark.parametrize(
    ("criteria", "field", "value"),
    [
        ({"ids": ["1"]}, "ids", ["1"]),
        ({"ids": [True]}, "ids", [True]),
        ({"ids": 1.5}, "ids", 1.5),
        ({"queues": ["bad queue"]}, "queues", "bad queue"),
        ({"workers": [1]}, "workers", [1]),
        ({"tags": [None]}, "tags", [None]),
        ({"limit": 0}, "limit", 0),
        ({"limit": 10_001}, "limit", 10_001),
        ({"limit": True}, "limit", True),
        ({"before_id": "9"}, "before_id", "9"),
        # These reached the database, which raised its own errors (found by tests/test_properties.py).
        ({"ids": [1, 2**64]}, "ids", 2**64),
        ({"ids": -(2**63) - 1}, "ids", -(2**63) - 1),
        ({"before_id": 2**63}, "before_id", 2**63),
        ({"before_id": True}, "before_id", True),
        ({"after_id": "9"}, "after_id", "9"),
        ({"after_id": 2**63}, "after_id", 2**63),
        ({"workers": ["a\x00"]}, "workers", ("a\x00",)),
        ({"tags": "t\x00"}, "tags", ("t\x00",)),
    ],
)
def test_filter_refuses_bad_criteria(criteria: dict[str, Any], field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        JobFilter.build(**criteria)
    assert_invalid(exc, field, value)


@pytest.mark.parametrize("job_id", [2**63, -(2**63) - 1, "7", True, None, 1.0])
async def test_get_job_refuses_what_cannot_be_a_job_id(app: Conveyor, job_id: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        await app.get_job(job_id)
    assert_invalid(exc, "job_id", job_id)
    assert await app.get_job(2**63 - 1) is None


async def test_app_filters_are_validated(app: Conveyor) -> None:
    with pytest.raises(ValidationError) as exc:
        await app.list_jobs(statez=["available"])
    assert exc.value.field == "statez"
    with pytest.raises(ValidationError) as exc:
        await app.cancel_jobs(states=["gone"])
    assert exc.value.field == "states"


# -- bulk enqueue is all or nothing ----------------------------------------------------------


def requests_then(count: int, last: Any) -> Iterator[Any]:
    for n in range(count):
        yield resolvable_job.new(n=n)
    if isinstance(last, BaseException):
        raise last
    yield last


async def test_generator_that_raises_writes_nothing(app: Conveyor, dsn: str, prefix: str) -> None:
    with pytest.raises(RuntimeError, match="source failed"):
        await app.enqueue_many(requests_then(10, RuntimeError("source failed")))
    assert count_jobs(dsn, prefix) == 0


async def test_non_request_after_6000_valid_writes_nothing(app: Conveyor, dsn: str, prefix: str) -> None:
    bad = {"worker": "tests.w"}
    with pytest.raises(ValidationError) as exc:
        await app.enqueue_many(requests_then(6000, bad))
    assert_invalid(exc, "job", bad)
    assert count_jobs(dsn, prefix) == 0


async def test_failure_after_chunks_were_written_writes_nothing(app: Conveyor, dsn: str, prefix: str) -> None:
    # Two full chunks reach the database before the third one fails: all of it must roll back.
    with pytest.raises(RuntimeError, match="late failure"):
        await app.enqueue_many(requests_then(2 * CHUNK + 10, RuntimeError("late failure")))
    assert count_jobs(dsn, prefix) == 0
    # The app is still usable afterwards.
    assert len(await app.enqueue_many(requests_then(3, resolvable_job.new(n=3)))) == 4
    assert count_jobs(dsn, prefix) == 4


async def test_naive_now_is_refused(app: Conveyor, dsn: str, prefix: str) -> None:
    naive = datetime(2030, 1, 1)
    with pytest.raises(ValidationError) as exc:
        await app.enqueue(resolvable_job.new(n=1), now=naive)
    assert_invalid(exc, "now", naive)
    assert count_jobs(dsn, prefix) == 0


async def test_unknown_database_url_scheme() -> None:
    with pytest.raises(ValidationError) as exc:
        engine_from_url("redis://localhost/app")
    assert_invalid(exc, "database_url", "redis://localhost/app")
    # The app refuses a bad URL when it is built, not on first use.
    with pytest.raises(ValidationError) as exc:
        Conveyor("sqlite+nope://x")
    assert exc.value.field == "database_url"


# -- resolving workers -----------------------------------------------------------------------


def test_unknown_module_raises_worker_not_found() -> None:
    name = "no_such_package_xyz.jobs.send"
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name
    assert name in str(exc.value)


def test_missing_attribute_raises_worker_not_found() -> None:
    name = "tests.test_validation.no_such_job"
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name
    assert "no_such_job" in exc.value.reason


def test_undecorated_function_raises_worker_not_found() -> None:
    name = "tests.test_validation.plain_function"
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name
    assert "not decorated" in exc.value.reason


@pytest.mark.parametrize("name", ["", "nodots", "tests..x", "tests.test-validation.x", "1abc.x"])
def test_malformed_worker_names_raise_worker_not_found(name: str) -> None:
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name


def test_decorated_job_resolves() -> None:
    found = import_definition("tests.test_validation.resolvable_job")
    assert isinstance(found, JobDefinition)
    assert found.name == "tests.test_validation.resolvable_job"
    assert found.target is resolvable_job.fn
    assert found.is_async and not found.is_class
    assert found.defaults == {"queue": "resolvable"}


def test_decorated_worker_classes_resolve_including_nested() -> None:
    found = import_definition("tests.test_validation.ResolvableWorker")
    assert found.target is ResolvableWorker and found.is_class and found.defaults == {"priority": 3}
    nested = import_definition("tests.test_validation.ResolvableWorker.Nested")
    assert nested.target is ResolvableWorker.Nested and not nested.is_async


def test_resolver_prefers_registered_names_and_caches() -> None:
    resolver = Resolver([resolvable_job])
    assert resolver.resolve("tests.test_validation.resolvable_job").target is resolvable_job.fn
    resolver.register(resolvable_job, name="MyApp.Workers.Echo")
    assert resolver.resolve("MyApp.Workers.Echo").target is resolvable_job.fn
    with pytest.raises(WorkerNotFoundError) as exc:
        resolver.register(plain_function, name="Elixir.Plain")
    assert exc.value.worker == "Elixir.Plain"
    with pytest.raises(WorkerNotFoundError):
        resolver.resolve("tests.test_validation.plain_function")


def test_module_with_a_missing_dependency_reports_the_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``jobs_extra`` exists but imports ``jobs``, which does not: the error must say so, not claim
    # that ``jobs_extra`` is missing (its name merely starts with the missing one's).
    package = f"pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "jobs_extra.py").write_text(f"import {package}.jobs\n")
    (tmp_path / package / "exploding.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"{package}.jobs_extra.send"
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name
    assert f"importing {package}.jobs_extra failed" in exc.value.reason
    assert f"{package}.jobs" in exc.value.reason
    name = f"{package}.exploding.send"
    with pytest.raises(WorkerNotFoundError) as exc:
        import_definition(name)
    assert exc.value.worker == name
    assert "boom at import" in exc.value.reason


# -- outcomes ---------------------------------------------------------------------------------
def test_snooze_meta_is_checked_and_survives_pickling() -> None:
    import pickle

    from conveyor import Snooze

    snooze = pickle.loads(pickle.dumps(Snooze(5, meta={"why": "busy"})))
    assert (snooze.seconds, snooze.meta) == (5.0, {"why": "busy"})
    assert Snooze(5).meta is None and Snooze(5, meta={}).meta is None
    with pytest.raises(ValidationError) as exc:
        Snooze(5, meta={"when": datetime.now(UTC)})
    assert exc.value.field.startswith("snooze meta")
    with pytest.raises(ValidationError):
        Snooze(5, meta=["not", "a", "mapping"])  # type: ignore[arg-type]
