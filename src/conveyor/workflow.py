"""Workflows: jobs (steps) with dependencies on each other, enqueued together.

A step is a job whose ``meta`` names its workflow and itself and lists the steps it waits for
(``workflow_id``, ``name``, ``deps``, as Oban Pro lays them out). A step with dependencies is inserted
``suspended``, a state no node fetches; once every dependency has finished the engine makes it
available (or cancels it when a dependency was cancelled, discarded or deleted, unless the step's
policy ignores that). See ``Engine.settle_steps`` for when that happens and why it happens once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor._options import check_lock_key
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.request import JobRequest
from conveyor.workflow_state import WorkflowState, WorkflowStatus

__all__ = ["Step", "Workflow", "WorkflowState", "WorkflowStatus", "step_name"]

#: The meta keys a step carries; a request's own meta must not hold them.
STEP_META = (
    "workflow_id",
    "name",
    "deps",
    "deps_ended",
    "dependents",
    "workflow_name",
    "run_if",
    "ignore_cancelled",
    "ignore_discarded",
    "ignore_deleted",
)
#: The longest step name taken (sub-workflow names are joined to their steps' with a dot).
MAX_NAME = 200
#: How a dependency may end without its dependents being cancelled, when the step's policy says so.
POLICIES = ("cancelled", "discarded", "deleted")
#: Conditions on how the dependencies ended for a step to run (else it is cancelled): some failed
#: (cancelled, discarded or deleted), some were discarded, some were cancelled. Batch callbacks.
RUN_IF = ("any_failed", "any_discarded", "any_cancelled")


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    request: JobRequest
    deps: tuple[str, ...]
    #: Which endings of a dependency do not cancel this step (see ``POLICIES``).
    ignore: frozenset[str] = frozenset()
    #: Run only if the dependencies ended so (see ``RUN_IF``); None: whenever they let it.
    run_if: str | None = None


def _check_name(name: Any, field_name: str = "name") -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise ValidationError(
            field_name, name, f"must be a printable, non-empty string of at most {MAX_NAME} characters"
        )
    return name


def _check_ignore(ignore: Any) -> frozenset[str]:
    if isinstance(ignore, str) or not isinstance(ignore, Iterable):
        raise ValidationError("ignore", ignore, f"must list some of {', '.join(POLICIES)}")
    chosen = frozenset(ignore)
    unknown = sorted(str(item) for item in chosen - set(POLICIES))
    if unknown:
        raise ValidationError(
            "ignore", sorted(map(str, chosen)), f"{unknown[0]!r} is not one of {', '.join(POLICIES)}"
        )
    return chosen


@dataclass
class Workflow:
    """A graph of named steps, enqueued atomically with ``app.enqueue_many(workflow)``.

    ``add(name, request, deps=[...])`` adds a step that runs once every step named in ``deps`` has
    finished; ``add_workflow(name, other, deps=[...])`` adds another workflow's steps as a group named
    ``name`` (its steps become ``name.step``; depending on ``name`` means depending on all of them).
    ``ignore`` (on the workflow as a default, or per step) lists the endings of a dependency that do
    not cancel the step: ``"cancelled"``, ``"discarded"``, ``"deleted"``. By default a step whose
    dependency did not complete is cancelled, and so are the steps after it.
    """

    name: str | None = None
    ignore: Iterable[str] = ()
    #: The id shared by the steps (a new UUID unless given, e.g. to add steps to a running one).
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: One unfinished workflow per lock: enqueueing this workflow while another holding the same
    #: lock has a step not yet final inserts nothing and returns that workflow's step ids (a
    #: ``WorkflowIds`` whose ``conflict`` is True). None: no lock.
    lock: str | None = None
    _steps: dict[str, Step] = field(default_factory=dict, init=False, repr=False)
    _groups: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)
    #: Names of steps stored before (``Workflow.adding_to``): dependencies may name them.
    _existing: frozenset[str] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.name is not None:
            _check_name(self.name, "workflow.name")
        if self.lock is not None:
            self.lock = check_lock_key("workflow.lock", self.lock)
        self.ignore = _check_ignore(self.ignore)
        if (
            not isinstance(self.id, str)
            or not self.id
            or len(self.id) > MAX_NAME
            or not self.id.isprintable()
        ):
            raise ValidationError("workflow.id", self.id, "must be a printable, non-empty string")

    @classmethod
    def adding_to(
        cls, workflow_id: str, existing: Iterable[str], *, name: str | None = None, ignore: Iterable[str] = ()
    ) -> Workflow:
        """A workflow that adds steps to the stored one ``workflow_id`` whose steps are named
        ``existing`` (``app.extend_workflow`` builds it): new steps may depend on those."""
        workflow = cls(name=name, id=workflow_id, ignore=ignore)
        workflow._existing = frozenset(existing)
        return workflow

    @property
    def existing(self) -> frozenset[str]:
        """Names of the stored steps this workflow adds to (empty for a new workflow)."""
        return self._existing

    def new_dependents(self) -> dict[str, list[str]]:
        """For a workflow adding to a stored one: the stored steps that new steps depend on, with
        the names of those new steps (to be added to the stored steps' ``dependents``)."""
        found: dict[str, list[str]] = {}
        for step in self._steps.values():
            for dep in self._expanded(step):
                if dep in self._existing:
                    found.setdefault(dep, []).append(step.name)
        return found

    # -- building ------------------------------------------------------------------------------
    def add(
        self,
        name: str,
        request: JobRequest,
        *,
        deps: Sequence[str] = (),
        ignore: Iterable[str] | None = None,
        run_if: str | None = None,
    ) -> Workflow:
        """Add step ``name`` running ``request`` after the steps (or groups) named in ``deps``.
        ``run_if`` (``"any_failed"``, ``"any_discarded"``, ``"any_cancelled"``) runs it only when its
        dependencies ended so, and cancels it otherwise (pair it with an ``ignore`` of those)."""
        _check_name(name)
        if name in self._steps or name in self._groups or name in self._existing:
            raise ValidationError("name", name, "is already a step of this workflow")
        if not isinstance(request, JobRequest):
            raise ValidationError(f"step {name!r}", request, "must be a JobRequest (e.g. my_job.new(...))")
        if request.unique is not None and request.unique.queueing_lock is not None:
            raise ValidationError(
                f"step {name!r}.queueing_lock",
                request.unique.queueing_lock,
                "a step cannot hold a queueing lock: give the workflow one (Workflow(lock=...))",
            )
        if request.unique is not None:
            raise ValidationError(
                f"step {name!r}.unique",
                request.unique,
                "unique jobs cannot be workflow steps: make the workflow unique (Workflow(lock=...))",
            )
        taken = sorted(key for key in STEP_META if key in request.meta)
        if taken:
            raise ValidationError(
                f"step {name!r}.meta[{taken[0]!r}]", request.meta[taken[0]], "is written by the workflow"
            )
        if isinstance(deps, str) or not isinstance(deps, Sequence):
            raise ValidationError(f"step {name!r}.deps", deps, "must be a list of step names")
        for dep in deps:
            _check_name(dep, f"step {name!r}.deps")
        chosen = self.ignore if ignore is None else _check_ignore(ignore)
        if run_if is not None and run_if not in RUN_IF:
            raise ValidationError(f"step {name!r}.run_if", run_if, f"must be one of {', '.join(RUN_IF)}")
        if run_if is not None and not deps:
            raise ValidationError(f"step {name!r}.run_if", run_if, "needs dependencies to look at")
        self._steps[name] = Step(name, request, tuple(dict.fromkeys(deps)), frozenset(chosen), run_if)
        return self

    def add_workflow(self, name: str, other: Workflow, *, deps: Sequence[str] = ()) -> Workflow:
        """Add the steps of ``other`` as group ``name``: each step ``s`` becomes ``name.s`` and also
        waits for ``deps``; a step depending on ``name`` waits for all of them."""
        _check_name(name)
        if name in self._steps or name in self._groups or name in self._existing:
            raise ValidationError("name", name, "is already a step of this workflow")
        if not isinstance(other, Workflow) or other is self:
            raise ValidationError(f"workflow {name!r}", other, "must be another Workflow")
        if not other._steps:
            raise ValidationError(f"workflow {name!r}", other.name, "has no steps")
        other.validate()
        inner = set(other._steps) | set(other._groups)
        members = []
        for step in other._steps.values():
            expanded: list[str] = []
            for dep in step.deps:
                if dep in other._groups:
                    expanded += [f"{name}.{member}" for member in other._groups[dep]]
                elif dep in inner:
                    expanded.append(f"{name}.{dep}")
            self.add(
                f"{name}.{step.name}",
                step.request,
                deps=[*expanded, *deps],
                ignore=step.ignore,
                run_if=step.run_if if expanded or deps else None,
            )
            members.append(f"{name}.{step.name}")
        self._groups[name] = tuple(members)
        return self

    # -- reading -------------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps added so far, in the order they were added."""
        return tuple(self._steps.values())

    def __len__(self) -> int:
        return len(self._steps)

    def validate(self) -> None:
        """Refuse an empty workflow, dependencies on unknown steps, and cycles."""
        if not self._steps:
            raise ValidationError("workflow", self.name or self.id, "has no steps")
        for step in self._steps.values():
            for dep in step.deps:
                if dep not in self._steps and dep not in self._groups and dep not in self._existing:
                    raise ValidationError(
                        f"step {step.name!r}.deps", list(step.deps), f"{dep!r} is not a step of this workflow"
                    )
        cycle = self._cycle()
        if cycle:
            raise ValidationError("workflow", self.name or self.id, f"has a cycle: {' -> '.join(cycle)}")

    def _expanded(self, step: Step) -> list[str]:
        names: list[str] = []
        for dep in step.deps:
            names += self._groups.get(dep, (dep,))
        return list(dict.fromkeys(names))

    def _cycle(self) -> list[str] | None:
        """A cycle among the steps, as names ending where they began, or None."""
        done: set[str] = set()
        for start in self._steps:
            if start in done:
                continue
            path: list[str] = []
            on_path: set[str] = set()
            stack: list[tuple[str, Iterator[str]]] = [(start, iter(self._expanded(self._steps[start])))]
            path.append(start)
            on_path.add(start)
            while stack:
                name, deps = stack[-1]
                dep = next(deps, None)
                if dep is None:
                    stack.pop()
                    on_path.discard(path.pop())
                    done.add(name)
                    continue
                if dep in on_path:
                    return [*path[path.index(dep) :], dep]
                if dep in done or dep not in self._steps:
                    continue
                stack.append((dep, iter(self._expanded(self._steps[dep]))))
                path.append(dep)
                on_path.add(dep)
        return None

    def requests(self) -> tuple[list[JobRequest], list[int]]:
        """The steps as requests (their meta completed), and the positions of those to insert
        suspended (the ones with dependencies). Validates first."""
        self.validate()
        requests: list[JobRequest] = []
        held: list[int] = []
        expanded = {step.name: self._expanded(step) for step in self._steps.values()}
        # Each step also lists the steps that depend on it, so the settle after it ends finds them by
        # name (an index lookup each) instead of searching the workflow's waiting steps.
        dependents: dict[str, list[str]] = {}
        for name, deps in expanded.items():
            for dep in deps:
                dependents.setdefault(dep, []).append(name)
        for position, step in enumerate(self._steps.values()):
            deps = expanded[step.name]
            meta: dict[str, Any] = {
                **step.request.meta,
                "workflow_id": self.id,
                "name": step.name,
                "deps": deps,
            }
            if self.name is not None:
                meta["workflow_name"] = self.name
            for policy in sorted(step.ignore):
                meta[f"ignore_{policy}"] = True
            if step.run_if is not None:
                meta["run_if"] = step.run_if
            if step.name in dependents:
                meta["dependents"] = dependents[step.name]
            requests.append(step.request.with_options(meta=meta))
            if deps:
                held.append(position)
        return requests, held


def step_name(job: Job) -> str | None:
    """A job's step name when it is a workflow step."""
    meta = job.meta if isinstance(job.meta, Mapping) else {}
    name = meta.get("name")
    return name if isinstance(meta.get("workflow_id"), str) and isinstance(name, str) else None
