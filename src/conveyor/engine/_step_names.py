"""A step name is unique within its workflow: the database keeps it so with a unique index
(migration 10), and an insert that breaks it is refused whole with ``StepExistsError``, whatever
driver ran it (psycopg, asyncpg, SQLAlchemy, sqlite3, aiosqlite all name the index in their error)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def step_names_kept() -> Iterator[None]:
    """Around an insert: a broken unique step name comes out as ``StepExistsError``."""
    try:
        yield
    except Exception as exc:
        clash = step_clash(exc)
        if clash is None:
            raise
        raise clash from exc
