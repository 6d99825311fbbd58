"""What only the MySQL/MariaDB engine has: its URLs, its database as the prefix, the SQL
`conveyor install --print-sql` shows for it, how it says a role is not implemented yet, and the
named locks of a caller's session. The behaviour it shares with the other engines is in
tests/conformance (the ``mariadb`` factory)."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.address import mask, parse
from conveyor.engine.urls import engine_from_url, install_sql
from conveyor.errors import UnsupportedConnectionError, ValidationError
from conveyor.request import JobRequest
from tests.conformance import mariadb
from tests.helpers import poll


@pytest.mark.parametrize(
    "url",
    [
        "mysql://app:s3cret@db.example:3307/jobs",
        "mariadb://app:s3cret@db.example:3307/jobs",
        "mysql+asyncmy://app:s3cret@db.example:3307/jobs",
        "mariadb+pymysql://app:s3cret@db.example:3307/jobs",
    ],
)
def test_both_schemes_and_sqlalchemys_spellings_name_a_server(url: str) -> None:
    engine = engine_from_url(url, pool_size=3)
    assert isinstance(engine, MysqlEngine)
    assert (engine.address.host, engine.address.port, engine.address.user) == ("db.example", 3307, "app")
    assert engine.address.password == "s3cret" and engine.database == "jobs" and engine.max_connections == 3
    assert "s3cret" not in repr(engine) and "s3cret" not in engine.url


def test_the_prefix_names_another_database_of_the_server() -> None:
    assert MysqlEngine("mysql://root@localhost/app").database == "app"
    assert MysqlEngine("mysql://root@localhost/app", prefix="jobs_2").database == "jobs_2"
    with pytest.raises(ValidationError) as refused:
        MysqlEngine("mysql://root@localhost/app", prefix="no-dashes")
    assert refused.value.field == "prefix"


@pytest.mark.parametrize(
    "url",
    ["mysql://root@localhost", "mysql://root@localhost/", "mysql://root@localhost/a/b", "mysql://h/db?x=1"],
)
def test_a_url_must_name_one_database_and_nothing_else(url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse(url)
    assert refused.value.field == "database_url"


def test_a_password_never_shows_in_messages() -> None:
    assert mask("mysql://app:s3cret@h/db") == "mysql://app:***@h/db"
    with pytest.raises(ValidationError) as refused:
        engine_from_url("mysql://app:s3cret@h/db?ssl=1")
    assert "s3cret" not in str(refused.value)


def test_print_sql_shows_dolphins_table_in_the_chosen_database() -> None:
    sql = install_sql("mariadb://root@localhost/app", prefix="jobs")
    assert 'CREATE TABLE IF NOT EXISTS "jobs".oban_jobs' in sql
    assert "oban_peers" in sql and "conveyor_uniq_key" in sql


def test_a_callers_connection_of_another_driver_is_refused_naming_what_is_taken() -> None:
    engine = MysqlEngine("mysql://root@localhost/app")
    with pytest.raises(UnsupportedConnectionError, match="PyMySQL connection"):
        engine.insert_sync([JobRequest("w")], conn=object())


@pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))
async def test_install_creates_the_database_and_uninstall_leaves_it_empty() -> None:
    schemas: list[str] = []
    engine = mariadb.factory(schemas)
    assert isinstance(engine, MysqlEngine)
    try:
        assert (await engine.inspect_schema()).version is None
        await engine.open()
        assert await engine.install() == await engine.install()  # twice: nothing more to do
        await engine.check_schema()
        assert "nothing to apply" in await engine.migration_plan()
        await engine.uninstall()
        assert await engine.schema_version() is None
    finally:
        await engine.close()
        for name in schemas:
            mariadb.release(name)


@pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))
async def test_a_notification_committed_after_a_later_one_is_still_delivered() -> None:
    """Ids are taken at insert, rows show up at commit: a listener that has seen a higher id must
    still hand over a lower one whose transaction committed later."""
    schemas: list[str] = []
    engine = mariadb.factory(schemas)
    assert isinstance(engine, MysqlEngine)
    heard: list[dict[str, Any]] = []
    try:
        await engine.open()
        await engine.install()
        listener = await engine.listen(["insert"], lambda _, payload: heard.append(payload))
        try:
            slow = (await mariadb.caller(engine)).conn
            try:
                async with slow.cursor() as cursor:
                    await cursor.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
                    await cursor.execute(engine.files["notify"], ("insert", '{"queue": "late"}'))
                await engine.notify("insert", {"queue": "early"})
                await poll(lambda: heard, lambda h: {"queue": "early"} in h, what="the early one")
                await slow.commit()
            finally:
                slow.close()
            await poll(lambda: heard, lambda h: {"queue": "late"} in h, what="the late one")
        finally:
            await listener.stop()
    finally:
        await engine.close()
        for name in schemas:
            mariadb.release(name)


@pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))
async def test_an_insert_in_a_callers_transaction_leaves_the_callers_named_locks_held() -> None:
    """The unique keys' named locks an insert takes on a caller's session are let go once it is
    done, and those alone: a lock the application took on that session stays its own."""
    async with mariadb.installed() as engine:
        caller, other = (await mariadb.caller(engine)).conn, (await mariadb.caller(engine)).conn
        try:
            async with caller.cursor() as cursor:
                await cursor.execute("SELECT GET_LOCK('app:nightly-report', 0)")
                assert (await cursor.fetchone())[0] == 1
            once = JobRequest("tests.w", args={"n": 1}).with_options(unique={"period": None})
            job_id, _ = await engine.insert([once, JobRequest("tests.w")], conn=caller)
            await caller.commit()
            async with other.cursor() as cursor:
                await cursor.execute("SELECT GET_LOCK('app:nightly-report', 0)")
                assert (await cursor.fetchone())[0] == 0  # still the caller's
            # The key's own lock went: another session's insert of it finds the job at once.
            (again,) = await engine.insert([once], conn=other)
            assert again == job_id and again.conflict
        finally:
            caller.close()
            other.close()
