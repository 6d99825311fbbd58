"""Pieces shared by the CLI commands: database options, the checks every command makes before it
acts (the database answers, the schema is there), the app they build, output helpers."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from conveyor.errors import ConveyorError, one_line

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from conveyor.app import Conveyor
    from conveyor.engine import Engine
    from conveyor.engine.base import SchemaReport

# rich (tables, progress bars), the app and the engines are imported where they are used: this
# module is loaded by every command, and ``conveyor start`` or a failing command need none of it.

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


#: Where ``schema_engine`` leaves the engine a command inspected, for ``describe`` (click's
#: ``Context.meta`` is shared by a command's context and its group's).
ENGINE_KEY = "conveyor.engine"


def schema_engine(url: str | None, prefix: str) -> Engine:
    """The engine ``url`` names, built but not opened (nothing is connected yet), and noted for
    ``describe``: its driver's errors are the ones a failed command may show."""
    from conveyor.engine.urls import engine_from_url

    engine = engine_from_url(url, prefix=prefix, pool_size=1)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[ENGINE_KEY] = engine
    return engine


def inspect_database(
    url: str | None, prefix: str, *, create: bool = False, patient: bool = False
) -> SchemaReport:
    """Connect once, quickly, and read the schema's state, so a command fails at once with the
    database's own reason (``database "x" does not exist``) rather than after a pool's timeout.

    ``create``: the command may create a SQLite file (install, migrate); other commands refuse a
    file that does not exist rather than leave an empty one behind. ``patient``: keep asking a
    PostgreSQL server that has no free connection slot, as a node's engine does.
    """
    engine = schema_engine(url, prefix)
    return run_blocking(engine.inspect_schema(create=create, patient=patient))


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end, also when called from a running event loop (a command invoked
    from async code, as tests do): then on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1, thread_name_prefix="conveyor-cli") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def require_schema(url: str | None, prefix: str, *, patient: bool = False) -> None:
    """Fail unless the database answers and holds the complete, current schema."""
    problem = inspect_database(url, prefix, patient=patient).problem()
    if problem is not None:
        raise ConveyorError(problem)


def build_app(dsn: str | None, prefix: str | None, *, config_file: str | None = None) -> Conveyor:
    """The app a command acts through, once the database and its schema were found usable."""
    from conveyor.app import Conveyor

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
    ctx = click.get_current_context(silent=True)
    engine: Engine | None = ctx.meta.get(ENGINE_KEY) if ctx is not None else None
    explained = engine.explain(exc) if engine is not None else None
    if explained is not None:
        return explained
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
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

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
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

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
