"""Data-level compatibility with oban-py 0.7, proven against the real thing.

oban-py needs Python >= 3.12, so it lives in its own virtualenv (.venv-oban, made by
scripts/ensure-oban-venv.sh) and is driven through tests/oban_py/driver.py in subprocesses. Every test
skips when that virtualenv is missing.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from conveyor import Conveyor, JobState
from conveyor.engine.postgres import PostgresEngine
from conveyor.job import Job
from conveyor.recorded import decode_result, encode_result
from conveyor.request import JobRequest

ROOT = Path(__file__).resolve().parents[1]
OBAN_PYTHON = ROOT / ".venv-oban" / "bin" / "python"
DRIVER = Path(__file__).resolve().parent / "oban_py" / "driver.py"

pytestmark = pytest.mark.skipif(
    not OBAN_PYTHON.exists(),
    reason="oban-py is not installed: run scripts/ensure-oban-venv.sh (needs Python 3.12)",
)

ECHO = "tests.oban_py.workers.EchoWorker"
ADD = "tests.oban_py.workers.add"
QUEUE = "compat"


# -- driving oban-py -------------------------------------------------------------------------------
class ObanPy:
    """One oban-py driver subprocess: JSON events on its stdout, stderr kept for failure messages."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: Any) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []
        self._stderr = stderr

    @classmethod
    async def start(cls, command: str, options: dict[str, Any]) -> ObanPy:
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in finish()
        proc = await asyncio.create_subprocess_exec(
            str(OBAN_PYTHON),
            str(DRIVER),
            command,
            json.dumps(options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
        return cls(proc, stderr)

    def errors(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    async def event(self, name: str, timeout: float = 15.0) -> dict[str, Any]:
        """The next event called ``name`` (earlier ones are kept in ``events``).

        Fails, killing the process, on timeout or when the process exits first.
        """
        assert self.proc.stdout is not None
        while True:
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            except TimeoutError:
                await self.kill()
                pytest.fail(f"oban-py gave no {name!r} event in {timeout}s; stderr:\n{self.errors()}")
            if not line:
                await self.proc.wait()
                pytest.fail(
                    f"oban-py exited ({self.proc.returncode}) before {name!r}; stderr:\n{self.errors()}"
                )
            event: dict[str, Any] = json.loads(line)
            if event.pop("event") == name:
                return event
            self.events.append(event)

    async def send(self, value: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(value).encode() + b"\n")
        await self.proc.stdin.drain()

    async def finish(self, timeout: float = 20.0) -> dict[str, Any]:
        try:
            result = await self.event("result", timeout)
            try:
                # Closes stdin, drains stdout and reaps the process, so no pipe outlives the loop.
                await asyncio.wait_for(self.proc.communicate(), 10)
            except TimeoutError:
                await self.kill()
            assert self.proc.returncode == 0, self.errors()
            return result
        finally:
            self._stderr.close()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def oban_py(command: str, timeout: float = 20.0, **options: Any) -> dict[str, Any]:
    """Run one driver command to completion and return its result."""
    return await (await ObanPy.start(command, options)).finish(timeout)


async def conveyor_install(dsn: str, prefix: str) -> None:
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=2)
    await engine.open()
    try:
        await engine.install()
    finally:
        await engine.close()


def at(value: str | None) -> datetime | None:
    """A timestamp as oban-py reported it (ISO text; naive means UTC, as oban_jobs stores it)."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def assert_aware_utc(job: Job) -> None:
    for name in (
        "inserted_at",
        "scheduled_at",
        "attempted_at",
        "cancelled_at",
        "completed_at",
        "discarded_at",
    ):
        value = getattr(job, name)
        if value is not None:
            assert value.tzinfo is not None and value.utcoffset() == timedelta(0), (name, value)


# -- the catalog -------------------------------------------------------------------------------------
CATALOG_QUERIES = {
    "relations": """
        SELECT c.relname, c.relkind::text, c.relpersistence::text, coalesce(c.reloptions, '{}'),
               obj_description(c.oid, 'pg_class')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s ORDER BY c.relname""",
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity::text, a.attgenerated::text
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY c.relname, a.attnum""",
    "constraints": """
        SELECT c.relname, k.conname, k.contype::text, pg_get_constraintdef(k.oid)
        FROM pg_constraint k
        JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s ORDER BY c.relname, k.conname""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = %(schema)s ORDER BY tablename, indexname""",
    "sequences": """
        SELECT c.relname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmax, s.seqmin,
               s.seqcache, s.seqcycle
        FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s ORDER BY c.relname""",
    "types": """
        SELECT t.typname, t.typtype::text,
               array(SELECT e.enumlabel::text FROM pg_enum e
                     WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder)
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = %(schema)s AND t.typrelid = 0 AND t.typelem = 0 ORDER BY t.typname""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid),
               l.lanname, p.prokind::text, p.provolatile::text
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
        WHERE n.nspname = %(schema)s ORDER BY p.proname""",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND NOT t.tgisinternal ORDER BY c.relname, t.tgname""",
}


def _neutral(value: Any, schema: str) -> Any:
    """The value with the schema's name replaced, so two schemas' catalogs compare equal."""
    if isinstance(value, str):
        return value.replace(f'"{schema}".', "<prefix>.").replace(f"{schema}.", "<prefix>.")
    if isinstance(value, list | tuple):
        return tuple(_neutral(item, schema) for item in value)
    return value


def catalog(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Everything about the objects in ``schema`` that a compatible install must reproduce.

    Each row starts with the name of the object it belongs to (table, type, function).
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Only pg_catalog on the path: every other type and relation prints schema-qualified.
        conn.execute("SET search_path = pg_catalog")
        return {
            kind: [_neutral(row, schema) for row in conn.execute(query.encode(), {"schema": schema})]
            for kind, query in CATALOG_QUERIES.items()
        }


#: Oban Pro's tables (dynamic cron, dynamic queues), which Conveyor creates under Pro's names and
#: oban-py (the open-source library) does not.
PRO_TABLES = ("oban_crons", "oban_queues")


def _conveyors(name: str) -> bool:
    return name.startswith("conveyor_") or name.startswith(PRO_TABLES)


def without_conveyor(snapshot: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """The snapshot without Conveyor's own objects, all named conveyor_* (and Pro's tables, see
    PRO_TABLES): tables and what belongs to them, and its indexes on oban_jobs (unique jobs, ordered
    locks), listed under the table's name."""

    def ours(row: tuple[Any, ...]) -> bool:
        return _conveyors(row[0]) or (len(row) > 1 and isinstance(row[1], str) and _conveyors(row[1]))

    return {kind: [row for row in rows if not ours(row)] for kind, rows in snapshot.items()}


def assert_same_catalog(
    ours: dict[str, list[tuple[Any, ...]]], theirs: dict[str, list[tuple[Any, ...]]]
) -> None:
    problems = []
    for kind in CATALOG_QUERIES:
        only_ours = [row for row in ours[kind] if row not in theirs[kind]]
        only_theirs = [row for row in theirs[kind] if row not in ours[kind]]
        if only_ours or only_theirs:
            problems.append(f"{kind}:\n  only Conveyor: {only_ours}\n  only oban-py: {only_theirs}")
        elif ours[kind] != theirs[kind]:
            problems.append(f"{kind}: same rows, different order:\n  {ours[kind]}\n  {theirs[kind]}")
    assert not problems, "\n".join(problems)


@pytest.fixture
def other_prefix(dsn: str) -> Iterator[str]:
    name = f"conveyor_test_{uuid.uuid4().hex[:10]}_b"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def conveyor_app(dsn: str, prefix: str) -> AsyncIterator[Conveyor]:
    """A Conveyor app on ``prefix`` that installs nothing itself (each test decides who installs)."""
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=4)
    app = Conveyor(engine=engine)
    yield app
    await app.close()


# -- a. the schema ---------------------------------------------------------------------------------
async def test_installed_structure_equals_oban_py(dsn: str, prefix: str, other_prefix: str) -> None:
    await oban_py("install", dsn=dsn, prefix=other_prefix)
    await conveyor_install(dsn, prefix)

    ours, theirs = catalog(dsn, prefix), catalog(dsn, other_prefix)
    # Conveyor's own tables (and their indexes, sequences) are all named conveyor_*; the rest must match.
    assert {"conveyor_migrations", "conveyor_migrations_pkey"} <= {
        row[0] for row in ours["relations"] if row[0].startswith("conveyor_")
    }
    assert_same_catalog(without_conveyor(ours), theirs)

    # Spot checks of what must be there, so a broken catalog query cannot make this pass vacuously.
    relations = {row[0]: row for row in theirs["relations"]}
    assert relations["oban_leaders"][2] == "u" and relations["oban_producers"][2] == "u"
    assert relations["oban_jobs"][2] == "p" and "fillfactor=85" in relations["oban_jobs"][3]
    labels = ("available", "scheduled", "suspended", "executing", "retryable", "completed", "discarded")
    assert theirs["types"] == [("oban_job_state", "e", (*labels, "cancelled"))]
    assert [row[:3] for row in theirs["functions"]] == [
        ("oban_count_estimate", "state text, queue text", "integer")
    ]
    assert len(theirs["indexes"]) == 8 and len(theirs["constraints"]) == 8  # 5 + 3 primary keys

    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in (prefix, other_prefix):
            query = sql.SQL("SELECT {}.oban_count_estimate('available', 'default')").format(
                sql.Identifier(schema)
            )
            row = conn.execute(query).fetchone()
            assert row is not None and isinstance(row[0], int)


# -- b. oban-py installs first, runs what Conveyor enqueues ------------------------------------------
async def test_conveyor_installs_over_oban_py_and_oban_py_runs_its_jobs(
    dsn: str, prefix: str, conveyor_app: Conveyor
) -> None:
    await oban_py("install", dsn=dsn, prefix=prefix)
    before = catalog(dsn, prefix)
    assert await conveyor_app.install() >= 1
    after = catalog(dsn, prefix)
    assert_same_catalog(without_conveyor(after), before)
    assert any(row[0] == "conveyor_migrations" for row in after["relations"])

    echo_id = await conveyor_app.enqueue(
        JobRequest(
            worker=ECHO, args={"to": "ada@example.com", "n": [1, 2]}, queue=QUEUE, meta={"trace": "t-1"}
        )
    )
    add_id = await conveyor_app.enqueue(JobRequest(worker=ADD, args={"a": 2, "b": 3}, queue=QUEUE))

    result = await oban_py("run", dsn=dsn, prefix=prefix, queues=[QUEUE], ids=[echo_id, add_id])
    echo, add = result["jobs"]
    assert (echo["state"], add["state"]) == ("completed", "completed"), result
    assert echo["worker"] == ECHO and echo["errors"] == [] and echo["attempt"] == 1

    seen = await conveyor_app.get_job(echo_id)
    assert seen is not None and seen.state is JobState.COMPLETED
    assert seen.meta["trace"] == "t-1" and seen.meta["recorded"] is True
    assert decode_result(seen.meta) == {"echo": {"to": "ada@example.com", "n": [1, 2]}, "attempt": 1}
    assert seen.attempted_by == tuple(echo["attempted_by"])
    assert seen.completed_at == at(echo["completed_at"])
    assert_aware_utc(seen)
    # A plain return value is not recorded.
    added = await conveyor_app.get_job(add_id)
    assert added is not None and added.state is JobState.COMPLETED and added.meta == {}


# -- c. Conveyor installs first; each reads what the other wrote ----------------------------------------
async def test_conveyor_reads_oban_py_jobs_and_oban_py_reads_conveyor_jobs(
    dsn: str, prefix: str, conveyor_app: Conveyor
) -> None:
    await conveyor_app.install()
    # oban-py's install over Conveyor's is a no-op too (it only replaces oban_count_estimate's body).
    before = catalog(dsn, prefix)
    await oban_py("install", dsn=dsn, prefix=prefix)
    assert catalog(dsn, prefix) == before

    spec = {
        "worker": ECHO,
        "queue": QUEUE,
        "args": {"user": {"id": 7, "name": "Zoë"}, "ids": [1, 2, 3], "ratio": 0.5, "none": None},
        "meta": {"source": "oban-py", "nested": {"k": [True]}},
        "tags": ["Beta", "alpha"],
        "priority": 3,
        "max_attempts": 4,
    }
    result = await oban_py("run", dsn=dsn, prefix=prefix, queues=[QUEUE], insert=[spec])
    (theirs,) = result["jobs"]
    assert theirs["state"] == "completed", result

    job = await conveyor_app.get_job(theirs["id"])
    assert job is not None
    assert job.state is JobState.COMPLETED
    assert (job.worker, job.queue, job.priority, job.max_attempts, job.attempt) == (ECHO, QUEUE, 3, 4, 1)
    assert job.args == spec["args"]
    # The recorded value itself is decoded in test_recorded_results_from_oban_py.
    assert job.meta == {**spec["meta"], "recorded": True, "return": theirs["meta"]["return"]}
    assert job.tags == ("alpha", "beta")  # oban-py lower-cases, dedupes and sorts tags before inserting
    assert job.errors == ()
    assert job.attempted_by == tuple(theirs["attempted_by"]) and job.attempted_by[0] == "oban-py-compat"
    assert_aware_utc(job)
    for name in ("inserted_at", "scheduled_at", "attempted_at", "completed_at"):
        assert getattr(job, name) == at(theirs[name]), name
    assert job.cancelled_at is None and job.discarded_at is None
    assert abs(job.inserted_at - datetime.now(UTC)) < timedelta(minutes=1)  # truly UTC, not shifted
    assert job.inserted_at <= job.attempted_at <= job.completed_at  # type: ignore[operator]

    # oban-py's queue left its marks in the shared tables: one producer row for the queue (removed
    # again on shutdown) and the leadership lease, both under the instance name "Oban".
    (producer,) = result["producers"]
    assert (producer["name"], producer["node"], producer["queue"]) == ("Oban", "oban-py-compat", QUEUE)
    assert producer["meta"] == {"local_limit": 5, "paused": False}
    assert producer["uuid"] == theirs["attempted_by"][1]
    assert [(row["name"], row["node"]) for row in result["leaders"]] == [("Oban", "oban-py-compat")]

    # The other way round: jobs Conveyor inserts, read through oban-py's API.
    later = datetime.now(UTC).replace(microsecond=123456) + timedelta(hours=1)
    requests = [
        JobRequest(
            worker=ECHO,
            args={"x": [1, {"y": "ü"}]},
            queue="mail",
            priority=2,
            max_attempts=7,
            tags=("welcome", "vip"),
            meta={"by": "conveyor"},
        ),
        JobRequest(worker=ADD, args={"a": 1, "b": 1}, scheduled_at=later),
    ]
    ids = await conveyor_app.enqueue_many(requests)
    read = (await oban_py("get", dsn=dsn, prefix=prefix, ids=ids.tolist()))["jobs"]
    for job_id, request, found in zip(ids, requests, read, strict=True):
        ours = await conveyor_app.get_job(job_id)
        assert ours is not None and found is not None
        assert found["id"] == job_id and found["state"] == ours.state.value
        assert (found["worker"], found["queue"], found["priority"], found["max_attempts"]) == (
            request.worker,
            request.queue,
            request.priority,
            request.max_attempts,
        )
        assert found["args"] == request.args and found["meta"] == request.meta
        assert sorted(found["tags"]) == sorted(request.tags)
        assert (found["attempt"], found["errors"], found["attempted_by"]) == (0, [], [])
        assert at(found["inserted_at"]) == ours.inserted_at and at(found["scheduled_at"]) == ours.scheduled_at
    assert read[0]["state"] == "available"
    assert read[1]["state"] == "scheduled" and at(read[1]["scheduled_at"]) == later


# -- recorded results (meta "recorded"/"return", Erlang external term format) --------------------------
# erlpack cannot encode integers beyond 64 bits, so oban-py cannot record them; Conveyor can.
PLAIN_VALUES: list[Any] = [
    0,
    255,
    300,
    -7,
    2**40,
    -(2**40),
    2**64 - 1,
    0.25,
    "Zoë",
    "",
    [1, [2, "x"]],
    [],
    {},
]
# erlpack, which oban-py uses, writes these as SMALL_ATOM_EXT (tag 115, Latin-1 atoms).
ATOM_VALUES: list[Any] = [None, True, False, {"ok": True, "missing": None}]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(PLAIN_VALUES, id="plain"),
        pytest.param(ATOM_VALUES, id="atoms"),
    ],
)
async def test_recorded_results_from_oban_py(values: list[Any]) -> None:
    texts = (await oban_py("encode", values=values))["texts"]
    assert [decode_result({"recorded": True, "return": text}) for text in texts] == values


async def test_recorded_results_to_oban_py() -> None:
    values = [*PLAIN_VALUES, *ATOM_VALUES, 2**70, {"a": {"b": [1]}}]
    texts = [encode_result(value)["return"] for value in [*values, (1, "a")]]
    decoded = (await oban_py("decode", texts=texts))["values"]
    assert decoded == [*values, [1, "a"]]  # a tuple comes back as a list


# -- d. insert notifications -------------------------------------------------------------------------
async def test_conveyor_insert_wakes_oban_py_queue(dsn: str, prefix: str, conveyor_app: Conveyor) -> None:
    """With staging slowed to once a minute, only the insert notification can get the job run quickly."""
    await conveyor_app.install()
    runner = await ObanPy.start(
        "run",
        {
            "dsn": dsn,
            "prefix": prefix,
            "queues": [QUEUE],
            "stager_interval": 60.0,
            "ids_from_stdin": True,
            "timeout": 5.0,
        },
    )
    try:
        await runner.event("ready")
        job_id = await conveyor_app.enqueue(JobRequest(worker=ADD, args={"a": 4, "b": 5}, queue=QUEUE))
        await runner.send([job_id])
        result = await runner.finish()
    finally:
        await runner.kill()
    (job,) = result["jobs"]
    assert job["state"] == "completed", result
    assert result["waited"] < 4.0, result
    # What oban-py's notifier decoded from Conveyor's payload.
    assert result["observed_inserts"] == [{"queue": QUEUE}]


async def test_insert_payloads_match_oban_py(dsn: str, prefix: str, conveyor_app: Conveyor) -> None:
    await conveyor_app.install()
    channel = f"{prefix}.oban_insert"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as listener:
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

        async def heard() -> list[tuple[str, str]]:
            return [(n.channel, n.payload) async for n in listener.notifies(timeout=0.5)]

        soon = {"worker": ADD, "args": {"a": 1, "b": 2}, "queue": "payloads"}
        later = {**soon, "scheduled_in": 3600}
        await oban_py("enqueue", dsn=dsn, prefix=prefix, jobs=[soon, later])
        theirs = await heard()
        await conveyor_app.enqueue_many(
            [
                JobRequest(worker=ADD, args={"a": 1, "b": 2}, queue="payloads"),
                JobRequest(worker=ADD, args={"a": 1, "b": 2}, queue="payloads", schedule_in=3600),
            ]
        )
        ours = await heard()

    # One notification for the available job, none for the scheduled one, on the same channel.
    assert [c for c, _ in theirs] == [c for c, _ in ours] == [channel]
    # Plain JSON from both (oban-py writes '{"queue":"payloads"}', PostgreSQL's jsonb text adds a
    # space); every Oban reader parses it, so the parsed objects are what must agree.
    assert [json.loads(p) for _, p in ours] == [json.loads(p) for _, p in theirs] == [{"queue": "payloads"}]
    assert all(p.startswith("{") for _, p in theirs + ours)
