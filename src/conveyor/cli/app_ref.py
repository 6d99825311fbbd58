"""``conveyor start --app module:attr`` (and ``prune --app``): find the user's own ``Conveyor``, with
one clear line for each way that can go wrong (no traceback: ``conveyor --debug`` is for Conveyor's
own failures)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click
from click.core import ParameterSource

from conveyor.app import Conveyor
from conveyor.errors import one_line

#: Options that choose the database and the configuration: with ``--app`` the app chose them.
APP_CHOSEN = {"dsn": "--dsn", "prefix": "--prefix", "config_file": "--config"}


def refuse_app_chosen(reference: str, given: dict[str, str | None]) -> None:
    """Refuse ``--dsn``, ``--prefix`` or ``--config`` typed next to ``--app``: the app chose them.
    ($CONVEYOR_DATABASE_URL fills --dsn too, but the app read it already: only a typed option clashes.)"""
    context = click.get_current_context()
    for name, option in APP_CHOSEN.items():
        if given.get(name) is not None and context.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            raise click.UsageError(
                f"{option} cannot be used with --app: the app {reference} chose its database and "
                "configuration where it is built"
            )


def load_app(reference: str) -> Conveyor:
    """The ``Conveyor`` that ``module:attr`` names: the attribute itself, or what calling it (with
    no arguments) returns. ``attr`` may be dotted (``module:holder.app``)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise click.UsageError(f"--app takes MODULE:ATTRIBUTE, e.g. myapp.worker:app (got {reference!r})")
    if "" not in sys.path:
        sys.path.insert(0, "")  # find the module in the working directory, as `python -m` would
    module = _import(reference, module_name)
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise click.ClickException(
                f"--app {reference}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    if isinstance(found, Conveyor):
        return found
    if not callable(found):
        raise click.ClickException(
            f"--app {reference}: {attribute!r} is {_kind(found)}, not a Conveyor "
            "(or a function that returns one)"
        )
    try:
        made = found()
    except (Exception, SystemExit) as exc:
        raise click.ClickException(f"--app {reference}: calling {attribute}() raised {_error(exc)}") from None
    if not isinstance(made, Conveyor):
        raise click.ClickException(
            f"--app {reference}: calling {attribute}() returned {_kind(made)}, not a Conveyor"
        )
    return made


def _import(reference: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise click.ClickException(
                f"--app {reference}: no module named {missing!r} (is the working directory, or the "
                "package, importable from here?)"
            ) from None
        raise _import_failed(reference, module_name, exc) from None
    except (Exception, SystemExit) as exc:
        raise _import_failed(reference, module_name, exc) from None


def _import_failed(reference: str, module_name: str, exc: BaseException) -> click.ClickException:
    return click.ClickException(f"--app {reference}: importing {module_name!r} raised {_error(exc)}")


def _error(exc: BaseException) -> str:
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"
