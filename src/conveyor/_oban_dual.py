"""Conveyor's ``@worker`` over an oban-py worker (a ``@worker`` class or a ``@job`` function, which
oban-py makes a class): the class keeps oban-py's call forms.

oban-py's classes are called ``MyJob.new({"a": 1}, priority=3)`` and ``await MyJob.enqueue({"a":
1})``: the args as one positional mapping, job options as keywords (oban-py's own ``enqueue`` calls
``cls.new(args, **options)``). Conveyor's ``@worker`` gives a class ``new(**args)``, which would
refuse both with a bare ``TypeError``. On such a class ``new`` takes either form, and ``enqueue``
(and ``enqueue_sync``) enqueue on the current Conveyor app (``conveyor.current_app``), as oban-py's
enqueue on its current ``Oban``. Over an oban-py ``@job`` function, its own form (``add.new(1, b=2)``,
bound to the function's signature) works too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from conveyor._oban_py import wrapped_function
from conveyor.definition import JobDefinition
from conveyor.errors import ValidationError
from conveyor.job import JobId
from conveyor.request import JobRequest

#: oban-py's spelling of an option, and Conveyor's.
OPTION_ALIASES = {"scheduled_in": "schedule_in"}


def oban_style_new(definition: JobDefinition, function: Callable[..., Any] | None) -> Any:
    """``new(args, /, **options)`` (oban-py's form: a positional mapping of args, job options as
    keywords) or ``new(**args)`` (Conveyor's: keywords are the args); over an oban-py ``@job``
    function (``function``) also its ``new(*args, **kwargs)``, bound to the function's signature."""
    signature = inspect.signature(function) if function is not None else None

    def new(*args: Any, **keywords: Any) -> JobRequest:
        if not args:
            return definition.new(**keywords)
        single = len(args) == 1 and (args[0] is None or isinstance(args[0], Mapping))
        if signature is not None and not single:
            try:
                bound = signature.bind(*args, **keywords)
            except TypeError as exc:
                raise ValidationError("args", args, f"do not fit {definition.name}: {exc}") from None
            bound.apply_defaults()
            return definition.template.with_args(dict(bound.arguments))
        if not single:
            raise ValidationError(
                "args",
                args[0] if len(args) == 1 else args,
                f"{definition.name}.new takes one mapping of args (oban-py's new(args, **options)) "
                "or the args as keywords",
            )
        request = definition.template.with_args(dict(args[0] or {}))
        options = {OPTION_ALIASES.get(key, key): value for key, value in keywords.items()}
        return request.with_options(**options) if options else request

    return new


def add_oban_style_methods(cls: type, definition: JobDefinition) -> None:
    """Give ``cls`` (an oban-py worker under Conveyor's ``@worker``) oban-py's ``new`` and
    ``enqueue`` call forms, enqueueing on the current Conveyor app."""
    new = oban_style_new(definition, wrapped_function(cls))

    async def enqueue(args: Mapping[str, Any] | None = None, /, conn: Any = None, **options: Any) -> JobId:
        from conveyor.current_app import current_app

        return await current_app().enqueue(new(args, **options), conn=conn)

    def enqueue_sync(args: Mapping[str, Any] | None = None, /, conn: Any = None, **options: Any) -> JobId:
        from conveyor.current_app import current_app

        return current_app().enqueue_sync(new(args, **options), conn=conn)

    cls.new = staticmethod(new)  # type: ignore[attr-defined]
    cls.enqueue = staticmethod(enqueue)  # type: ignore[attr-defined]
    cls.enqueue_sync = staticmethod(enqueue_sync)  # type: ignore[attr-defined]
