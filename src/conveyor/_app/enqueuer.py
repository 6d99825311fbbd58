"""The path of an enqueue, from the app's entry points to an engine's insert.

The ``before_enqueue`` hooks make each call's transform, read in the caller's context; then a
request list, a ``Workflow`` or a ``Batch`` goes to the engine of the calling loop, to a caller's
connection (``conn=``, or the app's ``sync_conn`` for the blocking twins: inserted right there, in
the caller's thread), or, in ``inline`` testing mode, to ``conveyor.testing.execute`` to run at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor._app.binding import EngineBinding
from conveyor._app.workflow_actions import enqueue_workflow
from conveyor.batch import Batch
from conveyor.encryption import ENCRYPTED_WORKERS, Keyring, sealed
from conveyor.errors import ConveyorError, ValidationError
from conveyor.job_ids import JobIds, WorkflowIds, job_ids
from conveyor.request import JobRequest, check_requests
from conveyor.testing.execute import run_inline, run_inline_sync
from conveyor.testing.modes import effective_mode
from conveyor.workflow import Workflow

if TYPE_CHECKING:
    from conveyor.app import Conveyor

#: Changes one request before it is inserted (see ``Conveyor.before_enqueue``).
RequestTransform = Callable[[JobRequest], JobRequest]
#: Called once per enqueue call, in the caller's context: the transform of its requests, or None.
EnqueueHook = Callable[[], RequestTransform | None]
#: What ``enqueue_many`` takes.
Enqueued = Iterable[JobRequest] | Workflow | Batch


class Enqueuer:
    """The enqueues of one app, and its hooks."""

    def __init__(self, app: Conveyor, binding: EngineBinding) -> None:
        self._app = app  # its testing mode and sync_conn, read at each call
        self._binding = binding
        self._hooks: tuple[EnqueueHook, ...] = ()
        self._keyring: Keyring | None = None

    def add_hook(self, hook: EnqueueHook) -> Callable[[], None]:
        """Add a ``before_enqueue`` hook; return the function that removes it."""
        if not callable(hook):
            raise ValidationError("hook", hook, "must be callable as hook() -> transform or None")
        self._hooks = (*self._hooks, hook)

        def remove() -> None:
            self._hooks = tuple(h for h in self._hooks if h is not hook)

        return remove

    def transform(self) -> RequestTransform | None:
        """What the enqueue hooks make of this call's requests, then the encryption of the args of
        encrypted workers (None: nothing, the common case)."""
        transforms = [transform for hook in self._hooks if (transform := hook()) is not None]
        if ENCRYPTED_WORKERS:  # last, so a hook's changes to the args are encrypted too
            transforms.append(self._encrypt)
        if not transforms:
            return None

        def chained(request: JobRequest) -> JobRequest:
            if not isinstance(request, JobRequest):
                return request  # not a request: the insert's own check names it (by its place in the stream)
            for transform in transforms:
                request = transform(request)
                if not isinstance(request, JobRequest):  # say whose it was, before the insert trips on it
                    raise ValidationError(
                        "before_enqueue", request, f"the transform {transform!r} must return a JobRequest"
                    )
            return request

        return chained

    def _encrypt(self, request: JobRequest) -> JobRequest:
        if request.worker not in ENCRYPTED_WORKERS or effective_mode(self._app.testing) == "inline":
            return request  # inline mode stores nothing: the job runs on its plain args
        if self._keyring is None:  # built on first use: an app without encrypted jobs needs no key
            self._keyring = Keyring.from_setting(self._app.settings.encryption_keys)
        return sealed(request, self._keyring)

    async def enqueue_many(
        self, requests: Enqueued, conn: Any, now: datetime | None, transform: RequestTransform | None
    ) -> JobIds:
        if isinstance(requests, Batch):
            requests = requests.workflow()
        if not isinstance(requests, Workflow):
            check_requests(requests)
        if effective_mode(self._app.testing) == "inline":
            if isinstance(requests, Workflow):
                raise ConveyorError(
                    "inline testing runs single jobs; enqueue workflows and batches in manual mode "
                    "and run them with conveyor.testing.drain_queue"
                )
            return await run_inline(self._app, list(transformed(requests, transform)))
        if isinstance(requests, Workflow):
            workflow = requests
            return await self._binding.run(
                lambda e: enqueue_workflow(e, workflow, conn=conn, now=now, transform=transform), conn
            )
        inserted = transformed(requests, transform)
        return job_ids(await self._binding.run(lambda e: e.insert(inserted, conn=conn, now=now), conn))

    def enqueue_many_sync(self, requests: Enqueued, conn: Any, now: datetime | None) -> JobIds:
        # The hooks read the caller's context here, in its thread (the call may go on elsewhere).
        transform = self.transform()
        inline = effective_mode(self._app.testing) == "inline"
        # Steps grafted onto a stored workflow need the async path (it reads the stored steps), so
        # they keep the app's own connection rather than the default one.
        grafting = isinstance(requests, Workflow) and bool(requests.existing)
        if inline and not isinstance(requests, Workflow | Batch):
            # Run here, in the caller's thread (what it sees, the job sees), or on its commit.
            requests = list(requests)
            check_requests(requests)
            return run_inline_sync(self._app, list(transformed(requests, transform)))
        sync_conn = self._app.sync_conn
        if conn is None and sync_conn is not None and not inline and not grafting:
            conn = sync_conn()
        if conn is not None and not inline:
            # A caller's synchronous connection is used right here, in the caller's thread.
            engine = self._binding.statement_engine()
            if isinstance(requests, Batch):
                requests = requests.workflow()
            if isinstance(requests, Workflow):
                if requests.existing:
                    raise ValidationError(
                        "conn", conn, "steps added to a stored workflow need the async enqueue_many"
                    )
                if requests.lock is not None:
                    raise ValidationError(
                        "conn",
                        conn,
                        f"a workflow with a lock ({requests.lock!r}) is enqueued in a transaction of its own",
                    )
                steps, hold = requests.requests()
                steps = list(transformed(steps, transform))
                ids = engine.insert_sync(steps, conn=conn, now=now, hold=hold)
                return WorkflowIds.of(ids, (step.name for step in requests.steps), requests.id)
            check_requests(requests)
            return job_ids(engine.insert_sync(transformed(requests, transform), conn=conn, now=now))
        if not inline and not isinstance(requests, Workflow | Batch):
            # Jobs alone (no steps to hold): inserted in the caller's thread, on the engine's
            # blocking connections, without the two thread switches of the portal (``binding``).
            blocking = self._binding.blocking_inserts()
            if blocking is not None:
                check_requests(requests)
                return job_ids(blocking.insert(transformed(requests, transform), now=now))
        return self._binding.call_blocking(self.enqueue_many, requests, None, now, transform)


def transformed(requests: Iterable[JobRequest], transform: RequestTransform | None) -> Iterable[JobRequest]:
    """The requests as the hooks made them: a list stays a list (the engines' quick path for small
    batches), any other iterable is transformed as the insert streams it."""
    if transform is None:
        return requests
    if isinstance(requests, list | tuple):
        return [transform(request) for request in requests]
    return map(transform, requests)
