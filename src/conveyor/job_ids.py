"""The ids ``enqueue_many`` returns: ``JobIds``, a compact immutable sequence of ``JobId`` values,
and ``JobIdsBuilder``, which the engines fill chunk by chunk."""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, SupportsIndex, overload

from conveyor.job import ExistingJobId, JobId


class JobIds(Sequence[JobId]):
    """The ids ``enqueue_many`` returns, in input order: an immutable sequence of ``JobId`` values,
    stored compactly (8 bytes an id, in an ``array('q')``, plus one bit a position that marks the
    conflicts, allocated only when there is one), so a million ids take 8 MB rather than 54 MB.

    ``ids[i]`` builds the ``JobId`` (or ``ExistingJobId``, for a unique request that matched a
    stored job) on access; a slice is a ``JobIds`` again. It compares equal to a list or a tuple
    holding the same ints (``ids == [1, 2, 3]``), as a list of ``JobId`` values does, and
    concatenates with ``+`` (a ``JobIds``, list or tuple) into a new ``JobIds``. Like a list, and
    unlike a tuple, it is not hashable. ``tolist()`` gives the ids as plain ints, for a JSON encoder;
    a ``JobIds`` also goes into job args as it is (stored as a list of ints), and into a psycopg
    query as a ``bigint[]`` (``_psycopg_ids``), or asyncpg's, SQLAlchemy's or sqlite3's parameters
    as a sequence of ints.

    ``JobIds(iterable)`` takes ints; each ``ExistingJobId`` among them is kept as a conflict."""

    __slots__ = ("_conflicts", "_ids")

    _ids: array[int]
    #: Bit ``i % 8`` of byte ``i // 8`` set: position ``i`` is a conflict. None: there is none. It
    #: may be shorter than the ids (the positions past its end are no conflicts).
    _conflicts: bytearray | None

    def __init__(self, ids: Iterable[int] = ()) -> None:
        builder = JobIdsBuilder()
        builder.extend(ids)
        self._ids, self._conflicts = builder.parts()
        if not _adapted:
            _adapt()

    @classmethod
    def _adopt(cls, ids: array[int], conflicts: bytearray | None) -> JobIds:
        """A ``JobIds`` over these parts as they are (no copy): nobody else may change them."""
        made = cls.__new__(cls)
        made._ids = ids
        made._conflicts = conflicts
        if not _adapted:
            _adapt()
        return made

    @classmethod
    def one(cls, value: int, *, existing: bool = False) -> JobIds:
        """The ids of a single-job insert: ``value``, a conflict when ``existing`` (the call a web
        request makes, built without the builder's checks)."""
        return cls._adopt(array("q", (value,)), bytearray(b"\x01") if existing else None)

    def _conflict(self, position: int) -> bool:
        bits = self._conflicts
        return (
            bits is not None
            and (position >> 3) < len(bits)
            and bool(bits[position >> 3] >> (position & 7) & 1)
        )

    def tolist(self) -> list[int]:
        """The ids as plain ints (no ``JobId`` values), in a new list."""
        return self._ids.tolist()

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: SupportsIndex) -> JobId: ...

    @overload
    def __getitem__(self, index: slice) -> JobIds: ...

    def __getitem__(self, index: SupportsIndex | slice) -> JobId | JobIds:
        if isinstance(index, slice):
            ids = self._ids[index]
            if self._conflicts is None:
                return JobIds._adopt(ids, None)
            positions = range(*index.indices(len(self._ids)))
            bits = None
            for kept, position in enumerate(positions):
                if self._conflict(position):
                    bits = _set_bit(bytearray() if bits is None else bits, kept)
            return JobIds._adopt(ids, bits)
        position = operator.index(index)
        if position < 0:
            position += len(self._ids)
        if not 0 <= position < len(self._ids):
            raise IndexError("JobIds index out of range")
        value = self._ids[position]
        return ExistingJobId(value) if self._conflict(position) else JobId(value)

    def __iter__(self) -> Iterator[JobId]:
        if self._conflicts is None:
            return map(JobId, self._ids)
        return self._each(range(len(self._ids)))

    def __reversed__(self) -> Iterator[JobId]:
        if self._conflicts is None:
            return map(JobId, reversed(self._ids))
        return self._each(range(len(self._ids) - 1, -1, -1))

    def _each(self, positions: range) -> Iterator[JobId]:
        ids = self._ids
        for position in positions:
            yield ExistingJobId(ids[position]) if self._conflict(position) else JobId(ids[position])

    def __contains__(self, value: object) -> bool:
        return value in self._ids

    def index(self, value: Any, start: int = 0, stop: int = sys.maxsize) -> int:
        """The first position of ``value`` (between ``start`` and ``stop``); ValueError when absent."""
        try:
            return self._ids.index(value, start, stop)
        except ValueError:
            raise ValueError(f"{value!r} is not in JobIds") from None

    def count(self, value: Any) -> int:
        """How many times ``value`` occurs (as ``list.count``)."""
        return self._ids.count(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JobIds):
            return self._ids == other._ids
        if isinstance(other, (list, tuple)):
            return len(other) == len(self._ids) and all(map(operator.eq, self._ids, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, like a list: not hashable

    def __add__(self, other: object) -> JobIds:
        if not isinstance(other, (JobIds, list, tuple)):
            return NotImplemented
        builder = JobIdsBuilder()
        builder.extend(self)
        builder.extend(other)
        return builder.build()

    def __radd__(self, other: object) -> JobIds:
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        builder = JobIdsBuilder()
        builder.extend(other)
        builder.extend(self)
        return builder.build()

    def __repr__(self) -> str:
        def shown(positions: Iterable[int]) -> list[str]:
            return [repr(self[p]) if self._conflict(p) else str(self._ids[p]) for p in positions]

        count = len(self._ids)
        if count <= REPR_IDS:
            return f"JobIds([{', '.join(shown(range(count)))}])"
        half = REPR_IDS // 2
        items = [*shown(range(half)), "...", *shown(range(count - half, count))]
        return f"JobIds([{', '.join(items)}], len={count})"

    def __sizeof__(self) -> int:
        """Bytes the object holds, its array of ids and its conflict bitmap included (as an
        ``array``'s own size includes its items)."""
        bits = 0 if self._conflicts is None else sys.getsizeof(self._conflicts)
        return object.__sizeof__(self) + sys.getsizeof(self._ids) + bits

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickled, (self._ids, self._conflicts)


class WorkflowIds(JobIds):
    """What ``enqueue_many(workflow)`` (or a ``Batch``) returns: the steps' ids in the order they
    were added, as a ``JobIds`` (so code reading ``ids[0]`` or ``len(ids)`` is unchanged), plus
    ``by_name``, each step's id by its name, and ``workflow_id``.

    ``conflict`` is True when the workflow was refused as a duplicate of a stored one (``Workflow(
    unique=...)``): the ids and names are then the stored workflow's, ``workflow_id`` its id.
    Slicing or adding gives a plain ``JobIds``."""

    __slots__ = ("_names", "conflict", "workflow_id")

    _names: tuple[str, ...]
    #: The id of the workflow the steps belong to.
    workflow_id: str
    #: True: the workflow matched a stored one (its uniqueness), whose steps these are.
    conflict: bool

    @classmethod
    def of(
        cls, ids: Iterable[int], names: Iterable[str], workflow_id: str, *, conflict: bool = False
    ) -> WorkflowIds:
        """The ids of a workflow's steps, ``names`` giving each one's step name in the same order."""
        plain = job_ids(ids)
        made = cls.__new__(cls)
        made._ids, made._conflicts = plain._ids, plain._conflicts
        made._names = tuple(names)
        if len(made._names) != len(made._ids):
            raise ValueError(f"{len(made._names)} step names for {len(made._ids)} ids")
        made.workflow_id = workflow_id
        made.conflict = conflict
        return made

    @property
    def by_name(self) -> dict[str, JobId]:
        """Each step's id (a ``JobId``) by step name, in the order the steps were added (a
        sub-workflow's steps named ``"<sub-workflow>.<step>"``)."""
        return dict(zip(self._names, self, strict=True))

    @property
    def names(self) -> tuple[str, ...]:
        """The step names, in the order of the ids."""
        return self._names

    def __repr__(self) -> str:
        return (
            f"WorkflowIds({self.workflow_id!r}, {dict(zip(self._names, self._ids.tolist(), strict=True))!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return _workflow_unpickled, (self._ids, self._conflicts, self._names, self.workflow_id, self.conflict)


def _workflow_unpickled(
    ids: array[int], conflicts: bytearray | None, names: tuple[str, ...], workflow_id: str, conflict: bool
) -> WorkflowIds:
    return WorkflowIds.of(JobIds._adopt(ids, conflicts), names, workflow_id, conflict=conflict)


#: Ids a ``JobIds`` repr shows at most: the first and last half of them beyond that.
REPR_IDS = 20


class JobIdsBuilder:
    """Gathers the ids of an insert as they come, chunk by chunk, into the parts of a ``JobIds``:
    an id takes 8 bytes here at once, never a Python int in a growing list."""

    __slots__ = ("_conflicts", "_ids")

    def __init__(self) -> None:
        self._ids: array[int] = array("q")
        self._conflicts: bytearray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, position: int) -> int:
        """The id added at ``position``, as a plain int."""
        return self._ids[position]

    def extend_new(self, ids: Iterable[int]) -> None:
        """Add the ids of new jobs (no conflicts among them: nothing is looked at)."""
        self._ids.extend(ids)

    def extend(self, ids: Iterable[int]) -> None:
        """Add ids; those that are an ``ExistingJobId`` (or a ``JobIds``' conflicts) are conflicts."""
        if isinstance(ids, JobIds):
            offset = len(self._ids)
            self._ids.extend(ids._ids)
            if ids._conflicts is not None:
                for position in range(len(ids)):
                    if ids._conflict(position):
                        self._mark(offset + position)
            return
        if isinstance(ids, range) or (
            isinstance(ids, (list, tuple)) and ExistingJobId not in set(map(type, ids))
        ):
            self._ids.extend(ids)  # no conflict among them: at C speed
            return
        for value in ids:
            self.append(value, conflict=type(value) is ExistingJobId)

    def append(self, value: int, *, conflict: bool = False) -> None:
        self._ids.append(value)
        if conflict:
            self._mark(len(self._ids) - 1)

    def put(self, position: int, value: int, *, conflict: bool = False) -> None:
        """Set the id at ``position`` (added already: a placeholder until the insert knows it)."""
        self._ids[position] = value
        if conflict:
            self._mark(position)

    def _mark(self, position: int) -> None:
        self._conflicts = _set_bit(bytearray() if self._conflicts is None else self._conflicts, position)

    def parts(self) -> tuple[array[int], bytearray | None]:
        return self._ids, self._conflicts

    def build(self) -> JobIds:
        """The ids gathered, as a ``JobIds`` (which takes them over: add nothing afterwards)."""
        return JobIds._adopt(self._ids, self._conflicts)


def _set_bit(bits: bytearray, position: int) -> bytearray:
    """``bits`` with the bit of ``position`` set (grown to reach it)."""
    missing = (position >> 3) + 1 - len(bits)
    if missing > 0:
        bits.extend(bytes(missing))
    bits[position >> 3] |= 1 << (position & 7)
    return bits


def _unpickled(ids: array[int], conflicts: bytearray | None) -> JobIds:
    return JobIds._adopt(ids, conflicts)


def job_ids(ids: Iterable[int]) -> JobIds:
    """``ids`` as a ``JobIds`` (the engines' own results are one already; any other iterable of
    ints is copied, its ``ExistingJobId`` values kept as conflicts)."""
    return ids if isinstance(ids, JobIds) else JobIds(ids)


def plain_ids(ids: Iterable[int]) -> list[int]:
    """``ids`` as a list of plain ints, for a driver: psycopg chooses an array's element type by
    each value's type and size, and refuses a list that mixes ``JobId`` values and ints."""
    return ids.tolist() if isinstance(ids, JobIds) else [int(i) for i in ids]


def id_array(ids: JobIds) -> array[int]:
    """The ids of ``ids`` as they are stored (8 bytes each): read them, never change them."""
    return ids._ids


#: Whether psycopg can take a ``JobIds`` as a parameter (``_psycopg_ids``).
_adapted = False


def _adapt() -> None:
    """Register ``JobIds``' psycopg dumpers if psycopg is imported (checked as each ``JobIds`` is
    made, until then: a dictionary lookup; importing psycopg for an application that does not use
    it would cost more than the rest of ``import conveyor``)."""
    global _adapted
    if "psycopg" in sys.modules:
        from conveyor import _psycopg_ids

        _psycopg_ids.register()
        _adapted = True


_adapt()
