"""A step name is unique within its workflow: the database keeps it so with a unique index
(migration 10), and an insert that breaks it is refused whole with ``StepExistsError``, whatever
driver ran it (psycopg, asyncpg, SQLAlchemy, sqlite3, aiosqlite all name the index in their error)."""

from __future__ import annotations

import re
from types import TracebackType

from conveyor.errors import StepExistsError

#: The unique index over (meta.workflow_id, meta.name) of the rows naming a workflow.
STEP_NAMES_INDEX = "conveyor_workflow_step_names_index"
#: PostgreSQL's detail of a unique violation: "Key (<expressions>)=(<workflow id>, <name>) already
#: exists." (SQLite's error names no values.)
_KEY = re.compile(r"\)=\((?P<workflow>.*?), (?P<name>.*)\) already exists", re.DOTALL)


def step_clash(exc: BaseException) -> StepExistsError | None:
    """The ``StepExistsError`` that ``exc`` stands for, or None when it is about something else."""
    text = str(exc)
    if STEP_NAMES_INDEX not in text:
        return None
    found = _KEY.search(text)
    if found is None:
        return StepExistsError(
            "name", None, "a step of the same name is already stored in its workflow (names are unique there)"
        )
    return StepExistsError("name", found["name"], f"is already a step of workflow {found['workflow']!r}")


class _StepNamesKept:
    """The context manager ``step_names_kept`` returns: stateless, so one serves every call (a
    class's ``__exit__`` costs a fraction of a generator-based manager's, on every single insert)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, Exception) and (clash := step_clash(exc)) is not None:
            raise clash from exc


_KEPT = _StepNamesKept()


def step_names_kept() -> _StepNamesKept:
    """Around an insert: a broken unique step name comes out as ``StepExistsError``."""
    return _KEPT
