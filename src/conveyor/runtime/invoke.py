"""Calling a job's code: shared by every executor (loop, thread, process)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from conveyor.context import JobContext, bind, unbind
from conveyor.definition import JobDefinition
from conveyor.job import Job


def start_call(definition: JobDefinition, job: Job) -> Any:
    """Start the job's code: a function gets the args as keywords, a class instance gets the job."""
    if definition.is_class:
        return definition.target().process(job)
    return definition.target(**job.args)


async def call_async(definition: JobDefinition, context: JobContext) -> Any:
    token = bind(context)
    try:
        return await start_call(definition, context.job)
    finally:
        unbind(token)


def call_blocking(definition: JobDefinition, context: JobContext) -> Any:
    """Run the job to its end in this thread (a coroutine gets a private loop)."""
    token = bind(context)
    try:
        result = start_call(definition, context.job)
        if inspect.isawaitable(result):
            return asyncio.run(_await(result))
        return result
    finally:
        unbind(token)


async def _await(awaitable: Any) -> Any:
    return await awaitable
