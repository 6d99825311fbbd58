"""Property-based tests: every input either works exactly or gets a clear Conveyor error.

Five families: enqueue options (a request is built or ValidationError is raised, never another
exception), args and meta round trips through a real insert and read on PostgreSQL and SQLite
(equal under the documented normalisation), rows written by other programs with odd values
(``get_job``/``list_jobs`` give a Job or a Conveyor error), cron expressions (parsed or refused;
parsed ones tick exactly when they should) and settings (accepted or ValidationError).

Example counts stay modest, and the database-touching properties share one app per engine for the
whole module (each example works on its own rows), so the file runs in seconds.
"""

from __future__ import annotations

import base64
import contextlib
import math
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, assume, event, example, given, note, settings
from hypothesis import strategies as st

from conveyor import Conveyor, JobRequest, ValidationError, job
from conveyor._options import MAX_DELAY_SECONDS, QUEUE_PATTERN
from conveyor.cron import CronEntry, CronExpression
from conveyor.errors import ConveyorError, UnknownOptionError
from conveyor.job import Job, JobState
from conveyor.recorded import decode_result, encode_result
from conveyor.request import ENQUEUE_OPTIONS, RESERVED_META
from conveyor.settings import FIELD_NAMES, Settings
from tests.conftest import DSN

#: Shared by every property: no example database on disk, no per-example deadline (a loaded
#: machine must not turn a slow example into a failure).
BASE = settings(max_examples=100, deadline=None, database=None)
#: Properties that touch a database: fewer examples, and no shrinking (a failure is reported as
#: found; shrinking would replay hundreds of inserts).
DATABASE = settings(
    BASE,
    max_examples=60,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)

WORKER = "tests.test_properties.absent_worker"


# -- strategies ------------------------------------------------------------------------------------
#: Text JSON stores exactly: no NUL (PostgreSQL refuses it), no lone surrogates (not UTF-8).
TRICKY_TEXT = [
    "\\",
    "\\u0000",
    "\\\\u0000",
    "\t",
    "\n",
    "\r",
    "\\N",
    "\u2028",
    '"',
    "null",
    "-0.0",
    "e+1",
    "\x7f",
]
json_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12),
    st.lists(st.sampled_from(TRICKY_TEXT), max_size=4).map("".join),
)
json_ints = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from([0, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63)]),
)


def stored_float(value: float) -> bool:
    """A float JSON gives back as a float on both engines (see docs/guides/enqueueing.md)."""
    return math.isfinite(value) and not 1e16 <= abs(value) < 2.0**64


json_floats = st.one_of(
    st.floats(min_value=-1e16, max_value=1e16, exclude_min=True, exclude_max=True),
    st.floats(min_value=2.0**64, allow_infinity=False),
    st.floats(max_value=-(2.0**64), allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 0.1, 1e-7, 5e-324, 2.0**53 + 2, 9999999999999998.0, 2.0**64, 1.5e300]),
)
json_scalars = st.one_of(st.none(), st.booleans(), json_ints, json_floats, json_text)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(json_text, inner, max_size=4),
    ),
    max_leaves=20,
)
json_mappings = st.dictionaries(json_text, json_values, max_size=5)


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


#: Values that are not plain JSON, or JSON that cannot be stored as it is.
junk_values = st.one_of(
    st.floats().filter(lambda f: not stored_float(f)),
    st.integers().filter(lambda n: not -(2**63) <= n <= 2**64 - 1),
    st.text(max_size=5).map(lambda s: s + "\x00"),
    st.just("\ud800"),
    st.datetimes(),
    st.builds(uuid.uuid4),
    st.binary(max_size=4),
    st.frozensets(st.integers(), max_size=2),
    st.builds(Opaque),
    st.timedeltas(),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
)
maybe_junk_values = st.recursive(
    st.one_of(json_scalars, junk_values),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(json_text, inner, max_size=3)),
    max_leaves=8,
)
anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=3),
    st.builds(Opaque),
)


def normalised(value: Any) -> Any:
    """What a stored value reads back as: tuples are lists, -0.0 is 0.0."""
    if isinstance(value, dict):
        return {key: normalised(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalised(item) for item in value]
    if isinstance(value, float) and value == 0.0:
        return 0.0
    return value


def assert_same(got: Any, want: Any, path: str = "") -> None:
    """Equal, and of the same JSON types all the way down (an int is not a float, nor a bool)."""
    assert type(got) is type(want), f"{path}: {got!r} ({type(got).__name__}) != {want!r}"
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for key in want:
            assert_same(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{path}[{index}]")
    elif isinstance(want, float):
        assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want), (
            f"{path}: {got!r} != {want!r}"
        )
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


# -- (a) enqueue options ---------------------------------------------------------------------------
aware_datetimes = st.datetimes(timezones=st.one_of(st.just(UTC), st.timezones()))
fixed_offsets = st.builds(
    lambda moment, minutes: moment.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(),
    st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
)
option_values: dict[str, st.SearchStrategy[Any]] = {
    "queue": st.one_of(st.from_regex(QUEUE_PATTERN, fullmatch=True), st.text(max_size=140), anything),
    "priority": st.one_of(st.integers(min_value=-3, max_value=12), anything),
    "max_attempts": st.one_of(st.integers(min_value=-2, max_value=40_000), anything),
    "tags": st.one_of(
        st.lists(st.text(max_size=6), max_size=4),
        st.tuples(st.text(max_size=4)),
        st.lists(anything, max_size=2),
        anything,
    ),
    "meta": st.one_of(json_mappings, st.dictionaries(json_text, maybe_junk_values, max_size=3), anything),
    "scheduled_at": st.one_of(aware_datetimes, fixed_offsets, st.datetimes(), anything),
    "schedule_in": st.one_of(
        st.floats(),
        st.integers(min_value=-10, max_value=2 * MAX_DELAY_SECONDS),
        st.timedeltas(),
        anything,
    ),
}
some_options = st.fixed_dictionaries({}, optional=option_values)
#: Options that are mostly valid, so that requests get built and stored.
valid_options = st.fixed_dictionaries(
    {},
    optional={
        "queue": st.from_regex(QUEUE_PATTERN, fullmatch=True),
        "priority": st.integers(min_value=0, max_value=9),
        "max_attempts": st.integers(min_value=1, max_value=32767),
        "tags": st.lists(st.text(min_size=1, max_size=8), max_size=4),
        "meta": json_mappings,
        "scheduled_at": st.one_of(aware_datetimes, fixed_offsets),
    },
)


def check_request(request: JobRequest, options: dict[str, Any]) -> None:
    """The invariants of a request that was built: every field is what the database accepts."""
    assert QUEUE_PATTERN.fullmatch(request.queue)
    # Text the databases store: no NUL (PostgreSQL), valid UTF-8 (both drivers encode it).
    assert request.worker.strip() and "\x00" not in request.worker and request.worker.encode()
    assert all(tag.encode() for tag in request.tags)
    assert 0 <= request.priority <= 9 and type(request.priority) is int
    assert 1 <= request.max_attempts <= 32767 and type(request.max_attempts) is int
    assert all(
        isinstance(tag, str) and tag and tag == tag.strip().lower() and "\x00" not in tag
        for tag in request.tags
    )
    assert len(set(request.tags)) == len(request.tags)
    assert_same(orjson.loads(request.args_json), normalised(dict(request.args)))
    assert_same(orjson.loads(request.meta_json), normalised(dict(request.meta)))
    if request.scheduled_at is not None:
        at = request.scheduled_at_utc
        assert at is not None and at.tzinfo is None
    if request.schedule_in is not None:
        assert 0 <= request.schedule_in <= MAX_DELAY_SECONDS


@BASE
@given(
    options=some_options,
    args=st.one_of(json_mappings, st.dictionaries(json_text, maybe_junk_values)),
    worker=st.one_of(st.just(WORKER), st.text(max_size=10), anything),
)
@example(
    options={"scheduled_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))}, args={}, worker="w"
)
@example(
    options={"scheduled_at": datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-1)))},
    args={},
    worker="w",
)
@example(
    options={"schedule_in": MAX_DELAY_SECONDS + 1, "tags": "abc", "queue": "-x"}, args={"a": 1e16}, worker="w"
)
@example(options={"tags": ["\ud800"]}, args={}, worker="w")
@example(options={}, args={}, worker="\udfff")
def test_options_build_a_valid_request_or_raise_validation_error(
    options: dict[str, Any], args: Any, worker: Any
) -> None:
    try:
        request = JobRequest(worker, args=args, **options)
    except ValidationError as exc:
        assert exc.field and exc.problem and str(exc)
        note(str(exc))
    else:
        check_request(request, options)
    # with_options on a valid request takes the same options the same way.
    try:
        copy = JobRequest(WORKER).with_options(**options)
    except ValidationError as exc:
        assert exc.problem
    else:
        check_request(copy, options)


@BASE
@given(name=st.text(max_size=12), value=anything)
def test_unknown_option_names_are_refused_by_name(name: str, value: Any) -> None:
    assume(name not in ENQUEUE_OPTIONS)
    with pytest.raises(UnknownOptionError) as exc:
        JobRequest(WORKER).with_options(**{name: value})
    assert exc.value.field == name


def _target(n: int) -> int:
    return n


@BASE
@given(
    options=st.fixed_dictionaries({}, optional={k: v for k, v in option_values.items() if "sched" not in k})
)
def test_decorator_defaults_are_checked_like_options(options: dict[str, Any]) -> None:
    try:
        definition = job(**options)(_target).definition
    except ValidationError:
        return
    check_request(definition.new(n=1), options)


@BASE
@given(args=st.dictionaries(json_text, maybe_junk_values, max_size=4))
def test_args_are_encoded_exactly_or_refused(args: dict[str, Any]) -> None:
    try:
        request = JobRequest(WORKER, args=args)
    except ValidationError as exc:
        assert exc.field == "args"
        assert " at args" in exc.problem or "JSON" in exc.problem
    else:
        assert_same(orjson.loads(request.args_json), normalised(args))


# -- (b) args and meta round trips ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg_app() -> Iterator[Conveyor]:
    prefix = f"conveyor_props_{uuid.uuid4().hex[:10]}"
    app = Conveyor(DSN, prefix=prefix)
    try:
        app.install_sync()
        yield app
    finally:
        app.close_sync()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE'.encode())


@pytest.fixture(scope="module")
def sqlite_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties") / "jobs.db"


@pytest.fixture(scope="module")
def sqlite_app(sqlite_path: Path) -> Iterator[Conveyor]:
    app = Conveyor(f"sqlite:///{sqlite_path}")
    try:
        app.install_sync()
        yield app
    finally:
        app.close_sync()


@pytest.fixture(scope="module")
def apps(pg_app: Conveyor, sqlite_app: Conveyor) -> dict[str, Conveyor]:
    return {"postgresql": pg_app, "sqlite": sqlite_app}


#: Meta as a caller may give it: Conveyor's own markers are refused (Hypothesis finds their names
#: in the code under test and tries them).
caller_meta = json_mappings.filter(lambda meta: not set(meta).intersection(RESERVED_META))


@DATABASE
@given(args=json_mappings, meta=caller_meta)
def test_args_and_meta_come_back_as_enqueued_on_both_engines(
    apps: dict[str, Conveyor], args: dict[str, Any], meta: dict[str, Any]
) -> None:
    request = JobRequest(WORKER, args=args, meta=meta)
    for name, app in apps.items():
        found = app.get_job_sync(app.enqueue_sync(request))
        assert found is not None, name
        assert_same(found.args, normalised(args), f"{name}: args")
        assert_same(found.meta, normalised(meta), f"{name}: meta")


@settings(DATABASE, max_examples=60)
@given(
    options=st.one_of(valid_options, some_options),
    args=json_mappings,
    worker=st.one_of(st.just(WORKER), st.text(min_size=1, max_size=10)),
    many=st.booleans(),
)
@example(options={"scheduled_at": datetime(1, 1, 1, tzinfo=UTC)}, args={}, worker="w", many=True)
@example(
    options={"scheduled_at": datetime(9999, 12, 31, 23, 59, tzinfo=UTC)}, args={}, worker="w", many=False
)
@example(  # the second 01:30 of the night the clocks went back (fold=1)
    options={
        "scheduled_at": datetime(1997, 10, 26, 1, 30, 17, fold=1, tzinfo=ZoneInfo("America/Hermosillo"))
    },
    args={},
    worker="w",
    many=False,
)
@example(  # tags sent as an array literal (one job): quoting and escaping
    options={"tags": ['quo"te', "back\\slash", "NULL", "a,b", "{x}", " y "]}, args={}, worker="w", many=False
)
def test_every_request_that_builds_is_stored_as_built_on_both_engines(
    apps: dict[str, Conveyor], options: dict[str, Any], args: dict[str, Any], worker: str, many: bool
) -> None:
    try:
        request = JobRequest(worker, args=args, **options)
    except ValidationError:
        event("refused")
        return
    event("stored")
    for name, app in apps.items():
        # One insert alone, or in a batch big enough for PostgreSQL's COPY path.
        job_id = app.enqueue_many_sync([request] * 200)[0] if many else app.enqueue_sync(request)
        found = app.get_job_sync(job_id)
        assert found is not None, name
        assert (found.worker, found.queue, found.priority, found.max_attempts) == (
            request.worker,
            request.queue,
            request.priority,
            request.max_attempts,
        ), name
        assert found.tags == request.tags, name
        assert_same(found.args, normalised(args), f"{name}: args")
        assert_same(found.meta, normalised(dict(request.meta)), f"{name}: meta")
        if request.scheduled_at is not None:
            # The same instant. Compared in UTC: Python never finds an ambiguous local time (fold)
            # equal to a time in another zone (PEP 495), though both name one instant.
            assert found.scheduled_at == request.scheduled_at.astimezone(UTC), name


@settings(DATABASE, max_examples=8)
@given(mappings=st.lists(json_mappings, min_size=1, max_size=6))
def test_bulk_enqueues_store_args_exactly(apps: dict[str, Conveyor], mappings: list[dict[str, Any]]) -> None:
    # 250 jobs: PostgreSQL streams them with COPY (its own escaping), SQLite in multi-row statements.
    requests = [JobRequest(WORKER, args=mappings[i % len(mappings)], meta={"i": i}) for i in range(250)]
    for name, app in apps.items():
        ids = app.enqueue_many_sync(requests)
        picked = sorted({0, 1, len(ids) - 1, *range(len(mappings))})
        found = {job.id: job for job in app.list_jobs_sync(ids=[ids[i] for i in picked])}
        for i in picked:
            assert_same(found[ids[i]].args, normalised(mappings[i % len(mappings)]), f"{name}: job {i}")
            assert found[ids[i]].meta == {"i": i}


filter_texts = st.one_of(st.text(max_size=10), st.lists(st.text(max_size=8), max_size=2), anything)
filter_values: dict[str, st.SearchStrategy[Any]] = {
    "ids": st.one_of(st.integers(), st.lists(st.integers(), max_size=3), anything),
    "states": st.one_of(
        st.sampled_from([s.value for s in JobState]), st.lists(st.text(max_size=10)), anything
    ),
    "queues": filter_texts,
    "workers": filter_texts,
    "tags": filter_texts,
    "limit": st.one_of(st.integers(min_value=-2, max_value=20_000), anything),
    "before_id": st.one_of(st.integers(), anything),
}
job_ids = st.one_of(st.integers(), st.sampled_from([2**63 - 1, 2**63, -(2**63), 2**70]), anything)


@DATABASE
@given(criteria=st.fixed_dictionaries({}, optional=filter_values), job_id=job_ids)
def test_job_lookups_give_results_or_conveyor_errors_on_both_engines(
    apps: dict[str, Conveyor], criteria: dict[str, Any], job_id: Any
) -> None:
    # Ids beyond 64 bits, bools, strings and NUL characters reached the database and came back as
    # psycopg's and sqlite3's own errors; they are refused as ValidationError before any query.
    for app in apps.values():
        with contextlib.suppress(ConveyorError):
            assert all(isinstance(found, Job) for found in app.list_jobs_sync(**criteria))
        with contextlib.suppress(ConveyorError):
            found = app.get_job_sync(job_id)
            assert found is None or isinstance(found, Job)
        if isinstance(job_id, int) and not isinstance(job_id, bool):  # never an empty filter (= all jobs)
            with contextlib.suppress(ConveyorError):
                assert isinstance(app.cancel_jobs_sync(ids=[job_id]), list)


# -- (c) rows written by other programs ------------------------------------------------------------
def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


ODD_JSON = [
    "{}",
    "[]",
    "null",
    '"text"',
    "1",
    "[1, 2]",
    "1e400",
    "-1e400",
    '{"n": 1e400}',
    '{"n": 123456789012345678901234567890}',
    '{"n": 1e-400}',
    '{"n": -0}',
    '{"deep": ' + nested(300) + "}",
    '{"deep": ' + nested(1100) + "}",
    '{"a": "\\ud800"}',
    '{"": {"": null}}',
]
odd_json = st.one_of(st.sampled_from(ODD_JSON), json_mappings.map(lambda m: orjson.dumps(m).decode()))
ODD_ERRORS = ["[]", "null", "{}", '[1, "x", null]', '[{"at": "junk", "attempt": "x"}]', "1e400"]
ODD_TIMES = ["infinity", "-infinity", "20000-01-01 00:00:00", "0001-01-01 00:00:00", "2030-01-01 12:00:00"]
PG_STATES = [
    "available",
    "scheduled",
    "executing",
    "retryable",
    "completed",
    "discarded",
    "cancelled",
    "suspended",
]
pg_text_arrays = st.one_of(
    st.just("{}"),
    st.just("{NULL}"),
    st.lists(json_text.filter(lambda s: "\x00" not in s), max_size=3).map(
        lambda items: (
            "{" + ",".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "}"
        )
    ),
)
pg_rows = st.fixed_dictionaries(
    {
        "state": st.sampled_from(PG_STATES),
        "worker": st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1),
        "args": odd_json,
        "meta": odd_json,
        "errors": st.one_of(st.sampled_from(ODD_ERRORS), odd_json),
        "tags": pg_text_arrays,
        "attempted_by": pg_text_arrays,
        "attempt": st.integers(min_value=0, max_value=3),
        "max_attempts": st.sampled_from([3, 20, 32767]),
        "priority": st.sampled_from([0, 9, 10, 32767]),
        "inserted_at": st.sampled_from(ODD_TIMES),
        "scheduled_at": st.sampled_from(ODD_TIMES),
        "attempted_at": st.one_of(st.none(), st.sampled_from(ODD_TIMES)),
        "completed_at": st.one_of(st.none(), st.sampled_from(ODD_TIMES)),
    }
)


def read_back(app: Conveyor, job_id: int, queue: str) -> None:
    """get_job and list_jobs give the row as a Job, or raise a Conveyor error: nothing else."""
    try:
        found = app.get_job_sync(job_id)
        assert found is None or isinstance(found, Job)
    except ConveyorError:
        pass
    try:
        listed = app.list_jobs_sync(queues=[queue])
        assert all(isinstance(item, Job) for item in listed)
    except ConveyorError:
        pass


@DATABASE
@given(row=pg_rows)
def test_foreign_rows_read_on_postgresql_give_a_job_or_a_conveyor_error(
    pg_app: Conveyor, row: dict[str, Any]
) -> None:
    queue = f"foreign_{uuid.uuid4().hex[:12]}"
    table = f'"{pg_app.settings.prefix}".oban_jobs'
    columns = ", ".join(row)
    casts = {"state": "::{p}.oban_job_state", "tags": "::text[]", "attempted_by": "::text[]"}
    values = []
    for column in row:
        cast = casts.get(column, "")
        if column in ("args", "meta", "errors"):
            cast = "::jsonb"
        elif column.endswith("_at"):
            cast = "::timestamp"
        values.append("%s" + cast.format(p=f'"{pg_app.settings.prefix}"'))
    statement = f"INSERT INTO {table} (queue, {columns}) VALUES (%s, {', '.join(values)}) RETURNING id"
    try:
        with psycopg.connect(DSN, autocommit=True) as conn:
            inserted = conn.execute(statement.encode(), [queue, *row.values()]).fetchone()
    except (psycopg.errors.DataError, psycopg.errors.IntegrityError):
        assume(False)  # PostgreSQL itself refuses the row: nothing to read
        return
    assert inserted is not None
    read_back(pg_app, inserted[0], queue)


SQLITE_STATES = PG_STATES
sqlite_text = st.one_of(
    st.sampled_from(
        ["", "not json", "{", "[1,", "nan", "NaN", "Infinity", "1e400", "[null]", '{"a":1}', "[1, 2]"]
    ),
    odd_json,
)
sqlite_times = st.one_of(
    st.sampled_from(
        ["", "garbage", "20000-01-01 00:00:00.000000", "2030-13-45 99:99:99", "2030-01-01T00:00:00+05:00"]
    ),
    st.sampled_from(ODD_TIMES[3:]).map(lambda t: t + ".000000"),
)
sqlite_rows = st.fixed_dictionaries(
    {
        "state": st.sampled_from(SQLITE_STATES),
        "worker": st.text(min_size=1, max_size=10),
        "args": sqlite_text,
        "meta": sqlite_text,
        "errors": st.one_of(st.sampled_from(ODD_ERRORS), sqlite_text),
        "tags": sqlite_text,
        "attempted_by": sqlite_text,
        "attempt": st.integers(min_value=0, max_value=3),
        "max_attempts": st.one_of(st.sampled_from([3, 20, 2**63 - 1]), st.just("x"), st.just(3.5)),
        "priority": st.one_of(st.sampled_from([0, 9, 10, 2**63 - 1]), st.just("high"), st.just(1.5)),
        "inserted_at": sqlite_times,
        "scheduled_at": sqlite_times,
        "attempted_at": st.one_of(st.none(), sqlite_times),
        "completed_at": st.one_of(st.none(), sqlite_times),
    }
)


@DATABASE
@given(row=sqlite_rows)
def test_foreign_rows_read_on_sqlite_give_a_job_or_a_conveyor_error(
    sqlite_app: Conveyor, sqlite_path: Path, row: dict[str, Any]
) -> None:
    assume(all("\ud800" not in str(value) for value in row.values()))
    queue = f"foreign_{uuid.uuid4().hex[:12]}"
    columns = ", ".join(row)
    marks = ", ".join("?" * len(row))
    conn = sqlite3.connect(sqlite_path, timeout=10)
    try:
        with conn:
            cursor = conn.execute(
                f"INSERT INTO oban_jobs (queue, {columns}) VALUES (?, {marks}) RETURNING id",
                [queue, *row.values()],
            )
            job_id = cursor.fetchone()[0]
    except sqlite3.IntegrityError:
        assume(False)  # a CHECK constraint refuses the row
        return
    except (sqlite3.Error, UnicodeEncodeError) as exc:
        raise AssertionError(f"could not write the row: {exc}") from exc
    finally:
        conn.close()
    read_back(sqlite_app, job_id, queue)


# -- (d) cron expressions ---------------------------------------------------------------------------
CRON_ALPHABET = "0123456789*/-,@ abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\t²٣"
#: One field's text: mostly numbers and operators (with digits that str.isdigit accepts but int()
#: refuses, or reads though cron should not), sometimes names or anything.
cron_tokens = st.one_of(
    st.text("0123456789²٣*/-,", min_size=1, max_size=6),
    st.sampled_from(
        ["*", "MON-FRI", "jan", "SUN", "\u017fep", "*/0", "1-", "-1", "5-1", "60", "1,,2", "@daily"]
    ),
    st.text(CRON_ALPHABET.replace(" ", "").replace("\t", ""), min_size=1, max_size=5),
)


@settings(BASE, max_examples=300)
@given(
    text=st.one_of(
        st.lists(cron_tokens, min_size=5, max_size=5).map(" ".join),
        st.text(CRON_ALPHABET, max_size=30),
        st.text(max_size=30),
    )
)
def test_any_text_parses_or_raises_a_validation_error(text: str) -> None:
    try:
        CronExpression.parse(text)
    except ValidationError as exc:
        assert exc.field == "cron" and exc.problem


FIELD_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


@st.composite
def cron_field(draw: st.DrawFn, index: int) -> tuple[str, set[int]]:
    """One field's text and, computed independently, the values it stands for."""
    low, high = FIELD_RANGES[index]
    items: list[str] = []
    values: set[int] = set()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        kind = draw(st.sampled_from(["star", "value", "range", "step"]))
        step = draw(st.integers(min_value=1, max_value=high + 1))
        if kind == "star":
            items.append("*" if step == 1 else f"*/{step}")
            values |= set(range(low, high + 1, step))
        elif kind == "value":
            value = draw(st.integers(min_value=low, max_value=high))
            items.append(str(value))
            values.add(value)
        else:
            first = draw(st.integers(min_value=low, max_value=high))
            last = draw(st.integers(min_value=first, max_value=high))
            items.append(f"{first}-{last}" + (f"/{step}" if kind == "step" else ""))
            values |= set(range(first, last + 1, step if kind == "step" else 1))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return ",".join(items), values


@st.composite
def cron_expressions(draw: st.DrawFn) -> tuple[str, list[set[int]], bool, bool]:
    fields = [draw(cron_field(i)) for i in range(5)]
    text = " ".join(f for f, _ in fields)
    parts = text.split()
    return text, [v for _, v in fields], parts[2] != "*", parts[4] != "*"


def expected_match(
    moment: datetime, sets: list[set[int]], days_restricted: bool, weekdays_restricted: bool
) -> bool:
    minutes, hours, days, months, weekdays = sets
    if moment.minute not in minutes or moment.hour not in hours or moment.month not in months:
        return False
    day, weekday = moment.day in days, moment.isoweekday() % 7 in weekdays
    return (day or weekday) if days_restricted and weekdays_restricted else (day and weekday)


@settings(BASE, max_examples=150)
@given(
    expression=cron_expressions(),
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1)),
)
def test_parsed_expressions_tick_exactly_on_matching_minutes(
    expression: tuple[str, list[set[int]], bool, bool], start: datetime
) -> None:
    text, sets, days_restricted, weekdays_restricted = expression
    parsed = CronExpression.parse(text)
    assert [parsed.minutes, parsed.hours, parsed.days, parsed.months, parsed.weekdays] == sets
    after = start.replace(tzinfo=UTC)
    until = after + timedelta(hours=6)
    entry = CronEntry(parsed, JobRequest(WORKER))
    ticks = list(entry.ticks(after, until))
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    wanted = []
    while moment <= until:
        if expected_match(moment, sets, days_restricted, weekdays_restricted):
            wanted.append(moment)
        moment += timedelta(minutes=1)
    assert ticks == wanted


# -- (e) settings -----------------------------------------------------------------------------------
setting_values = st.one_of(
    anything,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-5, max_value=10**6),
    st.sampled_from(["", "false", "true", "0", "1.5", "public", "x" * 70, "a b", "default"]),
    st.lists(st.text(max_size=5), max_size=2),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
queue_specs = st.one_of(
    st.text(st.sampled_from("ab:,0123 -x"), max_size=10),
    st.lists(st.text(st.sampled_from("ab:1x"), max_size=5), max_size=3),
    st.dictionaries(
        st.text(max_size=6),
        st.one_of(
            st.integers(min_value=-2, max_value=50),
            st.dictionaries(st.sampled_from(["limit", "executor", "bogus"]), setting_values, max_size=2),
            anything,
        ),
        max_size=3,
    ),
)


def for_setting(name: str) -> st.SearchStrategy[tuple[str, Any]]:
    values = st.one_of(setting_values, queue_specs) if name == "queues" else setting_values
    return st.tuples(st.just(name), values)


def setting_dicts(names: tuple[str, ...] | list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(st.sampled_from(names).flatmap(for_setting), max_size=3).map(dict)


@settings(BASE, max_examples=200)
@given(values=setting_dicts(FIELD_NAMES))
def test_settings_are_accepted_or_raise_validation_error(values: dict[str, Any]) -> None:
    try:
        Settings(**values)
    except ValidationError as exc:
        assert exc.problem


@settings(BASE, max_examples=100)
@given(values=setting_dicts([n for n in FIELD_NAMES if n != "database_url"]))
def test_app_keyword_settings_are_accepted_or_raise_validation_error(
    tmp_path_factory: pytest.TempPathFactory, values: dict[str, Any]
) -> None:
    path = tmp_path_factory.getbasetemp() / "settings.db"
    try:
        app = Conveyor(f"sqlite:///{path}", **values)
    except ValidationError as exc:
        assert exc.problem
    else:
        app.close_sync()


# -- recorded results ------------------------------------------------------------------------------
recordable = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=15,
)


def recorded_form(value: Any) -> Any:
    """A recorded value as read back: tuples are lists, bytes that are UTF-8 text are str."""
    if isinstance(value, dict):
        return {key: recorded_form(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [recorded_form(item) for item in value]
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value
    return value


@BASE
@given(value=recordable)
def test_recorded_results_come_back_as_recorded(value: Any) -> None:
    assert_same(decode_result(encode_result(value)), recorded_form(value))


@BASE
@given(
    meta=st.one_of(
        st.fixed_dictionaries(
            {
                "recorded": st.one_of(st.just(True), anything),
                "return": st.one_of(st.text(max_size=24), anything),
            }
        ),
        st.binary(max_size=24).map(
            lambda raw: {"recorded": True, "return": base64.b64encode(b"\x83" + raw).decode()}
        ),
        st.dictionaries(st.text(max_size=5), anything, max_size=2),
    )
)
def test_junk_recorded_results_raise_lookup_or_conveyor_errors(meta: dict[str, Any]) -> None:
    with contextlib.suppress(LookupError, ConveyorError):
        decode_result(meta)
