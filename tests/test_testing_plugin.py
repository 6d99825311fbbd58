"""The pytest plugin, as a user's project sees it: a test suite in a fresh directory, run by pytest
in a subprocess, using ``conveyor_app``, the marker and the helpers (SQLite, PostgreSQL and
MariaDB)."""

from __future__ import annotations

import textwrap

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.conformance import mariadb
from tests.conftest import DSN

pytest_plugins = ["pytester"]

JOBS = """
from conveyor import current_job, job

DONE: list[str] = []


@job(record=True)
async def send_welcome(email: str, name: str = "") -> str:
    DONE.append(email)
    return f"sent to {email} (job {current_job().id})"


@job()
def resize(path: str, width: int) -> None:
    DONE.append(f"{path}@{width}")
    if width <= 0:
        raise ValueError("width must be positive")
"""

TESTS = """
import pytest

from conveyor import JobState
from conveyor.testing import assert_enqueued, drain_queue, process_job, refute_enqueued

from myapp import DONE, resize, send_welcome


async def signup(email: str) -> None:
    await send_welcome.enqueue(email, name="x")


async def test_manual_mode_stores_and_drains(conveyor_app):
    await signup("ada@example.com")
    await assert_enqueued(worker=send_welcome, args={"email": "ada@example.com"})
    await refute_enqueued(worker=resize)
    assert await drain_queue() == {
        "cancelled": 0, "completed": 1, "discarded": 0, "retryable": 0, "scheduled": 0,
    }
    [job] = await conveyor_app.list_jobs()
    assert job.state is JobState.COMPLETED


@pytest.mark.conveyor(testing="inline")
async def test_inline_mode_runs_at_enqueue(conveyor_app):
    DONE.clear()
    await resize.enqueue("a.png", 10)
    assert DONE == ["a.png@10"]
    with pytest.raises(ValueError, match="positive"):
        await resize.enqueue("b.png", 0)


def test_a_plain_test_uses_the_sync_api(conveyor_app):
    resize.enqueue_sync("c.png", width=5)
    assert [job.args for job in conveyor_app.list_jobs_sync()] == [{"path": "c.png", "width": 5}]


async def test_process_job_gives_a_job_context():
    result = await process_job(send_welcome.new("bob@example.com"))
    assert result.startswith("sent to bob@example.com (job ")


async def test_each_test_starts_empty(conveyor_app):
    assert await conveyor_app.list_jobs() == []


def test_a_missing_argument_fails_at_enqueue(conveyor_app):
    with pytest.raises(Exception, match="do not fit myapp.resize: missing .*width"):
        resize.enqueue_sync("d.png")
"""


def write_project(pytester: pytest.Pytester, ini: str = "") -> None:
    pytester.makepyfile(myapp=JOBS, test_myapp=TESTS)
    pytester.makeini(
        textwrap.dedent(
            f"""
            [pytest]
            asyncio_mode = auto
            asyncio_default_fixture_loop_scope = function
            {ini}
            """
        )
    )


def test_the_plugin_on_sqlite(pytester: pytest.Pytester) -> None:
    write_project(pytester)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=6)


#: A conftest for the project that writes down the schema each test's ``conveyor_app`` used.
RECORD_SCHEMAS = """
import pytest


@pytest.fixture(autouse=True)
def record_schema(request):
    if "conveyor_app" in request.fixturenames:
        app = request.getfixturevalue("conveyor_app")
        with open("schemas.txt", "a") as out:
            out.write(app.settings.prefix + "\\n")
"""


def _key_value(url: str) -> str:
    """``url`` in libpq's key=value form."""
    return " ".join(f"{key}={value}" for key, value in conninfo_to_dict(url).items())


def run_recording_prefixes(pytester: pytest.Pytester, url: str) -> set[str]:
    """Run the project on ``url``, each test writing down the schema (or database) its app used:
    the names, one per test that asked for ``conveyor_app``, each of the fixture's own pattern."""
    write_project(pytester, f"conveyor_database_url = {url}")
    pytester.makeconftest(RECORD_SCHEMAS)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=6)
    # By name: tests running beside this one make others of the same pattern, so a before/after
    # listing of the server's schemas would see theirs.
    used = set((pytester.path / "schemas.txt").read_text().split())
    assert len(used) == 5 and all(name.startswith("conveyor_pytest_") for name in used), used
    return used


@pytest.mark.parametrize("form", ["url", "key=value"])
def test_the_plugin_on_postgres_leaves_no_schema_behind(pytester: pytest.Pytester, form: str) -> None:
    used = run_recording_prefixes(pytester, DSN if form == "url" else _key_value(DSN))
    with psycopg.connect(DSN, autocommit=True) as conn:
        left = {
            row[0]
            for row in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", [list(used)])
        }
    assert left == set()


@pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")
def test_the_plugin_on_mariadb_leaves_no_database_behind(pytester: pytest.Pytester) -> None:
    used = run_recording_prefixes(pytester, mariadb.URL)  # a database of the server per test
    assert mariadb.existing(used) == set()


def test_the_fixture_is_opt_in(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_nothing():\n    assert True\n")
    result = pytester.runpytest_subprocess("-q", "--fixtures")
    assert "conveyor_app" in result.stdout.str()
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)
