"""Calling a job's code: shared by every executor (loop, thread, process)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from conveyor._runtime.unfit import ArgsDoNotFit
from conveyor.arguments import ArgumentError
from conveyor.context import JobContext, bind, unbind
from conveyor.definition import JobDefinition
from conveyor.job import Job


class BaseExceptionRaised(Exception):
    """Job code raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``, ``GeneratorExit``, a class of its own).

    asyncio and thread pools give those a meaning of their own (stop the loop, close a generator),
    so they are carried out of the job's code inside this ordinary error: they end the job's
    attempt, never the node. ``original`` is what was raised (also chained as ``__cause__``).
    """

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(f"{type(original).__name__}: {original}")


def start_call(definition: JobDefinition, job: Job) -> Any:
    """Start the job's code: a function gets the args as keywords, a class instance gets the job
    (a chunk worker's code gets a chunk of this one job: ``testing.process_job``, inline mode)."""
    if definition.chunk is not None:
        return (definition.target().process if definition.is_class else definition.target)([job])
    if definition.is_class:
        return definition.target().process(job)
    try:
        args = definition.call_args(job.args)
    except ArgumentError as exc:  # made for other code: the runner offers it to other nodes
        raise ArgsDoNotFit(str(exc)) from None
    return definition.target(**args)


async def call_async(definition: JobDefinition, context: JobContext) -> Any:
    token = bind(context)
    try:
        return await start_call(definition, context.job)
    except (Exception, asyncio.CancelledError):
        raise  # a CancelledError may be the runner's own (cancel, shutdown): it decides
    except BaseException as exc:
        raise BaseExceptionRaised(exc) from exc
    finally:
        unbind(token)


def call_blocking(
    definition: JobDefinition,
    context: JobContext,
    scope: Callable[[], AbstractContextManager[Any]] | None = None,
) -> Any:
    """Run the job to its end in this thread (a coroutine gets a private loop), inside ``scope``
    when the app gives one (``Conveyor(blocking_job_scope=...)``)."""
    token = bind(context)
    try:
        with nullcontext() if scope is None else scope():
            result = start_call(definition, context.job)
            if inspect.isawaitable(result):
                return asyncio.run(_await(result))
            return result
    except Exception:
        raise
    except BaseException as exc:  # CancelledError too: nothing cancels a thread's code that way
        raise BaseExceptionRaised(exc) from exc
    finally:
        unbind(token)


async def _await(awaitable: Any) -> Any:
    return await awaitable
