"""What a command reads before it acts, on every engine: ``inspect_schema`` and ``migration_plan``
work on an engine that was never opened (a connection of their own), and ``explain`` speaks only of
the engine's own failures. The CLI reaches the schema through these alone."""

from __future__ import annotations

import pytest

from conveyor.engine.base import Engine, SchemaReport
from conveyor.errors import EngineClosedError


async def test_an_engine_never_opened_reads_its_schema_and_stays_closed(unopened_engine: Engine) -> None:
    report = await unopened_engine.inspect_schema(create=True)
    assert isinstance(report, SchemaReport) and report.latest >= 1
    assert await unopened_engine.migration_plan()
    with pytest.raises(EngineClosedError):  # neither call opened the engine
        await unopened_engine.schema_version()


async def test_a_schema_not_installed_is_reported_so(any_engine: Engine) -> None:
    await any_engine.uninstall()
    report = await any_engine.inspect_schema(create=True)
    assert report.version is None and report.missing == ()
    problem = report.problem()
    assert problem is not None and "is not installed: run `conveyor install" in problem
    assert "would apply" in await any_engine.migration_plan()


async def test_an_installed_schema_is_reported_current(any_engine: Engine, unopened_engine: Engine) -> None:
    """``any_engine`` is ``unopened_engine`` opened and installed."""
    report = await any_engine.inspect_schema()
    assert report.version == report.latest and report.missing == () and report.problem() is None
    assert report.where.startswith("the Conveyor schema in ")
    plan = await any_engine.migration_plan()
    assert "nothing to apply" in plan or "would apply 0 migrations" in plan, plan


def test_explain_leaves_other_exceptions_alone(unopened_engine: Engine) -> None:
    assert unopened_engine.explain(ValueError("not the engine's")) is None
