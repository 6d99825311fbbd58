"""Pieces shared by the CLI commands: database options, the checks every command makes before it
acts (the database answers, the schema is there), the app they build, output helpers."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import sqlite3
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson
import psycopg
from psycopg_pool import PoolTimeout
from rich.console import Console
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from conveyor.app import Conveyor
from conveyor.engine._migrations import schema_problem
from conveyor.engine.postgres import dsn as postgres_dsn
from conveyor.engine.postgres import schema as postgres_schema
from conveyor.engine.postgres.connect import CONNECT_TIMEOUT, connect_once, one_line
from conveyor.engine.sqlite import schema as sqlite_schema
from conveyor.engines import default_database_url, is_sqlite_url, sqlite_path
from conveyor.errors import ConveyorError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def database_options(fn: F) -> F:
    fn = click.option(
        "--dsn",
        envvar="CONVEYOR_DATABASE_URL",
        default=None,
        help="Database URL (or $CONVEYOR_DATABASE_URL).",
    )(fn)
    fn = click.option("--prefix", default=None, help="PostgreSQL schema holding the tables.")(fn)
    return fn


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(fn)


#: The largest job id (PostgreSQL's bigint): larger ones are refused as arguments.
MAX_JOB_ID = 2**63 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaState:
    """What a command found in the database before acting."""

    #: The migration recorded last; None when Conveyor never installed there.
    version: int | None
    #: Objects the recorded migrations create that do not exist (see ``missing_objects``).
    missing: tuple[str, ...]
    #: How messages name the schema, and the options that repeat this command's target.
    where: str
    options: str

    def problem(self) -> str | None:
        return schema_problem(self.where, self.version, self.missing, self.options)


def inspect_database(
    url: str | None, prefix: str, *, create: bool = False, patience: float = 0.0
) -> SchemaState:
    """Connect once, quickly, and read the schema's state, so a command fails at once with the
    database's own reason (``database "x" does not exist``) rather than after a pool's timeout.

    ``create``: the command may create a SQLite file (install, migrate); other commands refuse a
    file that does not exist rather than leave an empty one behind. ``patience``: seconds to keep
    asking a PostgreSQL server that has no free connection slot (``connect_once``).
    """
    url = url or default_database_url()
    if is_sqlite_url(url):
        return _inspect_sqlite(url, create=create)
    dsn = postgres_dsn.check(url)
    options = "" if prefix == "public" else f" --prefix {prefix}"
    version, missing = run_blocking(_inspect_postgres(dsn, prefix, patience))
    return SchemaState(version, missing, f"the Conveyor schema in {prefix!r}", options)


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end, also when called from a running event loop (a command invoked
    from async code, as tests do): then on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1, thread_name_prefix="conveyor-cli") as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _inspect_postgres(dsn: str, prefix: str, patience: float) -> tuple[int | None, tuple[str, ...]]:
    conn = await connect_once(dsn, CONNECT_TIMEOUT, patience=patience)
    async with conn:
        version = await postgres_schema.installed_version(conn, prefix)
        missing = await postgres_schema.missing_objects(conn, prefix) if version is not None else []
    return version, tuple(name for _, name in missing)


def _inspect_sqlite(url: str, *, create: bool) -> SchemaState:
    path = sqlite_path(url)
    where, options = f"the Conveyor schema in {path}", f" --dsn {url}"
    if path == ":memory:":
        return SchemaState(None, (), where, options)
    file = Path(path).resolve()
    if not file.exists():
        if not create:
            raise ConveyorError(
                f"there is no SQLite database at {file}: run `conveyor install --dsn {url}` to create "
                "one, or pass the --dsn (or $CONVEYOR_DATABASE_URL) of the one your nodes use"
            )
        if not file.parent.is_dir():
            raise ConveyorError(
                f"cannot create the SQLite database {file}: the directory {file.parent} does not exist"
            )
        return SchemaState(None, (), where, options)
    if file.is_dir():
        raise ConveyorError(f"cannot open the SQLite database {file}: it is a directory")
    try:
        # mode=rw: never create the file (it exists; this keeps a race from leaving an empty one).
        conn = sqlite3.connect(f"{file.as_uri()}?mode=rw", uri=True, timeout=CONNECT_TIMEOUT)
        try:
            version = sqlite_schema.installed_version(conn)
            missing = sqlite_schema.missing_objects(conn) if version is not None else []
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ConveyorError(f"cannot read the SQLite database {file}: {exc}") from None
    return SchemaState(version, tuple(name for _, name in missing), where, options)


def require_schema(url: str | None, prefix: str, *, patience: float = 0.0) -> None:
    """Fail unless the database answers and holds the complete, current schema."""
    problem = inspect_database(url, prefix, patience=patience).problem()
    if problem is not None:
        raise ConveyorError(problem)


def build_app(dsn: str | None, prefix: str | None, *, config_file: str | None = None) -> Conveyor:
    """The app a command acts through, once the database and its schema were found usable."""
    try:
        app = Conveyor(dsn, prefix=prefix, config_file=config_file)
    except ConveyorError as exc:
        raise click.UsageError(str(exc)) from None
    require_schema(app.settings.database_url, app.settings.prefix)
    return app


def describe(exc: BaseException) -> str:
    """One line that tells a user what went wrong, without a traceback."""
    if isinstance(exc, ConveyorError):
        return one_line(str(exc))
    if isinstance(exc, PoolTimeout):
        return f"no database connection in time: {one_line(str(exc))}"
    if isinstance(exc, psycopg.OperationalError):
        return f"the database is unavailable: {one_line(str(exc))}"
    if isinstance(exc, psycopg.Error):
        return f"the database refused the command: {one_line(str(exc))}"
    if isinstance(exc, sqlite3.Error):
        return f"SQLite error: {one_line(str(exc))}"
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or one_line(str(exc))}{where}"
    detail = one_line(str(exc))
    return (
        f"unexpected {type(exc).__name__}{': ' + detail if detail else ''} "
        "(run `conveyor --debug ...` for the traceback)"
    )


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def print_json(value: Any) -> None:
    click.echo(orjson.dumps(_plain(value), option=orjson.OPT_INDENT_2).decode())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(cell) for cell in row))
    console = Console()
    if not console.is_terminal:  # piped or captured: whole cells, for grep and scripts
        natural = Measurement.get(console, console.options.update_width(100_000), table).maximum
        console.width = max(console.width, natural)
    console.print(table)


@contextmanager
def batch_progress(label: str, total: int | None, batch: int) -> Iterator[tuple[Progress, TaskID]]:
    """A progress bar on standard error for work of more than one batch, and its task (in a terminal
    only: piped or captured output stays clean). ``total`` None: not known in advance."""
    console = Console(stderr=True)
    large = total is None or total > batch
    progress = Progress(
        SpinnerColumn(),
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not (large and console.is_interactive),
    )
    with progress:
        yield progress, progress.add_task(label, total=total)
