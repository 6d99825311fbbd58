"""Pieces shared by the CLI commands: database options, the app they build, output helpers."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console
from rich.table import Table

from conveyor.app import Conveyor
from conveyor.errors import ConveyorError

F = TypeVar("F", bound=Callable[..., Any])


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


def build_app(dsn: str | None, prefix: str | None) -> Conveyor:
    try:
        return Conveyor(dsn, prefix=prefix)
    except ConveyorError as exc:
        raise click.UsageError(str(exc)) from None


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
    Console().print(table)
