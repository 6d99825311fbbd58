"""How long finished jobs are kept: retention rules (``PruneRule``), the policy they form with the
defaults (``Retention``) and what a prune deleted (``Pruned``).

A rule names the jobs it governs (a queue, a worker, some of the final states) and how many of them
to keep: those that ended less than ``max_age`` seconds ago, and/or the newest ``max_rows``. When
several rules match a job, the most specific one governs it alone: a rule naming a worker beats one
naming a queue, which beats one naming only states; among equally specific rules the one listed
first wins. Jobs no rule matches follow the defaults (``prune_max_age``, ``prune_keep_per_queue``).
Over all of that, ``max_rows`` of the policy caps the final jobs of the whole table: beyond it the
oldest go, whatever their age or rule. Pruning only ever deletes completed, cancelled and discarded
jobs, and never a finished workflow step while steps of its workflow still wait.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from conveyor import _options as opt
from conveyor.errors import ValidationError
from conveyor.job import FINAL_STATES, JobState

#: Final states in the order they are listed and reported.
PRUNABLE_STATES = (JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED)
#: Counts end up in SQL integers.
MAX_ROWS = 2**31 - 1
#: Seconds per unit of a duration written as text ("30d", "12h", "1d12h").
DURATION_UNITS = {"w": 604_800.0, "d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")


def parse_duration(value: Any, field_name: str) -> float:
    """Seconds from a number, a ``timedelta``, or text such as ``"90"``, ``"45s"``, ``"30m"``,
    ``"12h"``, ``"7d"``, ``"2w"`` or ``"1d12h"``; never negative, at most 100 years."""
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            return opt.check_delay(field_name, float(text))
        except ValueError:
            pass  # not a plain number: units, or a mistake
        if not text or _DURATION_PART.sub("", text):
            raise ValidationError(
                field_name,
                value,
                "must be seconds or a duration such as '45s', '30m', '12h', '7d', '2w', '1d12h'",
            )
        seconds = sum(float(n) * DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(text))
        return opt.check_delay(field_name, seconds)
    return opt.check_delay(field_name, value)


def _rows(value: Any, field_name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_ROWS:
        raise ValidationError(field_name, value, f"must be an integer from {least} to {MAX_ROWS}")
    return value


def _states(value: Any) -> tuple[JobState, ...]:
    items = (value,) if isinstance(value, str) else value
    if isinstance(items, Mapping) or not isinstance(items, Iterable):
        raise ValidationError("states", value, "must be a state or a list of states")
    states: list[JobState] = []
    for item in items:
        try:
            state = JobState(item)
        except ValueError:
            state = None
        if state not in FINAL_STATES:
            raise ValidationError(
                "states",
                value,
                f"{item!r} is not a final state: pruning deletes only completed, cancelled, discarded jobs",
            )
        if state not in states:
            states.append(state)
    if not states:
        raise ValidationError("states", value, "must name at least one of completed, cancelled, discarded")
    return tuple(s for s in PRUNABLE_STATES if s in states)


@dataclass(frozen=True, slots=True)
class PruneRule:
    """Which final jobs a rule governs and how many of them are kept.

    ``queue`` and ``worker`` (None: any) and ``states`` (a final state or a list of them; default all
    three) select the jobs. ``max_age`` (seconds, a ``timedelta`` or text like ``"30d"``) keeps those
    that ended more recently; ``max_rows`` keeps the newest that many (by id). With both, a job goes
    when either says so; with neither, the rule keeps its jobs for ever (only the table-wide
    ``prune_max_rows`` still applies to them).
    """

    queue: str | None = None
    worker: str | None = None
    states: tuple[JobState, ...] = PRUNABLE_STATES
    max_age: float | None = None
    max_rows: int | None = None

    if TYPE_CHECKING:
        # What the constructor takes, for type checkers: wider than the fields, which hold what
        # __post_init__ makes of it (a state's name becomes a JobState, "30d" becomes seconds).
        def __init__(
            self,
            queue: str | None = None,
            worker: str | None = None,
            states: JobState | str | Iterable[JobState | str] = PRUNABLE_STATES,
            max_age: float | timedelta | str | None = None,
            max_rows: int | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if self.queue is not None:
            opt.check_queue(self.queue)
        if self.worker is not None and (
            not isinstance(self.worker, str) or not self.worker.strip() or "\x00" in self.worker
        ):
            raise ValidationError(
                "worker", self.worker, "must be a non-empty worker name without NUL characters"
            )
        object.__setattr__(self, "states", _states(self.states))
        if self.max_age is not None:
            object.__setattr__(self, "max_age", parse_duration(self.max_age, "max_age"))
        if self.max_rows is not None:
            _rows(self.max_rows, "max_rows", 0)

    @property
    def specificity(self) -> int:
        """Higher governs: a worker outweighs a queue, which outweighs a choice of states."""
        narrowed = self.states != PRUNABLE_STATES
        return 4 * (self.worker is not None) + 2 * (self.queue is not None) + narrowed

    def matches(self, queue: str, worker: str, state: JobState) -> bool:
        """Whether this rule covers a job of ``queue`` and ``worker`` in ``state``."""
        return (
            (self.queue is None or self.queue == queue)
            and (self.worker is None or self.worker == worker)
            and state in self.states
        )


#: The keys a rule given as a mapping may have.
RULE_KEYS = tuple(f.name for f in fields(PruneRule))


def parse_prune_rules(value: Any, field_name: str = "prune_rules") -> tuple[PruneRule, ...]:
    """Rules from ``PruneRule`` values or mappings with their keys (a config file's array of
    tables, JSON from the environment); an error names the rule's index and field, e.g.
    ``prune_rules[2].max_age``."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValidationError(field_name, value, "must be a list of rules (PruneRule values or tables)")
    rules = []
    for index, item in enumerate(value):
        where = f"{field_name}[{index}]"
        if isinstance(item, PruneRule):
            rules.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ValidationError(where, item, "must be a PruneRule or a table of its fields")
        unknown = sorted(str(key) for key in item if key not in RULE_KEYS)
        if unknown:
            raise ValidationError(
                f"{where}.{unknown[0]}", item[unknown[0]], f"unknown key; expected {', '.join(RULE_KEYS)}"
            )
        try:
            rules.append(PruneRule(**{str(k): v for k, v in item.items()}))
        except ValidationError as exc:
            raise ValidationError(f"{where}.{exc.field}", exc.value, exc.problem) from None
    check_distinct(rules, field_name)
    return tuple(rules)


def check_distinct(rules: Iterable[PruneRule], field_name: str = "prune_rules") -> None:
    """Refuse a rule that selects exactly the jobs of an earlier one: it could never govern any."""
    seen: dict[tuple[object, ...], int] = {}
    for index, rule in enumerate(rules):
        if not isinstance(rule, PruneRule):
            raise ValidationError(f"{field_name}[{index}]", rule, "must be a PruneRule")
        key = (rule.queue, rule.worker, rule.states)
        if key in seen:
            raise ValidationError(
                f"{field_name}[{index}]",
                rule,
                f"selects the same jobs as {field_name}[{seen[key]}], which governs them; merge the two",
            )
        seen[key] = index


@dataclass(frozen=True, slots=True)
class Retention:
    """The whole policy a prune applies: the rules, the default for jobs no rule matches
    (``max_age``, None for no age limit; ``keep_per_queue``), the table-wide ``max_rows``, and how
    long workflow records are kept (``workflow_records``)."""

    max_age: float | None = 86_400.0
    keep_per_queue: int | None = None
    rules: tuple[PruneRule, ...] = ()
    max_rows: int | None = None
    #: Seconds a workflow's record (how it ended, written as its steps are pruned) is kept after
    #: the workflow ended; None: kept until deleted by hand.
    workflow_records: float | None = 604_800.0
    #: The rules in precedence order: most specific first, then as listed.
    ordered: tuple[PruneRule, ...] = field(init=False, repr=False, compare=False)

    if TYPE_CHECKING:
        # What the constructor takes, for type checkers (see PruneRule's): durations as seconds, a
        # timedelta or text; the rules as PruneRule values or mappings of their fields, in any iterable.
        def __init__(
            self,
            max_age: float | timedelta | str | None = 86_400.0,
            keep_per_queue: int | None = None,
            rules: Iterable[PruneRule | Mapping[str, Any]] = (),
            max_rows: int | None = None,
            workflow_records: float | timedelta | str | None = 604_800.0,
        ) -> None: ...

    def __post_init__(self) -> None:
        if self.max_age is not None:
            object.__setattr__(self, "max_age", parse_duration(self.max_age, "max_age"))
        if self.workflow_records is not None:
            object.__setattr__(
                self, "workflow_records", parse_duration(self.workflow_records, "workflow_records")
            )
        if self.keep_per_queue is not None:
            _rows(self.keep_per_queue, "keep_per_queue", 1)
        if self.max_rows is not None:
            _rows(self.max_rows, "max_rows", 1)
        rules = parse_prune_rules(self.rules, "rules")
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "ordered", tuple(sorted(rules, key=lambda r: -r.specificity)))

    def governing(self, queue: str, worker: str, state: JobState) -> PruneRule | None:
        """The rule that governs a final job of this queue, worker and state; None: the defaults."""
        return next((rule for rule in self.ordered if rule.matches(queue, worker, state)), None)


@dataclass(frozen=True, slots=True)
class Pruned:
    """How many jobs a prune deleted (or would delete), by state."""

    completed: int = 0
    cancelled: int = 0
    discarded: int = 0

    @classmethod
    def of(cls, states: Iterable[tuple[str, int]]) -> Pruned:
        """From (state, count) pairs, as the statements report them."""
        counts = dict.fromkeys(PRUNABLE_STATES, 0)
        for state, count in states:
            counts[JobState(state)] += int(count)
        return cls(*(counts[s] for s in PRUNABLE_STATES))

    @property
    def count(self) -> int:
        """The jobs of every state."""
        return self.completed + self.cancelled + self.discarded

    def by_state(self) -> dict[str, int]:
        """The counts by state name: ``{"completed": ..., "cancelled": ..., "discarded": ...}``."""
        return {state.value: getattr(self, state.value) for state in PRUNABLE_STATES}

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.completed + other.completed,
            self.cancelled + other.cancelled,
            self.discarded + other.discarded,
        )
