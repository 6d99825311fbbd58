"""Which app ``send.enqueue(...)`` and the testing helpers use when none is passed.

In order: the app bound to the running context (``async with app:``, ``with app.as_current():``,
a job run by the app's node, the ``conveyor_app`` test fixture), then the process default that
the program set itself (``app.make_default()``). Nothing is found by import side effects or a
registry of every app created: with neither, the call fails and says how to name one.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from conveyor.errors import ConveyorError

if TYPE_CHECKING:
    from conveyor.app import Conveyor

_bound: contextvars.ContextVar[Conveyor | None] = contextvars.ContextVar("conveyor_app", default=None)
# Set only by an explicit make_default() (a web app's module, a worker's entry point).
_default: list[Conveyor | None] = [None]


class NoCurrentAppError(ConveyorError, LookupError):
    """No app is bound to the running context and none was made the process default: raised by
    ``current_app()`` and so by ``send.enqueue(...)`` without ``app=``. Its message says the three
    ways to name one."""

    def __init__(self) -> None:
        super().__init__(
            "no current Conveyor app: pass app= (send.options(app=app).enqueue(...)), run inside "
            "`async with app:` or `with app.as_current():`, or call app.make_default() once at startup"
            + _django_hint()
        )


def _django_hint() -> str:
    """In a Django project without the integration installed, what makes the app."""
    conf = sys.modules.get("django.conf")
    if conf is None or not conf.settings.configured:
        return ""
    installed = getattr(conf.settings, "INSTALLED_APPS", ())
    if "conveyor.contrib.django" in installed or "conveyor.contrib.django.apps.ConveyorConfig" in installed:
        return ""  # installed, with make_default off: the generic advice applies
    return (
        '; in a Django project, add "conveyor.contrib.django" to INSTALLED_APPS: it builds the app '
        "from settings.CONVEYOR and makes it the default"
    )


def current_app() -> Conveyor:
    """The app that ``send.enqueue(...)`` and the testing helpers use when none is passed.

    In order: the app bound to the running context (inside ``async with app:`` or
    ``with app.as_current():``, in a job run by the app's node, in a test using the ``conveyor_app``
    fixture), else the process default set with ``app.make_default()``. Raises ``NoCurrentAppError``
    when there is neither; it never creates an app. Guide: docs/guides/enqueueing.md.
    """
    found = _bound.get() or _default[0]
    if found is None:
        raise NoCurrentAppError
    return found


def bound_app() -> Conveyor | None:
    """The app bound to the running context, if any (not the process default)."""
    return _bound.get()


def bind_app(app: Conveyor | None) -> contextvars.Token[Conveyor | None]:
    return _bound.set(app)


def unbind_app(token: contextvars.Token[Conveyor | None]) -> None:
    try:
        _bound.reset(token)
    except ValueError:  # reset from another context (an app entered in one task, left in another)
        _bound.set(None)


@contextmanager
def using_app(app: Conveyor) -> Iterator[Conveyor]:
    token = bind_app(app)
    try:
        yield app
    finally:
        unbind_app(token)


def set_default_app(app: Conveyor | None) -> None:
    _default[0] = app


def default_app() -> Conveyor | None:
    return _default[0]
