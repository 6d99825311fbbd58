"""The statements a prune runs, in order, for any engine: a ``Retention`` policy turned into
batches that each select the jobs one rule governs.

Both engines run the same plan with the same budget: first every rule's age batch (most specific
rule first, the defaults last), then the count batches (each rule's ``max_rows``, the defaults'
``keep_per_queue`` queue by queue, the table's ``max_rows`` last), each deleting at most what is
left of ``limit``. Age goes first so that a count keeps the newest of the jobs young enough to
stay. A batch leaves out the jobs of the rules before it in precedence (``before``): each job is
pruned by its governing rule only. ``ranked_rules`` is the same policy for the statement that
counts what a whole prune would delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from conveyor.retention import PRUNABLE_STATES, PruneRule, Retention

ALL_STATES = tuple(s.value for s in PRUNABLE_STATES)


@dataclass(frozen=True, slots=True)
class PruneBatch:
    """One bounded statement: among final jobs in ``states`` of ``queue`` and ``worker`` (None:
    any) that no rule in ``before`` governs, delete those that ended more than ``max_age`` seconds
    ago, or (with ``keep``) all but the newest ``keep``."""

    states: Sequence[str]
    queue: str | None
    worker: str | None
    #: JSON array of the rules that take precedence: ``[{"queue", "worker", "states"}]``.
    before: str
    max_age: float | None = None
    keep: int | None = None

    def flags(self) -> dict[str, bool]:
        """One boolean parameter per final state: whether the batch selects it."""
        return {state: state in self.states for state in ALL_STATES}


def _matcher(rule: PruneRule) -> dict[str, Any]:
    return {"queue": rule.queue, "worker": rule.worker, "states": [s.value for s in rule.states]}


def _before(rules: tuple[PruneRule, ...]) -> str:
    return orjson.dumps([_matcher(r) for r in rules]).decode()


def prune_batches(retention: Retention, queues: Sequence[str] = ()) -> list[PruneBatch]:
    """Every batch of one prune pass, in the order they run; ``queues``: those that hold final
    jobs (``final_queues.sql``), needed only when the policy has a ``keep_per_queue``."""
    ordered = retention.ordered
    everyone = _before(ordered)
    by_age, by_count = [], []
    for i, rule in enumerate(ordered):
        scope = ([s.value for s in rule.states], rule.queue, rule.worker, _before(ordered[:i]))
        if rule.max_age is not None:
            by_age.append(PruneBatch(*scope, max_age=rule.max_age))
        if rule.max_rows is not None:
            by_count.append(PruneBatch(*scope, keep=rule.max_rows))
    if retention.max_age is not None:
        by_age.append(PruneBatch(ALL_STATES, None, None, everyone, max_age=retention.max_age))
    if retention.keep_per_queue is not None:
        by_count += [PruneBatch(ALL_STATES, q, None, everyone, keep=retention.keep_per_queue) for q in queues]
    if retention.max_rows is not None:
        by_count.append(PruneBatch(ALL_STATES, None, None, "[]", keep=retention.max_rows))
    return by_age + by_count


def ranked_rules(retention: Retention) -> list[dict[str, Any]]:
    """The rules in precedence order (``rank`` 0 governs first) with their limits."""
    return [
        _matcher(rule) | {"rank": rank, "max_age": rule.max_age, "max_rows": rule.max_rows}
        for rank, rule in enumerate(retention.ordered)
    ]


def cron_tick_age(retention: Retention) -> float | None:
    """How old a cron tick may get before it is forgotten: the defaults' age, at least a day (a
    younger tick may still be needed to insert each tick once); None: the policy sets no age."""
    return None if retention.max_age is None else max(retention.max_age, 86_400.0)
