"""Every CLI failure is one clear line on standard error and a non-zero exit, fast (issue 10, point 5).

What is checked is what a user sees: the exit status, the one ``Error: ...`` line, no traceback
(unless ``--debug``), the time taken, and that read-only commands leave no SQLite file behind. Each
kind of failure (a connection refused, a usage error, a bad config file, a failed import, ``--debug``)
runs at least once as a real subprocess of the installed ``conveyor`` script (``conveyor``), so its
start, standard error and exit status are the script's; the other cases of each kind run in this
process (``conveyor_inline``: the same command group, on the same path through it, without a
process's start and imports, 0.1-0.25 s of CPU each).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from conveyor import Conveyor
from tests import forked
from tests.conftest import DSN

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
#: The connection failures must be reported within this many seconds: well under the 30 s hangs this
#: guards against, with room for a loaded 2-core machine (a CLI start took 5-7 s under load 10+).
FAST = 10.0


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    seconds: float


def conveyor(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> Run:
    base = {key: value for key, value in os.environ.items() if not key.startswith("CONVEYOR_")}
    started = time.monotonic()
    done = subprocess.run(
        [CONVEYOR, *args],
        cwd=cwd,
        env=base | (env or {}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def conveyor_forked(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Run:
    """``conveyor(...)`` (with no standard input) in a process forked from the server of
    ``tests.forked``: the installed script in a process of its own, which imports the user's modules
    and exits as a new one would, without a new interpreter's imports. For commands that load a
    user's code (``start --app``), which must not stay in this process."""
    base = {key: value for key, value in os.environ.items() if not key.startswith("CONVEYOR_")}
    started = time.monotonic()
    done = forked.run_python([CONVEYOR, *args], cwd=cwd, env=base | (env or {}), timeout=60)
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def conveyor_inline(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> Run:
    """``conveyor(...)`` run inside this process: the same command group, arguments, environment
    (less $CONVEYOR_*), working directory and standard input, without the 0.3-0.5 s of CPU a
    subprocess spends importing Python, Conveyor and a driver. For tests of what a command does
    and prints; how the installed script starts, fails and exits is what ``conveyor`` checks."""
    from click.testing import CliRunner

    from conveyor.cli import main

    unset: dict[str, str | None] = {key: None for key in os.environ if key.startswith("CONVEYOR_")}
    here, path = Path.cwd(), list(sys.path)
    started = time.monotonic()
    os.chdir(cwd)
    try:
        done = CliRunner(env=unset | (env or {})).invoke(main, list(args), input=stdin, prog_name="conveyor")
    finally:
        os.chdir(here)
        sys.path[:] = path  # `start` puts the working directory first, for --import and --app
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception  # what the script would print as a traceback
    return Run(done.exit_code, done.stdout, done.stderr, time.monotonic() - started)


def cli(script: bool) -> Callable[..., Run]:
    """``conveyor`` (the installed script, in a subprocess) when ``script``, else ``conveyor_inline``."""
    return conveyor if script else conveyor_inline


def assert_one_line_error(run: Run, *fragments: str, code: int = 1) -> str:
    """The run failed with ``code``, printing one ``Error:`` line holding every fragment, no traceback."""
    assert run.code == code, (run.out, run.err)
    assert "Traceback" not in run.err + run.out
    errors = [line for line in run.err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, run.err
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def with_url(dsn: str, *, user: str | None = None, host: str | None = None, port: int | None = None,
             database: str | None = None) -> str:  # fmt: skip
    parts = urlsplit(dsn)
    netloc_user = user if user is not None else (parts.username or "")
    netloc_host = host if host is not None else (parts.hostname or "")
    netloc_port = port if port is not None else parts.port
    netloc = f"{netloc_user}@{netloc_host}" + (f":{netloc_port}" if netloc_port else "")
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


# -- PostgreSQL: wrong database, role, host, port ---------------------------------------------------

BAD_TARGETS = {
    "database": (
        with_url(DSN, database="conveyor_no_such_db"),
        'database "conveyor_no_such_db" does not exist',
    ),
    "role": (with_url(DSN, user="conveyor_no_such_role"), 'role "conveyor_no_such_role" does not exist'),
    "port": (with_url(DSN, port=1), "Connection refused"),
    "host": (with_url(DSN, host="conveyor-no-such-host.invalid"), "conveyor-no-such-host.invalid"),
}

SUBCOMMANDS = {
    "install": ["install"],
    "migrate": ["migrate"],
    "uninstall": ["uninstall", "--yes"],
    "start": ["start", "-q", "default"],
    "queues": ["queues"],
    "pause": ["pause", "default"],
    "scale": ["scale", "default", "3"],
    "jobs": ["jobs"],
    "cancel": ["cancel", "1"],
    "retry": ["retry", "1"],
    "delete": ["delete", "1"],
    "prune": ["prune", "--dry-run"],
}


@pytest.mark.parametrize("target", sorted(BAD_TARGETS))
def test_a_wrong_target_fails_fast_with_the_servers_reason(target: str, tmp_path: Path) -> None:
    url, reason = BAD_TARGETS[target]
    run = cli(target == "port")("jobs", "--dsn", url, cwd=tmp_path)
    assert_one_line_error(run, "cannot connect to the database", reason)
    assert run.seconds < FAST
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_reports_a_missing_database_in_one_line(name: str, tmp_path: Path) -> None:
    url, reason = BAD_TARGETS["database"]
    run = cli(name == "start")(*SUBCOMMANDS[name], "--dsn", url, cwd=tmp_path)
    assert_one_line_error(run, reason)
    assert run.seconds < FAST


def test_the_url_can_come_from_the_environment_too(tmp_path: Path) -> None:
    url, reason = BAD_TARGETS["role"]
    run = conveyor("queues", cwd=tmp_path, env={"CONVEYOR_DATABASE_URL": url})
    assert_one_line_error(run, reason)
    assert run.seconds < FAST


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    url, reason = BAD_TARGETS["database"]
    run = conveyor("--debug", "jobs", "--dsn", url, cwd=tmp_path)
    assert run.code != 0
    assert "Traceback" in run.err
    assert reason in run.err


# -- PostgreSQL: a schema that is not (fully) installed ---------------------------------------------


@pytest.mark.parametrize("name", ["start", "queues", "pause", "jobs", "cancel"])
def test_an_uninstalled_schema_says_to_run_install(name: str, prefix: str, tmp_path: Path) -> None:
    run = conveyor_inline(*SUBCOMMANDS[name], "--dsn", DSN, "--prefix", prefix, cwd=tmp_path)
    line = assert_one_line_error(
        run, f"the Conveyor schema in {prefix!r} is not installed: run `conveyor install --prefix {prefix}`"
    )
    assert "None" not in line and "migrate" not in line


def test_a_schema_missing_oban_tables_says_to_run_install(prefix: str, tmp_path: Path) -> None:
    assert conveyor_inline("install", "--dsn", DSN, "--prefix", prefix, cwd=tmp_path).code == 0
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{prefix}".oban_jobs'.encode())
    run = conveyor_inline("jobs", "--dsn", DSN, "--prefix", prefix, cwd=tmp_path)
    assert_one_line_error(
        run, "lacks oban_jobs", f"run `conveyor install --prefix {prefix}` to recreate them"
    )
    run = conveyor_inline("install", "--dsn", DSN, "--prefix", prefix, cwd=tmp_path)
    assert run.code == 0, run.err
    assert f"schema {prefix!r} repaired at version" in run.out
    assert conveyor_inline("jobs", "--dsn", DSN, "--prefix", prefix, cwd=tmp_path).code == 0


# -- SQLite ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["start", "queues", "pause", "jobs", "cancel", "retry", "delete", "uninstall"]
)
def test_sqlite_commands_never_create_the_default_file(name: str, tmp_path: Path) -> None:
    run = cli(name == "jobs")(*SUBCOMMANDS[name], cwd=tmp_path)
    assert_one_line_error(
        run, f"there is no SQLite database at {tmp_path / 'conveyor.db'}", "conveyor install"
    )
    assert list(tmp_path.iterdir()) == []


def test_sqlite_commands_never_create_a_named_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    run = conveyor_inline("jobs", "--dsn", url, cwd=tmp_path)
    assert_one_line_error(run, "there is no SQLite database at", f"conveyor install --dsn {url}")
    assert list(tmp_path.iterdir()) == []


def test_sqlite_install_into_a_missing_directory(tmp_path: Path) -> None:
    run = conveyor_inline("install", "--dsn", "sqlite:///missing/dir/jobs.db", cwd=tmp_path)
    assert_one_line_error(run, f"the directory {tmp_path / 'missing' / 'dir'} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_sqlite_uninstalled_and_damaged_databases(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    sqlite3.connect(tmp_path / "jobs.db").close()  # a file, but no schema in it
    run = conveyor_inline("jobs", "--dsn", url, cwd=tmp_path)
    assert_one_line_error(run, "is not installed", f"run `conveyor install --dsn {url}`")

    assert conveyor_inline("install", "--dsn", url, cwd=tmp_path).code == 0
    assert conveyor_inline("jobs", "--dsn", url, cwd=tmp_path).code == 0
    with sqlite3.connect(tmp_path / "jobs.db") as conn:
        conn.execute("DROP TABLE oban_jobs")
    run = conveyor_inline("start", "-q", "default", "--dsn", url, cwd=tmp_path)
    assert_one_line_error(run, "lacks oban_jobs", f"run `conveyor install --dsn {url}` to recreate them")
    run = conveyor_inline("install", "--dsn", url, cwd=tmp_path)
    assert run.code == 0, run.err
    assert "repaired at version" in run.out and "recreated oban_jobs" in run.out

    (tmp_path / "junk.db").write_bytes(b"this is not a database file" * 100)
    run = conveyor_inline("jobs", "--dsn", f"sqlite:///{tmp_path / 'junk.db'}", cwd=tmp_path)
    assert_one_line_error(run, "cannot read the SQLite database", "not a database")


# -- bad arguments and config files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["pause", "bad queue!"], "Invalid value for QUEUE: 'bad queue!' must be"),
        (["scale", "no spaces", "3"], "Invalid value for QUEUE"),
        (["scale", "default", "0"], "Invalid value for '[LIMIT]'"),  # optional: limits may change alone
        (["resume", "default", "--node", ""], "Invalid value for --node"),
        (["jobs", "--queue", "bad queue!"], "queue"),
        (["start", "-q", "bad queue!:3"], "queue"),
        (["start", "-q", "default", "--node", ""], "invalid node=''"),
        (["start", "-q", "default", "--poll-interval", "nan"], "poll_interval"),
        (["start", "-q", "default", "--log-level", "loud"], "--log-level"),
        (["cancel", "x"], "'x' is not a valid integer"),
        (["retry", "99999999999999999999"], "is not in the range"),
        (["delete", "0"], "is not in the range"),
        (["jobs", "--before-id", "1.5"], "is not a valid integer"),
        (["--dsn", "mysql://x/y", "jobs"], "No such option"),
        (["jobs", "--dsn", "redis://x/y"], "unsupported scheme"),
        (["install", "--prefix", "p" * 60], "at most 51 fit"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(args: list[str], fragment: str, tmp_path: Path) -> None:
    run = cli(args[0] == "pause")(*args, cwd=tmp_path, env={"CONVEYOR_DATABASE_URL": DSN})
    assert_one_line_error(run, fragment, code=2)
    assert run.seconds < FAST


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("poll_interval = \n", "is not valid TOML"),
        ('notifications = "false"\n', "must be true or false"),
        ("[conveyor.queues]\nmail = { limit = 2, workers = 4 }\n", "queues.mail.workers"),
        ("conveyor = 5\n", "[conveyor] must be a table"),
        (None, "cannot be read"),  # a directory
        (b"\xff\xfe not utf-8", "is not UTF-8"),
    ],
)
def test_bad_config_files_are_one_line_errors(
    text: str | bytes | None, fragment: str, tmp_path: Path
) -> None:
    config = tmp_path / "bad.toml"
    if text is None:
        config.mkdir()
    elif isinstance(text, bytes):
        config.write_bytes(text)
    else:
        config.write_text(text)
    run_script = isinstance(text, bytes)  # one file through the installed script
    for args in (["start", "-q", "default", "--dsn", DSN], ["install", "--dsn", DSN]):
        run = cli(run_script)(*args, "--config", str(config), cwd=tmp_path)
        assert_one_line_error(run, str(config), fragment, code=2)
    # The queue and job commands read the file named by $CONVEYOR_CONFIG (or conveyor.toml).
    run = cli(run_script)("jobs", "--dsn", DSN, cwd=tmp_path, env={"CONVEYOR_CONFIG": str(config)})
    assert_one_line_error(run, str(config), fragment, code=2)


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    run = conveyor_inline("migrate", "--config", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert_one_line_error(run, "nope.toml", "does not exist", code=2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        (None, "cannot import 'conveyor_no_such_module': ModuleNotFoundError"),
        (
            "raise RuntimeError('boom at import')\n",
            "cannot import 'broken_jobs': RuntimeError: boom at import",
        ),
        ("import sys\nsys.exit(3)\n", "cannot import 'broken_jobs': SystemExit: 3"),
    ],
)
def test_start_reports_an_import_that_fails_in_one_line(
    source: str | None, fragment: str, prefix: str, tmp_path: Path
) -> None:
    assert conveyor_inline("install", "--dsn", DSN, "--prefix", prefix, cwd=tmp_path).code == 0
    module = "conveyor_no_such_module"
    if source is not None:
        module = "broken_jobs"
        (tmp_path / "broken_jobs.py").write_text(source)
    # A module that exits at import runs in the script: it must not end the process.
    run = cli(source is not None and "exit" in source)(
        "start", "-q", "default", "--import", module, "--dsn", DSN, "--prefix", prefix, cwd=tmp_path
    )
    assert_one_line_error(run, fragment)


# -- start-up cost ----------------------------------------------------------------------------------
#: What each command may not import: a command loads only the modules it uses (``LAZY_COMMANDS`` in
#: cli/main.py), so the hundreds of ``conveyor`` processes of this suite (and a user's scripts) start
#: sooner. rich draws tables and progress bars; the app, the engines and the runtime act on a database.
NOT_IMPORTED = {
    ("--version",): ["rich", "conveyor.app", "conveyor.engine.base", "conveyor.cli.start", "psycopg"],
    ("start", "--help"): ["rich", "conveyor.cli.jobs", "conveyor.cli.bulk", "conveyor.cli.dashboard"],
    ("jobs", "--help"): ["conveyor._runtime.node", "conveyor.cli.start", "rich.syntax", "pygments"],
    # A SQLite database never loads PostgreSQL's driver and pool (a fifth of a command's start).
    ("jobs", "--dsn", "sqlite:///jobs.db"): ["psycopg", "psycopg_pool", "conveyor.engine.postgres"],
}


@pytest.mark.parametrize("args", sorted(NOT_IMPORTED))
def test_a_command_imports_only_what_it_uses(args: tuple[str, ...], tmp_path: Path) -> None:
    app = Conveyor(f"sqlite:///{tmp_path / 'jobs.db'}")  # installed for the command that reads it
    app.install_sync()
    app.close_sync()
    # The entry point as the `conveyor` script calls it, then the modules it left loaded.
    code = (
        "import sys\n"
        "from conveyor.cli import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stderr.split())
    assert "click" in loaded  # the modules were listed
    assert {name for name in NOT_IMPORTED[args] if name in loaded} == set()
