"""A workflow's steps drawn as a graph: columns by depth (a step sits right of all it waits for),
boxes coloured by state, arrows from each dependency, each box a link to its job.

Step names and dependencies come from job meta, which any client may have written: unknown
dependencies are left out and a cycle cannot loop the layout.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from markupsafe import Markup, escape

from conveyor.job import Job

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 160, 34, 60, 14, 10
MAX_STEPS = 400
MAX_LABEL = 22


@dataclass(frozen=True, slots=True)
class Placed:
    name: str
    job: Job
    column: int
    row: int

    @property
    def x(self) -> int:
        return PAD + self.column * (BOX_W + GAP_X)

    @property
    def y(self) -> int:
        return PAD + self.row * (BOX_H + GAP_Y)


def dependencies(job: Job) -> list[str]:
    deps = job.meta.get("deps") if isinstance(job.meta, dict) else None
    return [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []


def dependency_order(steps: Mapping[str, Job]) -> list[tuple[str, Job]]:
    """The steps in an order that runs: each after every step it waits for, ties in the order they
    were added (by job id). Steps caught in a cycle (only a foreign client could write one) come
    last, by job id. Iterative, so a chain of any length is fine."""
    waiting = {
        name: {d for d in dependencies(job) if d in steps and d != name} for name, job in steps.items()
    }
    dependents: dict[str, list[str]] = {name: [] for name in steps}
    for name, deps in waiting.items():
        for dep in deps:
            dependents[dep].append(name)
    ready = [(job.id, name) for name, job in steps.items() if not waiting[name]]
    heapq.heapify(ready)
    ordered: list[tuple[str, Job]] = []
    while ready:
        _, name = heapq.heappop(ready)
        ordered.append((name, steps[name]))
        for later in dependents[name]:
            waiting[later].discard(name)
            if not waiting[later]:
                heapq.heappush(ready, (steps[later].id, later))
    placed = {name for name, _ in ordered}
    stuck = sorted((job.id, name) for name, job in steps.items() if name not in placed)
    return ordered + [(name, steps[name]) for _, name in stuck]


def layout(steps: Mapping[str, Job]) -> list[Placed]:
    """Each step's column (its longest chain of dependencies) and row (order within the column)."""
    depth: dict[str, int] = {}

    def depth_of(name: str, seen: frozenset[str]) -> int:
        if name in depth:
            return depth[name]
        known = [d for d in dependencies(steps[name]) if d in steps and d not in seen]
        found = 1 + max((depth_of(d, seen | {name}) for d in known), default=-1)
        depth[name] = found
        return found

    for name in steps:
        depth_of(name, frozenset())
    rows: dict[int, int] = {}
    placed = []
    for name in sorted(steps, key=lambda n: (depth[n], steps[n].id)):
        column = depth[name]
        placed.append(Placed(name, steps[name], column, rows.get(column, 0)))
        rows[column] = rows.get(column, 0) + 1
    return placed


def workflow_svg(steps: Mapping[str, Job], href: Callable[[int], str]) -> Markup | None:
    """The graph, or None when there are too many steps to draw (the table still lists them)."""
    if not steps or len(steps) > MAX_STEPS:
        return None
    placed = layout(steps)
    where = {p.name: p for p in placed}
    width = PAD * 2 + (max(p.column for p in placed) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + (max(p.row for p in placed) + 1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [
        f'<svg class="workflow" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'role="img" aria-label="workflow graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
    ]
    for step in placed:
        for dep in dependencies(step.job):
            source = where.get(dep)
            if source is None or source is step:
                continue
            parts.append(
                f'<line class="edge" x1="{source.x + BOX_W}" y1="{source.y + BOX_H // 2}" '
                f'x2="{step.x}" y2="{step.y + BOX_H // 2}" marker-end="url(#arrow)"/>'
            )
    for step in placed:
        label = step.name if len(step.name) <= MAX_LABEL else step.name[: MAX_LABEL - 1] + "…"
        state = step.job.state.value
        parts.append(
            f'<a href="{escape(href(step.job.id))}" class="step state-{escape(state)}">'
            f"<title>{escape(step.name)}: {escape(state)} (job {step.job.id})</title>"
            f'<rect x="{step.x}" y="{step.y}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
            f'<text x="{step.x + 8}" y="{step.y + 14}">{escape(label)}</text>'
            f'<text class="sub" x="{step.x + 8}" y="{step.y + 28}">{escape(state)}</text></a>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
