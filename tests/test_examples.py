"""Every example runs as a script, in a schema of its own, and prints what its docstring promises.

Each runs in a process of its own as ``python examples/<name>`` would, forked from a server that
imported Conveyor once (``tests.forked``); the Docverse example's own test suite runs in a new
interpreter (a pytest run of its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import DSN

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_python(args: list[str], env: dict[str, str], cwd: Path, *, new_interpreter: bool = False) -> str:
    """Run ``python <args>`` with ``examples/`` importable (the Docverse example is the package
    ``docverse`` there) and only the given ``CONVEYOR_*`` variables; return its standard output.
    Forked from the server of ``tests.forked`` unless ``new_interpreter``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "PYTEST_"))}
    path = os.pathsep.join(filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")]))
    # cwd: an empty folder, with no conveyor.toml or pyproject.toml to pick settings up from.
    environ = base | env | {"PYTHONPATH": path}
    if new_interpreter:
        command = [sys.executable, *args]
        done = subprocess.run(command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)
    else:
        done = forked.run_python(args, cwd=cwd, env=environ, timeout=120)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def run_example(name: str, prefix: str, cwd: Path) -> str:
    """Run ``examples/<name>`` with the test database and ``prefix``; return its standard output."""
    return run_python([str(EXAMPLES / name)], {"CONVEYOR_DATABASE_URL": DSN, "CONVEYOR_PREFIX": prefix}, cwd)


def test_every_example_has_a_test() -> None:
    # _support.py and cli_jobs.py are modules the examples import, not examples.
    scripts = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_") and p.stem != "cli_jobs"}
    assert {f"test_{name}" for name in scripts} <= set(globals())


def test_demo_runs_on_the_default_sqlite_file(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONVEYOR_")}
    done = forked.run_python([str(EXAMPLES / "demo.py")], cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "conveyor-demo.db").exists()
    assert re.search(
        r"build_report\s+completed\s+attempts=1 result=\{'rows': 1000, 'total': 499500\}", done.stdout
    )
    assert re.search(r"flaky\s+completed\s+attempts=2 result='succeeded on attempt 2' errors=1", done.stdout)


def test_demo(prefix: str, tmp_path: Path) -> None:
    out = run_example("demo.py", prefix, tmp_path)
    assert "[mail] welcome email sent to ada@example.com" in out
    assert re.search(r"build_report\s+completed\s+attempts=1 result=\{'rows': 1000, 'total': 499500\}", out)
    assert re.search(r"flaky\s+completed\s+attempts=2 result='succeeded on attempt 2' errors=1", out)
    assert re.search(r"wait_a_bit\s+completed\s+attempts=1 snoozed=1", out)


def test_quickstart(prefix: str, tmp_path: Path) -> None:
    out = run_example("quickstart.py", prefix, tmp_path)
    assert "sending a welcome email to ada@example.com" in out
    assert re.search(r"job \d+ is completed after 1 attempt\(s\)", out)


def test_defining_jobs(prefix: str, tmp_path: Path) -> None:
    out = run_example("defining_jobs.py", prefix, tmp_path)
    assert "request: worker=__main__.resize queue=media max_attempts=3" in out
    assert "request: worker=__main__.ChargeCard queue=billing max_attempts=5" in out
    assert "ran: __main__.ping -> completed, result=None" in out
    assert "ran: __main__.resize -> completed, result='cat.png resized to 64px'" in out
    assert "ran: __main__.ChargeCard -> completed, result='charged 1200 cents on attempt 1'" in out
    assert "ran: Billing.Refund -> completed, result='refunded 300 cents'" in out
    assert "resize(...) = 'dog.png resized to 32px'" in out


def test_enqueueing(prefix: str, tmp_path: Path) -> None:
    out = run_example("enqueueing.py", prefix, tmp_path)
    assert "single: state=available queue=mail tags=['mail']" in out
    assert "bulk: 12000 ids returned in input order: True" in out
    assert out.count("scheduled: state=scheduled") == 2
    assert "scheduled_at=2099-01-01 09:00 UTC" in out
    assert "options: queue=urgent tags=['ops', 'pager'] meta={'ticket': 42} max_attempts=10" in out
    assert "ValidationError: invalid priority=12" in out
    assert "ValidationError: invalid queue='no spaces'" in out
    assert "is a naive datetime" in out
    assert "ValidationError: invalid schedule_in=-5" in out
    assert "ValidationError: invalid meta=" in out
    assert "UnknownOptionError: invalid delay=5: unknown option" in out
    assert "cannot be combined with scheduled_at" in out
    assert "ValidationError: invalid job='not a request'" in out
    assert "jobs written by the refused bulk: 0" in out


def test_enqueue_in_transaction(prefix: str, tmp_path: Path) -> None:
    out = run_example("enqueue_in_transaction.py", prefix, tmp_path)
    assert out.splitlines() == [
        "psycopg before commit: signup rows=0, jobs=0",
        "psycopg notifications before commit: []",
        "psycopg after commit: signup rows=1, jobs=1",
        """psycopg notifications after commit: ['{"queue": "mail"}']""",
        "psycopg after rollback: signup rows=0, jobs=0",
        "SQLAlchemy Session after commit: signup rows=1, jobs=1",
        "SQLAlchemy Session after an exception: signup rows=0, jobs=0",
        "psycopg async after commit: signup rows=1, jobs=1",
        "SQLAlchemy AsyncSession after commit: signup rows=1, jobs=2",
        "SQLAlchemy AsyncSession after rollback: signup rows=0, jobs=0",
    ]


def test_managing_jobs(prefix: str, tmp_path: Path) -> None:
    out = run_example("managing_jobs.py", prefix, tmp_path)
    assert "available reports: 16 (newest first: True)" in out
    assert "tagged nightly AND finance: 4" in out
    assert "pages of 5: [5, 5, 5, 1]" in out
    assert "cancelled: 4; cancelling again: 0" in out
    assert "retried: 4, now available" in out
    assert "deleted: 16; get_job of a deleted id: None" in out
    assert "cancel a running job: True" in out
    assert "long job: cancelled; short job: completed" in out
    assert "recorded result: {'slept': 0.1}" in out
    assert "no result for the cancelled job: the job recorded no result" in out
    assert re.search(r"no such job: no job with id \d+", out)


def test_outcomes(prefix: str, tmp_path: Path) -> None:
    out = run_example("outcomes.py", prefix, tmp_path)
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert re.search(r"completed\s+attempt=1 result=5$", lines["add"])
    assert re.search(r"completed\s+attempt=1 result=\{'key': 'k1', 'found': True\}$", lines["lookup"])
    assert re.search(r"completed\s+attempt=1 snoozed=2$", lines["wait_for_stock"])
    assert re.search(r"cancelled\s+attempt=1 errors=1 last='cancelled: user -1 deleted", lines["notify_user"])
    assert re.search(r"discarded\s+attempt=1 errors=1 last=\"discarded: payload '12a'", lines["import_row"])
    assert re.search(
        r"completed\s+attempt=3 result='uploaded photo.jpg on attempt 3' errors=2 "
        r"last='ConnectionError: upload of photo.jpg dropped on attempt 2'",
        lines["flaky_upload"],
    )
    assert re.search(
        r"discarded\s+attempt=2 errors=2 last='ValueError: bad configuration'", lines["always_fails"]
    )
    assert re.search(r"discarded\s+attempt=1 errors=1 last='JobTimeout: job exceeded", lines["too_slow"])


def test_process_pool(prefix: str, tmp_path: Path) -> None:
    out = run_example("process_pool.py", prefix, tmp_path)
    assert "primes below 1,000,000: 78,498" in out
    assert "primes below 2,000,000: 148,933" in out
    assert re.search(r"worker processes used: [12] \(pool of 2\); any in this process: False", out)


def test_cli_node(prefix: str, tmp_path: Path) -> None:
    out = run_example("cli_node.py", prefix, tmp_path)
    assert re.search(rf"schema '{prefix}' installed at version \d+ \(was absent\)", out)
    assert "enqueued 4 jobs for cli_jobs.make_thumbnail" in out
    assert [line for line in out.splitlines() if line.startswith("job ")] == [
        f"job {n}: photo{n}_128.jpg" for n in range(4)
    ]
    assert "node stopped on SIGTERM with exit code 0" in out


def test_asgi_app(prefix: str, tmp_path: Path) -> None:
    out = run_example("asgi_app.py", prefix, tmp_path)
    assert out.splitlines() == [
        "server: lifespan.startup.complete",
        'POST /jobs/nudge?queue=default -> 202 {"nudged":"default"}',
        "job ran: visit to /pricing",
        "job done within 5 s of the nudge (poll interval 30 s): True",
        "POST /jobs/nudge?queue=no%20spaces -> 400",
        "server: lifespan.shutdown.complete",
    ]


def test_configuration(prefix: str, tmp_path: Path) -> None:
    out = run_example("configuration.py", prefix, tmp_path)
    assert "queues         = default:10:auto, mail:5:auto, thumbnails:2:process  (file)" in out
    assert "node           = from-the-file  (file)" in out
    assert "poll_interval  = 2.0  (environment" in out
    assert "notifications  = False  (environment)" in out
    assert "shutdown_grace = 3  (argument" in out
    assert "prefix         = jobs  (argument)" in out
    assert "stage_interval = 1.0  (default)" in out
    assert "threads        = 17  (default" in out
    assert "web app queues = none  (plain Conveyor(): runs no node)" in out
    assert "refused poll_interval=0: must be greater than 0" in out
    assert "refused queues='mail:many': the limit after ':' must be an integer" in out
    assert "refused pol_interval=1.0: unknown setting (from arguments)" in out


def test_install_sql(prefix: str, tmp_path: Path) -> None:
    out = run_example("install_sql.py", prefix, tmp_path)
    installed = re.search(r"tables after install_sql: \[(.*)\]", out)
    assert installed is not None
    assert {"'oban_jobs'", "'oban_leaders'", "'oban_producers'", "'conveyor_migrations'"} <= set(
        installed.group(1).split(", ")
    )
    assert "conveyor_migrations: ['1:oban_jobs'" in out
    reported = re.search(r"app.install\(\) afterwards reports version (\d+) \(latest: (\d+)\)", out)
    assert reported is not None and reported.group(1) == reported.group(2)
    assert "tables after uninstall_sql: []" in out


@pytest.fixture(params=["postgres", "sqlite"])
def any_prefix(
    request: pytest.FixtureRequest, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The examples that run on both engines: the test database's schema, or a SQLite file (no
    schemas there: the default prefix)."""
    if request.param == "sqlite":
        monkeypatch.setattr(sys.modules[__name__], "DSN", f"sqlite:///{tmp_path / 'example.db'}")
        return "public"
    return prefix


def test_unique_jobs(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("unique_jobs.py", any_prefix, tmp_path)
    assert "first: new=True; again: conflict=True, same job=True" in out
    assert "another site: conflict=False" in out
    assert "9 webhooks for 3 accounts: 3 jobs, 6 conflicts" in out
    assert "after cancelling it, a new one: True" in out
    assert "refused: invalid unique.period=-5" in out


def test_ordered_locks(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("ordered_locks.py", any_prefix, tmp_path)
    assert "account 1: entries applied in order [0, 1, 2, 3, 4, 5]" in out
    assert "account 2: entries applied in order [0, 1, 2, 3, 4, 5]" in out


def test_fleet_limits(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("fleet_limits.py", any_prefix, tmp_path)
    assert "partner_api: local 10, global 2, rate 10/1s" in out
    assert "reports: local 10, global 1 per args.tenant, rate -" in out
    assert "reports at once per tenant: acme 1, globex 1, initech 1" in out
    match = re.search(r"25 jobs: at most (\d+) at once, at most (\d+) started in any second", out)
    assert match is not None, out
    assert int(match[1]) == 2 and 1 <= int(match[2]) <= 10


def test_retention(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("retention.py", any_prefix, tmp_path)
    assert "after 0:00:00: 2 to prune {'completed': 2, 'cancelled': 0, 'discarded': 0}" in out
    assert "after 2:00:00: 4 to prune" in out and "after 2 days, 0:00:00: 6 to prune" in out
    assert "after 31 days, 0:00:00: 8 to prune {'completed': 6, 'cancelled': 0, 'discarded': 2}" in out
    assert "pruned 6; kept 2 charge_card, 3 send_newsletter" in out


def test_workflow_pipeline(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("workflow_pipeline.py", any_prefix, tmp_path)
    assert "workflow: 9 completed" in out
    assert "fetch before renders: True" in out and "index after every render: True" in out
    assert "index: ['api', 'guide', 'install', 'intro']" in out
    assert "published: ['docs.html', 'docs.pdf']" in out
    assert "render-guide attempts: 2" in out
    assert "thumbnails: 4 completed" in out


def test_fastapi_progress(any_prefix: str, tmp_path: Path) -> None:
    out = run_example("fastapi_progress.py", any_prefix, tmp_path)
    assert out.splitlines()[:4] == [
        "POST /reports -> 202, status at /reports/<id>: True",
        "waiting: state=scheduled phase=awaiting approval",
        "result so far -> 202",
        "POST approve -> 202 {'state': 'available'}",
    ]
    assert "running: state=executing phase=render, 5 pages" in out
    assert "GET result?wait=10 -> 200 {'published': True, 'by': 'ada', 'url': '/files/report-5.pdf'}" in out
    assert "final progress: {" in out and "'phase': 'published'" in out and "'done': 5" in out
    assert re.search(r"approve a finished report -> 409: .*a finished job receives no signals", out)
    assert "unknown report -> 404" in out


def test_docverse_demo(any_prefix: str, tmp_path: Path) -> None:
    env = {"CONVEYOR_DATABASE_URL": DSN, "CONVEYOR_PREFIX": any_prefix}
    out = run_python(["-m", "docverse.demo"], env, tmp_path)
    assert out.splitlines() == [
        "POST a build of main -> 202 uploaded",
        "Location is its status URL: True",
        "statuses seen in phase order: True",
        "build: published, served at /pipelines/v/main/",
        "job: completed, phase=published, 2/2 pages",
        "GET /jobs/<id> -> 200",
        "no index.html -> 202, then failed: the upload has no index.html",
        "bad project slug -> 422; no files -> 422",
        "edition main now serves the newer build: True",
        "cleanup deleted 2 builds; first build -> 404, served build -> 200",
    ]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_docverse_tests(engine: str, tmp_path: Path) -> None:
    # The example's own suite, with its own pytest.ini; the plugin picks the engine from the variable.
    env = {"CONVEYOR_TEST_DATABASE_URL": DSN} if engine == "postgres" else {}
    args = ["-m", "pytest", str(EXAMPLES / "docverse"), "-p", "no:cacheprovider", "-q"]
    summary = run_python(args, env, tmp_path, new_interpreter=True).strip().splitlines()[-1]
    passed = re.fullmatch(r"(\d+) passed(?:, \d+ warnings?)? in .*", summary)
    assert passed is not None and int(passed[1]) >= 15, summary  # nothing failed, skipped or left out
