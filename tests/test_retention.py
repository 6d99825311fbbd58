"""Retention rules as values and as settings: from Python, a config file and the environment, with
every bad rule refused by its index and field (the engines' side is tests/conformance/
test_retention_contract.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobState, Pruned, PruneRule, Retention, ValidationError
from conveyor.retention import parse_duration
from conveyor.settings import load_settings

URL = "sqlite:///unused.db"
DAY = 86_400.0


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("CONVEYOR_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


# -- values ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("1.5", 1.5),
        ("45s", 45.0),
        ("30m", 1800.0),
        ("12h", 43_200.0),
        ("7d", 604_800.0),
        ("2w", 1_209_600.0),
        ("1d12h", 129_600.0),
        (" 1.5H ", 5400.0),
        (3600, 3600.0),
        (timedelta(days=1), DAY),
    ],
)
def test_durations(text: Any, seconds: float) -> None:
    assert parse_duration(text, "max_age") == seconds


@pytest.mark.parametrize(
    "text", ["", "7x", "d", "-1", "1d-2h", "nan", "inf", "101w0d" * 100, "5000000w", True]
)
def test_bad_durations_are_refused(text: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_duration(text, "max_age")
    assert caught.value.field == "max_age"


def test_a_rule_normalises_what_it_is_given() -> None:
    rule = PruneRule(states=["discarded", "completed", "discarded"], max_age="30d", max_rows=0)
    assert rule.states == (JobState.COMPLETED, JobState.DISCARDED)
    assert (rule.max_age, rule.max_rows) == (30 * DAY, 0)
    assert PruneRule(states="cancelled").states == (JobState.CANCELLED,)
    assert PruneRule().states == (JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED)


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        ({"states": "available"}, "states", "not a final state"),
        ({"states": ["completed", "executing"]}, "states", "not a final state"),
        ({"states": "bogus"}, "states", "not a final state"),
        ({"states": []}, "states", "at least one"),
        ({"states": 3}, "states", "a state or a list"),
        ({"queue": "bad queue"}, "queue", "letters, digits"),
        ({"worker": ""}, "worker", "non-empty"),
        ({"worker": "a\x00b"}, "worker", "NUL"),
        ({"max_age": -1}, "max_age", "from 0"),
        ({"max_age": float("nan")}, "max_age", "from 0"),
        ({"max_rows": -1}, "max_rows", "integer from 0"),
        ({"max_rows": 1.5}, "max_rows", "integer from 0"),
        ({"max_rows": True}, "max_rows", "integer from 0"),
    ],
)
def test_bad_rules_name_the_field(fields: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        PruneRule(**fields)
    assert caught.value.field == field and problem in caught.value.problem


def test_precedence_is_worker_then_queue_then_states_then_order() -> None:
    by_state = PruneRule(states="discarded", max_age=1)
    by_queue = PruneRule(queue="mail", max_age=2)
    by_queue_and_state = PruneRule(queue="mail", states="discarded", max_age=3)
    by_worker = PruneRule(worker="app.Job", max_age=4)
    also_by_state = PruneRule(states=("discarded", "cancelled"), max_age=5)
    retention = Retention(rules=(by_state, by_queue, by_queue_and_state, by_worker, also_by_state))
    assert retention.ordered == (by_worker, by_queue_and_state, by_queue, by_state, also_by_state)
    governing = retention.governing
    assert governing("mail", "app.Job", JobState.DISCARDED) is by_worker
    assert governing("mail", "x", JobState.DISCARDED) is by_queue_and_state
    assert governing("mail", "x", JobState.COMPLETED) is by_queue
    assert governing("web", "x", JobState.DISCARDED) is by_state
    assert governing("web", "x", JobState.CANCELLED) is also_by_state
    assert governing("web", "x", JobState.COMPLETED) is None  # the defaults


def test_a_rule_that_could_never_govern_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        Retention(
            rules=(PruneRule(queue="a", max_age=1), PruneRule(queue="b"), PruneRule(queue="a", max_rows=1))
        )
    assert caught.value.field == "rules[2]" and "rules[0]" in caught.value.problem


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_rows": 0}, "max_rows"),
        ({"keep_per_queue": 0}, "keep_per_queue"),
        ({"max_age": "soon"}, "max_age"),
    ],
)
def test_bad_policies_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Retention(**fields)
    assert caught.value.field == field


def test_pruned_adds_up_by_state() -> None:
    total = Pruned.of([("completed", 2), ("discarded", 1)]) + Pruned(cancelled=4, discarded=1)
    assert total == Pruned(completed=2, cancelled=4, discarded=2) and total.count == 8
    assert total.by_state() == {"completed": 2, "cancelled": 4, "discarded": 2}


# -- settings ----------------------------------------------------------------------------------------
RULES_TOML = """
prune_max_rows = 100000

[[prune_rules]]
states = ["discarded"]
max_age = "30d"

[[prune_rules]]
queue = "mail"
max_rows = 500

[[prune_rules]]
worker = "app.jobs.Report"
states = "completed"
max_age = 3600
"""
EXPECTED = (
    PruneRule(states=(JobState.DISCARDED,), max_age=30 * DAY),
    PruneRule(queue="mail", max_rows=500),
    PruneRule(worker="app.jobs.Report", states=(JobState.COMPLETED,), max_age=3600),
)


def test_rules_from_conveyor_toml(clean_environment: Path) -> None:
    (clean_environment / "conveyor.toml").write_text(RULES_TOML, "utf-8")
    settings = Conveyor(URL).settings
    assert settings.prune_rules == EXPECTED and settings.prune_max_rows == 100_000
    retention = settings.retention
    assert retention.rules == EXPECTED and retention.max_rows == 100_000
    assert (retention.max_age, retention.keep_per_queue) == (DAY, None)


def test_rules_from_pyproject(clean_environment: Path) -> None:
    table = RULES_TOML.replace("[[prune_rules]]", "[[tool.conveyor.prune_rules]]")
    (clean_environment / "pyproject.toml").write_text("[tool.conveyor]\n" + table, "utf-8")
    assert load_settings().prune_rules == EXPECTED


def test_rules_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "CONVEYOR_PRUNE_RULES",
        '[{"states": ["discarded"], "max_age": "30d"}, {"queue": "mail", "max_rows": 500},'
        ' {"worker": "app.jobs.Report", "states": "completed", "max_age": 3600}]',
    )
    monkeypatch.setenv("CONVEYOR_PRUNE_MAX_ROWS", "100000")
    settings = load_settings()
    assert settings.prune_rules == EXPECTED and settings.prune_max_rows == 100_000
    monkeypatch.setenv("CONVEYOR_PRUNE_MAX_ROWS", "none")
    assert load_settings().prune_max_rows is None


def test_rules_from_python_as_values_or_mappings() -> None:
    settings = Conveyor(
        URL, prune_rules=[EXPECTED[0], {"queue": "mail", "max_rows": 500}, EXPECTED[2]]
    ).settings
    assert settings.prune_rules == EXPECTED


def test_arguments_beat_the_environment_beat_the_file(
    monkeypatch: pytest.MonkeyPatch, clean_environment: Path
) -> None:
    (clean_environment / "conveyor.toml").write_text(RULES_TOML, "utf-8")
    monkeypatch.setenv("CONVEYOR_PRUNE_RULES", '[{"queue": "env", "max_age": 1}]')
    assert load_settings().prune_rules == (PruneRule(queue="env", max_age=1),)
    assert load_settings({"prune_rules": []}).prune_rules == ()


@pytest.mark.parametrize(
    ("rules", "field", "problem"),
    [
        ([{"states": "available", "max_age": 1}], "prune_rules[0].states", "not a final state"),
        ([{"max_age": 1}, {"queue": "q", "max_age": "7x"}], "prune_rules[1].max_age", "duration"),
        ([{"queue": "q", "max_rows": -5}], "prune_rules[0].max_rows", "integer from 0"),
        ([{"queue": "q", "keep": 5}], "prune_rules[0].keep", "unknown key"),
        ([{"queue": "q"}, "discarded"], "prune_rules[1]", "PruneRule or a table"),
        ([{"queue": "q"}, {"queue": "q", "max_age": 1}], "prune_rules[1]", "same jobs as prune_rules[0]"),
        ({"queue": "q"}, "prune_rules", "list of rules"),
        ("discarded", "prune_rules", "list of rules"),
    ],
)
def test_bad_rules_from_python_name_the_rule_and_field(rules: Any, field: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Conveyor(URL, prune_rules=rules)
    assert caught.value.field == field and problem in caught.value.problem


def test_bad_rules_in_a_file_name_the_rule_field_and_file(clean_environment: Path) -> None:
    path = clean_environment / "conveyor.toml"
    path.write_text('[[prune_rules]]\nqueue = "mail"\n\n[[prune_rules]]\nstates = ["executing"]\n', "utf-8")
    with pytest.raises(ValidationError) as caught:
        Conveyor(URL)
    assert caught.value.field == "prune_rules[1].states"
    assert "not a final state" in caught.value.problem and str(path) in caught.value.problem


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("[{", "CONVEYOR_PRUNE_RULES", "JSON array"),
        ('{"queue": "q"}', "CONVEYOR_PRUNE_RULES", "list of rules"),
        ('[{"states": "available"}]', "CONVEYOR_PRUNE_RULES[0].states", "not a final state"),
        ('[{"queue": "q"}, {"max_rows": "ten"}]', "CONVEYOR_PRUNE_RULES[1].max_rows", "integer"),
    ],
)
def test_bad_rules_in_the_environment_name_the_variable_rule_and_field(
    monkeypatch: pytest.MonkeyPatch, text: str, field: str, problem: str
) -> None:
    monkeypatch.setenv("CONVEYOR_PRUNE_RULES", text)
    with pytest.raises(ValidationError) as caught:
        load_settings()
    assert caught.value.field == field and problem in caught.value.problem


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True])
def test_a_bad_prune_max_rows_is_refused(value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        Conveyor(URL, prune_max_rows=value)
    assert caught.value.field == "prune_max_rows"


def test_a_settings_value_refuses_rules_that_are_not_rules() -> None:
    from conveyor import Settings

    with pytest.raises(ValidationError) as caught:
        Settings(prune_rules=[PruneRule()])  # type: ignore[arg-type]
    assert caught.value.field == "prune_rules"
