"""Conveyor on an ``oban_jobs`` table that Elixir Oban created, not oban-py.

Elixir's migrations (``Oban.Migrations.Postgres.V01`` ... ``V15``) leave a table that differs from
oban-py's: ``errors`` is ``jsonb[]`` (an array of jsonb, default ``'{}'``) instead of one jsonb JSON
array, ``attempt``/``max_attempts``/``priority`` are ``integer``, ``id`` is a ``bigserial``,
``tags``, ``meta`` and ``attempted_by`` are nullable, the enum may list ``suspended`` before
``scheduled``, tables up to V11 carry an ``oban_notify`` insert trigger, and the migration version
is the table's comment. The schemas below are written from those facts (our SQL, not Oban's), one
per era; each test runs ``conveyor install`` over one and then works jobs there.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from conveyor import Cancel, Conveyor, Job, JobState, Snooze, StatsQuery, current_job, job, worker
from conveyor.acks import Ack
from conveyor.cli.main import main
from conveyor.engine.postgres import PostgresEngine, schema
from conveyor.errors import SchemaError
from conveyor.filters import JobFilter
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from tests import helpers
from tests.helpers import count_jobs, execute

#: What the jobs below saw, per test key.
SEEN: dict[str, list[dict[str, Any]]] = {}
ELIXIR_WORKER = "MyApp.Workers.Echo"
ELIXIR_FAILING_WORKER = "MyApp.Workers.Flaky"


# -- jobs -----------------------------------------------------------------------------------------
@worker()
class Echo:
    """Stands in for an Elixir worker: registered under an Elixir module name, takes any args."""

    async def process(self, job: Job) -> None:
        SEEN.setdefault(str(job.args["key"]), []).append(
            {"id": job.id, "args": job.args, "attempt": job.attempt, "errors": job.errors}
        )


@job
async def fail(message: str) -> None:
    raise ValueError(message)


@job
async def cancel_itself(reason: str) -> Cancel:
    return Cancel(reason)


@job
async def snooze_once(seconds: float) -> Snooze | None:
    if "snoozed" not in current_job().meta:
        return Snooze(seconds)
    return None


@job
async def wait_forever(key: str) -> None:
    SEEN.setdefault(key, []).append({"started": True})
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        SEEN[key].append({"cancelled": True})
        raise


@job
def noop(n: int = 0) -> None:
    return None


# -- Elixir-shaped schemas ------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """One era of Elixir Oban's schema, as its migrations leave it."""

    version: int
    #: Ecto's {:array, :string} makes varchar(255)[]; Oban's own migrations use text[].
    tags_type: str = "text[]"

    @property
    def has_notify_trigger(self) -> bool:  # added by V01/V08, dropped by V12
        return self.version < 12

    @property
    def has_suspended(self) -> bool:  # V14 adds it before 'scheduled'
        return self.version >= 14


SHAPES = {
    # Up to V11: the insert trigger, priorities 0..3, no 'suspended'; tags as Ecto's :string arrays.
    "v11": Shape(11, tags_type="varchar(255)[]"),
    # V12 dropped the trigger, V13 added (state, cancelled_at|discarded_at) indexes, V14 'suspended'.
    "v14": Shape(14),
    # V15 adds the staging index oban_jobs_staging_idx.
    "v15": Shape(15),
}


def elixir_ddl(prefix: str, shape: Shape) -> str:
    """The objects Elixir Oban's migrations up to ``shape.version`` leave in ``prefix``."""
    p = f'"{prefix}"'
    labels = ["available", "scheduled", "executing", "retryable", "completed", "discarded", "cancelled"]
    if shape.has_suspended:
        labels.insert(1, "suspended")  # BEFORE 'scheduled', as V14 adds it
    enum = ", ".join(f"'{label}'" for label in labels)
    parts = [
        f"CREATE SCHEMA {p}",
        f"CREATE TYPE {p}.oban_job_state AS ENUM ({enum})",
        # Column order as the migrations add them: V01, then V03, V08, V09.
        f"""CREATE TABLE {p}.oban_jobs (
            id bigserial PRIMARY KEY,
            state {p}.oban_job_state NOT NULL DEFAULT 'available',
            queue text NOT NULL DEFAULT 'default',
            worker text NOT NULL,
            args jsonb NOT NULL DEFAULT '{{}}',
            errors jsonb[] NOT NULL DEFAULT '{{}}',
            attempt integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL DEFAULT 20,
            inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
            scheduled_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
            attempted_at timestamp without time zone,
            completed_at timestamp without time zone,
            attempted_by text[],
            discarded_at timestamp without time zone,
            priority integer NOT NULL DEFAULT 0,
            tags {shape.tags_type} DEFAULT '{{}}',
            meta jsonb DEFAULT '{{}}',
            cancelled_at timestamp without time zone,
            CONSTRAINT worker_length CHECK (char_length(worker) > 0 AND char_length(worker) < 128),
            CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128),
            CONSTRAINT positive_max_attempts CHECK (max_attempts > 0),
            CONSTRAINT attempt_range CHECK (attempt BETWEEN 0 AND max_attempts)
        )""",
        f"CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index "
        f"ON {p}.oban_jobs (state, queue, priority, scheduled_at, id)",
        f"CREATE INDEX oban_jobs_args_index ON {p}.oban_jobs USING gin (args)",
        f"CREATE INDEX oban_jobs_meta_index ON {p}.oban_jobs USING gin (meta)",
        f"""CREATE UNLOGGED TABLE {p}.oban_peers (
            name text PRIMARY KEY,
            node text NOT NULL,
            started_at timestamp without time zone NOT NULL,
            expires_at timestamp without time zone NOT NULL
        )""",
    ]
    if shape.version < 12:
        parts.append(
            f"ALTER TABLE {p}.oban_jobs ADD CONSTRAINT priority_range CHECK (priority BETWEEN 0 AND 3)"
        )
        parts.append(
            f"""CREATE FUNCTION {p}.oban_jobs_notify() RETURNS trigger AS $$
            BEGIN
              IF NEW.state = 'available' THEN
                PERFORM pg_notify('{prefix}.oban_insert', json_build_object('queue', NEW.queue)::text);
              END IF;
              RETURN NULL;
            END;
            $$ LANGUAGE plpgsql"""
        )
        parts.append(
            f"CREATE TRIGGER oban_notify AFTER INSERT ON {p}.oban_jobs "
            f"FOR EACH ROW EXECUTE PROCEDURE {p}.oban_jobs_notify()"
        )
    else:
        parts.append(
            f"ALTER TABLE {p}.oban_jobs ADD CONSTRAINT non_negative_priority CHECK (priority >= 0) NOT VALID"
        )
    if shape.version >= 13:
        parts.append(
            f"CREATE INDEX oban_jobs_state_cancelled_at_index ON {p}.oban_jobs (state, cancelled_at)"
        )
        parts.append(
            f"CREATE INDEX oban_jobs_state_discarded_at_index ON {p}.oban_jobs (state, discarded_at)"
        )
    if shape.version >= 15:
        parts.append(
            f"CREATE INDEX oban_jobs_staging_idx ON {p}.oban_jobs (scheduled_at, id) "
            "WHERE state IN ('scheduled', 'retryable')"
        )
    parts.append(f"COMMENT ON TABLE {p}.oban_jobs IS '{shape.version}'")
    return ";\n".join(parts) + ";"


# -- fixtures and helpers ---------------------------------------------------------------------------
@pytest.fixture(params=sorted(SHAPES))
def shape(request: pytest.FixtureRequest) -> Shape:
    return SHAPES[str(request.param)]


@pytest.fixture
def elixir_schema(dsn: str, prefix: str, shape: Shape) -> Shape:
    """An Elixir-created schema in the test's prefix (the prefix fixture drops it afterwards)."""
    execute(dsn, elixir_ddl(prefix, shape))
    return shape


@pytest.fixture
async def elixir_engine(elixir_schema: Shape, dsn: str, prefix: str) -> AsyncIterator[PostgresEngine]:
    """An engine on the Elixir schema after Conveyor installed over it."""
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=4)
    await engine.open()
    try:
        await engine.install()
        yield engine
    finally:
        await engine.close()


def query(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement.encode(), params).fetchall()


def one(dsn: str, statement: str, params: Any = None) -> Any:
    (row,) = query(dsn, statement, params)
    return row[0] if len(row) == 1 else row


def catalog(dsn: str, prefix: str) -> dict[str, Any]:
    """Everything of Elixir's that Conveyor must leave as it was: columns, constraints, indexes,
    triggers, enum labels in order, the comment."""
    table = f'"{prefix}".oban_jobs'
    return {
        "columns": query(
            dsn,
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   pg_get_expr(d.adbin, d.adrelid)
            FROM pg_attribute AS a LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """,
            (table,),
        ),
        "constraints": set(
            query(
                dsn,
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = to_regclass(%s)",
                (table,),
            )
        ),
        "indexes": set(
            query(dsn, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (prefix,))
        ),
        "triggers": {
            row[0]
            for row in query(
                dsn,
                "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal",
                (table,),
            )
        },
        "enum": [
            r[0] for r in query(dsn, f'SELECT unnest(enum_range(NULL::"{prefix}".oban_job_state))::text')
        ],
        "peers": one(dsn, "SELECT to_regclass(%s) IS NOT NULL", (f'"{prefix}".oban_peers',)),
        "comment": one(dsn, "SELECT obj_description(to_regclass(%s), 'pg_class')", (table,)),
    }


def insert_as_elixir(dsn: str, prefix: str, worker: str, args: dict[str, Any], **columns: Any) -> int:
    """A row as Elixir Oban's insert writes it: every column explicit, errors an empty jsonb[],
    attempted_by left NULL."""
    values: dict[str, Any] = {
        "state": "available",
        "queue": "default",
        "worker": worker,
        "args": json.dumps(args),
        "meta": "{}",
        "tags": [],
        "errors": [],
        "attempt": 0,
        "max_attempts": 20,
        "priority": 0,
    }
    values.update(columns)
    names = ", ".join(values)
    placeholders = ", ".join(f"%({name})s::jsonb[]" if name == "errors" else f"%({name})s" for name in values)
    statement = (
        f'INSERT INTO "{prefix}".oban_jobs ({names}, inserted_at, scheduled_at) '
        f"VALUES ({placeholders}, timezone('UTC', now()), timezone('UTC', now())) RETURNING id"
    )
    params = dict(values)
    params["errors"] = [json.dumps(e) for e in values["errors"]]
    return int(one(dsn, statement, params))


def make_app(dsn: str, prefix: str, **settings: Any) -> Conveyor:
    """``helpers.make_app`` polling faster, with the Elixir-named workers registered."""
    app = helpers.make_app(dsn, prefix, **{"poll_interval": 0.1, "stage_interval": 0.1, **settings})
    app.resolver.register(Echo, name=ELIXIR_WORKER)
    app.resolver.register(fail, name=ELIXIR_FAILING_WORKER)
    return app


async def until(
    read: Callable[[], Awaitable[Job | None]], done: Callable[[Job], bool], what: str, timeout: float = 10.0
) -> Job:
    found = await helpers.poll(read, lambda job: job is not None and done(job), timeout=timeout, what=what)
    assert found is not None
    return found


async def in_state(app: Conveyor, job_id: int, *states: JobState) -> Job:
    return await until(lambda: app.get_job(job_id), lambda j: j.state in states, f"job {job_id} in {states}")


def errors_in_sql(dsn: str, prefix: str, job_id: int) -> list[dict[str, Any]]:
    """The job's errors read as Elixir reads them: elements of a jsonb[] (1-based)."""
    rows = query(
        dsn,
        f"SELECT pg_typeof(errors)::text, array_length(errors, 1), errors[1] ->> 'error' "
        f'FROM "{prefix}".oban_jobs WHERE id = %s',
        (job_id,),
    )
    assert rows[0][0] == "jsonb[]"
    elements = query(
        dsn,
        f'SELECT e FROM "{prefix}".oban_jobs, unnest(errors) WITH ORDINALITY AS u(e, n) '
        "WHERE id = %s ORDER BY n",
        (job_id,),
    )
    assert len(elements) == (rows[0][1] or 0)
    return [row[0] for row in elements]


# -- installing -----------------------------------------------------------------------------------
def test_conveyor_install_over_an_elixir_schema_is_additive(
    elixir_schema: Shape, dsn: str, prefix: str
) -> None:
    kept = insert_as_elixir(
        dsn,
        prefix,
        ELIXIR_WORKER,
        {"key": "kept"},
        state="retryable",
        attempt=1,
        errors=[{"attempt": 1, "at": "2024-01-01T00:00:00Z", "error": "** (RuntimeError) boom"}],
    )
    before = catalog(dsn, prefix)
    runner = CliRunner()
    for _ in range(2):  # a second run changes nothing either
        result = runner.invoke(main, ["install", "--dsn", dsn, "--prefix", prefix])
        assert result.exit_code == 0, result.output
        after = catalog(dsn, prefix)
        # Elixir's columns, constraints, indexes, trigger, enum order and version comment are intact.
        assert after["columns"] == before["columns"]
        assert after["constraints"] == before["constraints"]
        assert after["indexes"] >= before["indexes"]
        assert after["triggers"] == before["triggers"]
        # Labels keep their order; only 'suspended' may be new, where Elixir has not added it yet.
        assert [label for label in after["enum"] if label != "suspended"] == [
            label for label in before["enum"] if label != "suspended"
        ]
        assert after["peers"] and after["comment"] == str(elixir_schema.version)
    assert ("oban_notify" in after["triggers"]) == elixir_schema.has_notify_trigger
    assert set(after["enum"]) == {s.value for s in JobState}
    if elixir_schema.has_suspended:
        assert after["enum"] == before["enum"]
        assert after["enum"].index("suspended") < after["enum"].index("scheduled")
    # What Conveyor adds: its own tables and the indexes Elixir lacks (no second staging index).
    names = {name for name, _ in after["indexes"]}
    assert "oban_jobs_completed_at_index" in names
    assert ("oban_jobs_staging_index" in names) == (elixir_schema.version < 15)
    assert (
        one(
            dsn,
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename IN "
            "('oban_leaders', 'oban_producers', 'conveyor_migrations')",
            (prefix,),
        )
        == 3
    )
    assert one(dsn, f'SELECT max(version) FROM "{prefix}".conveyor_migrations') == schema.LATEST_VERSION
    assert count_jobs(dsn, prefix) == 1
    assert one(dsn, f"SELECT errors[1] ->> 'error' FROM \"{prefix}\".oban_jobs WHERE id = %s", (kept,)) == (
        "** (RuntimeError) boom"
    )


async def test_engine_reads_the_errors_type(elixir_engine: PostgresEngine) -> None:
    assert elixir_engine.errors_type == "jsonb[]"


async def test_engine_reads_the_json_errors_type_where_conveyor_created_the_table(
    engine: PostgresEngine,
) -> None:
    assert engine.errors_type == "jsonb"  # the oban-py layout


async def test_install_refuses_a_table_older_than_elixir_v9(dsn: str, prefix: str) -> None:
    execute(dsn, elixir_ddl(prefix, SHAPES["v14"]))
    execute(dsn, f'ALTER TABLE "{prefix}".oban_jobs DROP COLUMN meta, DROP COLUMN cancelled_at')
    before = catalog(dsn, prefix)
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        with pytest.raises(
            SchemaError, match=r"oban_jobs lacks the columns cancelled_at, meta \(.*version 9"
        ):
            await engine.install()
        assert await engine.schema_version() is None
    finally:
        await engine.close()
    assert catalog(dsn, prefix) == before


async def test_an_unknown_errors_type_is_a_schema_error(dsn: str, prefix: str) -> None:
    execute(dsn, elixir_ddl(prefix, SHAPES["v14"]))
    execute(
        dsn,
        f'ALTER TABLE "{prefix}".oban_jobs ALTER COLUMN errors DROP DEFAULT, '
        "ALTER COLUMN errors TYPE text[] USING errors::text[]",
    )
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()  # opening still works (so does uninstalling); installing does not
    try:
        assert engine.errors_type is None
        with pytest.raises(SchemaError, match=r"oban_jobs.errors is text\[\], Conveyor reads jsonb"):
            await engine.install()
    finally:
        await engine.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        with pytest.raises(SchemaError, match=r"errors is text\[\]"):
            await schema.errors_type(conn, prefix)
        assert await schema.errors_type(conn, f"{prefix}_absent") is None


# -- working jobs ---------------------------------------------------------------------------------
async def test_errors_are_appended_as_jsonb_array_elements(
    elixir_engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    app = make_app(dsn, prefix)
    async with app:
        job_id = await app.enqueue(fail.new(message="first failure"))
        failed = await in_state(app, job_id, JobState.RETRYABLE)
        (entry,) = failed.errors
        assert set(entry) == {"attempt", "at", "error"}
        assert entry["attempt"] == 1 and "ValueError: first failure" in entry["error"]
        assert datetime.fromisoformat(entry["at"]).tzinfo is not None
        assert failed.scheduled_at > datetime.now(UTC)  # backoff
        (element,) = errors_in_sql(dsn, prefix, job_id)
        assert element == entry

        # A second failure appends a second element.
        assert await app.retry_job(job_id)
        again = await until(lambda: app.get_job(job_id), lambda j: len(j.errors) == 2, "a second error")
        assert again.state is JobState.RETRYABLE and again.attempt == 2
        assert [e["attempt"] for e in again.errors] == [1, 2]
        assert errors_in_sql(dsn, prefix, job_id) == list(again.errors)
        assert (
            one(dsn, f"SELECT errors[2] ->> 'attempt' FROM \"{prefix}\".oban_jobs WHERE id = %s", (job_id,))
            == "2"
        )


async def test_exhausted_job_is_discarded_with_its_errors(
    elixir_engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    app = make_app(dsn, prefix)
    async with app:
        job_id = await app.enqueue(fail.new(message="once only").with_options(max_attempts=1))
        discarded = await in_state(app, job_id, JobState.DISCARDED)
        assert discarded.discarded_at is not None and len(discarded.errors) == 1
        assert discarded.errors[0]["attempt"] == 1 and "ValueError: once only" in discarded.errors[0]["error"]
        assert errors_in_sql(dsn, prefix, job_id) == list(discarded.errors)
        # Retrying a discarded job gives it one more attempt, which fails (and appends) again.
        assert await app.retry_job(job_id)
        again = await until(lambda: app.get_job(job_id), lambda j: len(j.errors) == 2, "a second error")
        assert again.state is JobState.DISCARDED and again.max_attempts == 2 and again.attempt == 2


async def test_a_replace_that_leaves_no_attempt_appends_its_reason_as_an_element(
    elixir_engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    """``replace_jobs`` appends to errors like the ack does, on the column's own type."""
    unique = {"period": None, "fields": ["worker"], "replace": {"retryable": ["max_attempts"]}}
    request = noop.new().with_options(unique=unique, max_attempts=3)
    (job_id,) = await elixir_engine.insert([request])
    (claimed,) = await elixir_engine.fetch_jobs("default", 1, node="n", producer=str(uuid.uuid4()))
    assert claimed.id == job_id
    error = {"attempt": 1, "at": datetime.now(UTC).isoformat(), "error": "boom"}
    await elixir_engine.ack_jobs([Ack(job_id, 1, JobState.RETRYABLE, schedule_in=60, error=error)])
    await elixir_engine.insert([noop.new().with_options(unique=unique, max_attempts=1)])
    ended = await elixir_engine.get_job(job_id)
    assert ended is not None and ended.state is JobState.DISCARDED
    assert [e["attempt"] for e in ended.errors] == [1, 1] and "max_attempts" in ended.errors[1]["error"]
    assert datetime.fromisoformat(ended.errors[1]["at"]).tzinfo is not None
    assert errors_in_sql(dsn, prefix, job_id) == list(ended.errors)


async def test_cancel_appends_the_reason_and_cancelling_a_running_job_stops_it(
    elixir_engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    key = uuid.uuid4().hex
    app = make_app(dsn, prefix)
    async with app:
        job_id = await app.enqueue(cancel_itself.new(reason="not needed any more"))
        cancelled = await in_state(app, job_id, JobState.CANCELLED)
        assert cancelled.cancelled_at is not None
        (entry,) = cancelled.errors
        assert entry["attempt"] == 1 and "not needed any more" in entry["error"]
        assert errors_in_sql(dsn, prefix, job_id) == [entry]

        # Cancelled from outside while it runs: marked cancelled, and its node stops it.
        running = await app.enqueue(wait_forever.new(key=key))
        await until_seen(key, 1)
        assert await app.cancel_job(running)
        stopped = await in_state(app, running, JobState.CANCELLED)
        assert stopped.cancelled_at is not None and stopped.attempt == 1
        await until_seen(key, 2)
        assert SEEN[key] == [{"started": True}, {"cancelled": True}]


async def until_seen(key: str, count: int, timeout: float = 10.0) -> None:
    """Wait until the job of ``key`` has reported ``count`` things."""
    await helpers.poll(
        lambda: SEEN.get(key, []), lambda seen: len(seen) >= count, timeout=timeout, what=f"reports of {key}"
    )


async def test_snooze_gives_the_attempt_back(elixir_engine: PostgresEngine, dsn: str, prefix: str) -> None:
    app = make_app(dsn, prefix)
    async with app:
        job_id = await app.enqueue(snooze_once.new(seconds=0.2))
        done = await in_state(app, job_id, JobState.COMPLETED)
        assert done.meta["snoozed"] == 1 and done.attempt == 1 and done.errors == ()
        assert errors_in_sql(dsn, prefix, job_id) == []


async def test_rescue_and_retry(elixir_engine: PostgresEngine, dsn: str, prefix: str) -> None:
    engine = elixir_engine
    dead = str(uuid.uuid4())
    ids = await engine.insert(
        [noop.new(n=1).with_options(queue="q1", max_attempts=1), noop.new(n=2).with_options(queue="q2")]
    )
    # A row Elixir wrote with meta NULL (its column is nullable) is rescued too, and counts it.
    elixir_id = insert_as_elixir(dsn, prefix, ELIXIR_WORKER, {"key": "x"}, queue="q3", meta=None)
    for queue in ("q1", "q2", "q3"):
        (claimed,) = await engine.fetch_jobs(queue, 1, node="gone", producer=dead)
        assert claimed.attempted_by == ("gone", dead)
    await engine.record_producers(
        "conveyor",
        "gone",
        [ProducerBeat(dead, "q1", OWN_PRODUCER)],
        now=datetime.now(UTC) - timedelta(minutes=5),
    )
    result = await engine.rescue_jobs(timeout=60, backstop=3600)
    assert result.discarded == (ids[0],)
    assert result.available == (ids[1], elixir_id)
    discarded, available, elixirs = [await engine.get_job(i) for i in (*ids, elixir_id)]
    assert discarded is not None and discarded.state is JobState.DISCARDED and discarded.meta["rescued"] == 1
    assert available is not None and available.state is JobState.AVAILABLE and available.meta["rescued"] == 1
    assert elixirs is not None and elixirs.state is JobState.AVAILABLE and elixirs.meta == {"rescued": 1}
    # Why, in an element of Elixir's jsonb[] errors (not a nested array).
    for job_id, outcome in ((ids[0], "discarded: no attempts left"), (elixir_id, "rescued to run again")):
        [entry] = errors_in_sql(dsn, prefix, job_id)
        assert entry["attempt"] == 1
        assert entry["error"] == f"the node running this job (gone) stopped sending heartbeats; {outcome}"

    assert await engine.retry_jobs(JobFilter.build(ids=[ids[0]])) == [ids[0]]
    retried = await engine.get_job(ids[0])
    assert retried is not None and retried.state is JobState.AVAILABLE
    assert retried.max_attempts == 2 and retried.discarded_at is None


async def test_a_job_inserted_by_elixir_is_run(elixir_engine: PostgresEngine, dsn: str, prefix: str) -> None:
    key = uuid.uuid4().hex
    fresh = insert_as_elixir(dsn, prefix, ELIXIR_WORKER, {"key": key, "n": 1}, tags=["from-elixir"])
    # One Elixir already tried: its error is the first element, ours goes second.
    elixir_error = {"attempt": 1, "at": "2024-05-01T12:00:00.000000Z", "error": "** (RuntimeError) boom"}
    tried = insert_as_elixir(
        dsn, prefix, ELIXIR_FAILING_WORKER, {"message": "python too"}, attempt=1, errors=[elixir_error]
    )
    app = make_app(dsn, prefix)
    before = await app.get_job(fresh)
    assert before is not None and before.attempted_by == () and before.tags == ("from-elixir",)
    assert before.errors == () and before.meta == {}
    async with app:
        done = await in_state(app, fresh, JobState.COMPLETED)
        failed = await in_state(app, tried, JobState.RETRYABLE)
    assert done.attempt == 1 and done.attempted_by[0] == app.settings.node
    (seen,) = SEEN[key]
    assert seen["args"] == {"key": key, "n": 1} and seen["attempt"] == 1
    assert [e["attempt"] for e in failed.errors] == [1, 2]
    assert failed.errors[0] == elixir_error and "ValueError: python too" in failed.errors[1]["error"]
    assert errors_in_sql(dsn, prefix, tried) == list(failed.errors)
    # The tags filter reads Elixir's tags whatever their array type.
    assert [j.id for j in await app.list_jobs(tags=["from-elixir"])] == [fresh]
    await app.close()


async def test_bulk_insert_by_copy(elixir_engine: PostgresEngine, dsn: str, prefix: str) -> None:
    requests = [noop.new(n=n).with_options(tags=["bulk"]) for n in range(250)]
    ids = await elixir_engine.insert(requests)
    assert ids == sorted(ids) and len(set(ids)) == 250
    jobs = await elixir_engine.list_jobs(JobFilter.build(ids=ids[:3]))
    assert {j.tags for j in jobs} == {("bulk",)} and {j.errors for j in jobs} == {()}


async def test_an_engine_opened_before_the_table_existed_detects_it_at_the_first_ack(
    dsn: str, prefix: str
) -> None:
    early = PostgresEngine(dsn, prefix=prefix, max_connections=2)
    await early.open()
    try:
        assert early.errors_type is None
        execute(dsn, elixir_ddl(prefix, SHAPES["v14"]))
        installer = PostgresEngine(dsn, prefix=prefix, max_connections=1)
        await installer.open()
        try:
            await installer.install()
        finally:
            await installer.close()
        (job_id,) = await early.insert([fail.new(message="late")])
        (claimed,) = await early.fetch_jobs("default", 1, node="n", producer=str(uuid.uuid4()))
        error = {"attempt": 1, "at": datetime.now(UTC).isoformat(), "error": "late"}
        ack = Ack(claimed.id, claimed.attempt, JobState.RETRYABLE, schedule_in=60, error=error)
        assert await early.ack_jobs([ack]) == [job_id]
        assert early.errors_type == "jsonb[]"
        assert errors_in_sql(dsn, prefix, job_id) == [error]
    finally:
        await early.close()


async def test_job_stats_reads_failures_from_jsonb_arrays(
    elixir_engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    """Rows as Elixir Oban writes them (errors a jsonb[], times with a Z): a retrying job's failure
    is counted, the failure that discarded a job counts as discarded, and a NULL element is skipped."""
    now = datetime.now(UTC).replace(tzinfo=None)

    def at(seconds_ago: int) -> str:
        return (now - timedelta(seconds=seconds_ago)).isoformat(timespec="microseconds") + "Z"

    insert_as_elixir(
        dsn,
        prefix,
        ELIXIR_FAILING_WORKER,
        {},
        state="retryable",
        attempt=1,
        errors=[{"attempt": 1, "at": at(90), "error": "boom"}],
    )
    insert_as_elixir(
        dsn,
        prefix,
        ELIXIR_FAILING_WORKER,
        {},
        state="discarded",
        attempt=2,
        max_attempts=2,
        discarded_at=now - timedelta(seconds=30),
        errors=[
            {"attempt": 1, "at": at(150), "error": "boom"},
            {"attempt": 2, "at": at(30), "error": "boom"},
        ],
    )
    execute(
        dsn,
        f"UPDATE \"{prefix}\".oban_jobs SET errors = array_append(errors, NULL) WHERE state = 'retryable'",
    )
    stats = await elixir_engine.job_stats(StatsQuery(window=300, bucket=300))
    assert (stats.retried, stats.discarded) == (2, 1)


async def test_ack_keeps_its_primary_key_plan_on_jsonb_arrays(elixir_engine: PostgresEngine) -> None:
    """The jsonb[] variant of ack_jobs plans like the JSON one on the hot sessions."""
    engine = elixir_engine
    (job_id,) = await engine.insert([noop.new()])
    statement = engine.sql.compose("ack_jobs", append_error="append_error_array")
    statement = (
        statement.replace("%(acks)s", "$1")
        .replace("%(now)s", "$2")
        .replace("%(ended_channel)s", "$3")
        .replace("%(node)s", "$4")
    )
    records = json.dumps([{"id": job_id, "attempt": 1, "state": "retryable", "error": {"error": "x"}}])
    async with engine.hot_pool.connection() as conn:
        await conn.execute(
            f"PREPARE elixir_ack (jsonb, timestamp, text, text) AS {statement}".encode(), prepare=False
        )
        try:
            explain = sql.SQL("EXPLAIN EXECUTE elixir_ack ({}::jsonb, NULL, 'x', 'a-node')").format(
                sql.Literal(records)
            )
            cur = await conn.execute(explain, prepare=False)
            plan = "\n".join(row[0] for row in await cur.fetchall())
        finally:
            await conn.execute(b"DEALLOCATE elixir_ack", prepare=False)
    assert "Seq Scan" not in plan and "Bitmap" not in plan, plan
    assert "Index Scan using oban_jobs_pkey" in plan, plan


async def test_copy_speaks_text_to_a_table_elixir_made(elixir_engine: PostgresEngine, dsn: str) -> None:
    """Binary COPY names each column's type (``smallint``, ``text[]``, ...): on Elixir's column types
    (integer priority, varchar[] tags) the COPY path keeps the text format, in which the server
    converts each value to the column's own type."""
    (clock, binary_layout) = one(dsn, elixir_engine.sql["insert_clock"], {"now": None})
    assert clock is not None and binary_layout is False
