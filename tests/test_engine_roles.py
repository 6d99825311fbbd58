"""The engine seam is role protocols (``conveyor.engine.roles``), and the table of them in
``docs/architecture.md`` ("The engine seam") lists exactly their methods: a method added to a role
or the table alone fails here, with the row to write."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

from conveyor.engine import roles
from conveyor.engine.base import Engine
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

ARCHITECTURE = Path(__file__).parent.parent / "docs" / "architecture.md"
#: Protocols of what a role's method returns, not roles of the engine.
RETURNED = {"Listener", "BlockingInsert"}
#: Roles an engine may lack (``isinstance`` tells).
OPTIONAL = {"Abandoning", "BlockingInserts"}
#: Roles made only of other roles: the table says so in a sentence instead of a row.
COMPOSED = {"Cluster"}


def role_classes() -> dict[str, type]:
    return {
        name: cls
        for name, cls in vars(roles).items()
        if inspect.isclass(cls) and getattr(cls, "_is_protocol", False) and name not in RETURNED
    }


def own_members(cls: type) -> list[str]:
    """The members a role declares itself, in the order written (its own, not its bases')."""
    names = [name for name in vars(cls) if not name.startswith("_")]
    return list(dict.fromkeys([*vars(cls).get("__annotations__", {}), *names]))


def documented_rows() -> dict[str, list[str]]:
    text = ARCHITECTURE.read_text()
    section = text.split("## The engine seam", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not (match := re.match(r"`(\w+)`", cells[0])):
            continue
        rows[match.group(1)] = re.findall(r"`(\w+)`", cells[1])
    return rows


def row(name: str, cls: type) -> str:
    methods = ", ".join(f"`{m}`" for m in own_members(cls))
    return f"| `{name}` (`roles/{cls.__module__.rsplit('.', 1)[1]}.py`) | {methods} | ... |"


def test_the_seam_table_lists_every_role_and_method() -> None:
    declared = {name: own_members(cls) for name, cls in role_classes().items() if name not in COMPOSED}
    documented = documented_rows()
    problems: list[str] = []
    for name in sorted(declared.keys() - documented.keys()):
        problems.append(f"role {name} is missing from the table; add:\n  {row(name, role_classes()[name])}")
    for name in sorted(documented.keys() - declared.keys()):
        problems.append(f"the table lists {name}, which is no role in conveyor.engine.roles")
    for name in sorted(declared.keys() & documented.keys()):
        if declared[name] != documented[name]:
            missing = [m for m in declared[name] if m not in documented[name]]
            extra = [m for m in documented[name] if m not in declared[name]]
            problems.append(
                f"{name}: the table says {documented[name]}, the protocol declares {declared[name]} "
                f"(missing from the table: {missing}; not in the protocol: {extra}); write:\n"
                f"  {row(name, role_classes()[name])}"
            )
    assert not problems, "docs/architecture.md's seam table has drifted:\n" + "\n".join(problems)


def test_engine_is_every_required_role_and_only_them() -> None:
    found = role_classes()
    required = {name for name in found if name not in OPTIONAL}
    composed_of = {cls.__name__ for cls in Engine.__mro__ if cls.__name__ in found}
    assert composed_of == required
    assert not issubclass(Engine, roles.Abandoning)
    assert not issubclass(Engine, roles.BlockingInserts)


def test_blocking_inserts_is_an_optional_role_that_both_engines_fill() -> None:
    engines: list[Any] = [PostgresEngine("postgresql://localhost/x"), SqliteEngine(":memory:")]
    for engine in engines:
        assert isinstance(engine, roles.BlockingInserts)

    class Bare:  # an engine of the user's own: enqueue_sync goes through the app's portal
        pass

    assert not isinstance(Bare(), roles.BlockingInserts)


def members(cls: type) -> set[str]:
    return {m for base in cls.__mro__ if base.__name__ in role_classes() for m in own_members(base)}


def test_abandon_is_an_optional_role_that_both_engines_fill() -> None:
    assert "abandon" not in members(Engine) and members(roles.Abandoning) == {"abandon"}
    engines: list[Any] = [PostgresEngine("postgresql://localhost/x"), SqliteEngine(":memory:")]
    for engine in engines:
        assert isinstance(engine, Engine) and isinstance(engine, roles.Abandoning)

    class Bare:  # an engine of the user's own that has nothing to let go of
        pass

    assert not isinstance(Bare(), roles.Abandoning)
