"""Which modules a node's process pool preloads, and starting the pool with them.

Used by the node, and by ``Conveyor.start`` before it connects (``_app/node_launch.py``): a worker
is a fresh interpreter that imports Conveyor and the job modules, so the sooner it starts the more
of that overlaps the node's own start.
"""

from __future__ import annotations

import importlib

from conveyor._resolver import Resolver
from conveyor._runtime.process_pool import ProcessPool
from conveyor.cron import definitions_in
from conveyor.definition import ExecutorKind
from conveyor.settings import Settings


def process_job_modules(settings: Settings, resolver: Resolver) -> list[str] | None:
    """When a node of ``settings`` will run process jobs (a queue's executor is ``process``, or a
    job it knows, by ``jobs=`` or in the modules of ``imports``, runs in a process): the modules
    those jobs live in, for the pool's processes to import while the node starts. None otherwise:
    the pool starts with the first process job."""
    modules = [importlib.import_module(module) for module in settings.imports]
    known = [*resolver.definitions(), *definitions_in(modules)]
    process_queues = {q.name for q in settings.queues if q.executor is ExecutorKind.PROCESS}
    wanted = [
        d
        for d in known
        if d.executor is ExecutorKind.PROCESS
        or (d.executor is ExecutorKind.AUTO and d.defaults.get("queue", "default") in process_queues)
    ]
    if not wanted and not process_queues:
        return None
    return [m for m in (getattr(d.target, "__module__", None) for d in wanted) if isinstance(m, str)]


async def start_process_pool(pool: ProcessPool, settings: Settings, resolver: Resolver) -> None:
    """Start ``pool``'s workers now when a node of ``settings`` runs process jobs (importing
    their modules), else arrange for them to start with the first process job."""
    process_jobs = process_job_modules(settings, resolver)
    if process_jobs is not None:
        await pool.start(preload=process_jobs)
    else:
        await pool.start_lazily()
