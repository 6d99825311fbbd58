"""Cron expressions and entries, without a database: what parses, what a mistake says, which minutes
tick (day rules, time zones), and how entries are named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conveyor import JobRequest, job
from conveyor.cron import CronEntry, CronError, CronExpression
from conveyor.errors import ValidationError
from conveyor.settings import load_settings, parse_crontab
from tests import cluster_jobs


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def ticks_between(entry: CronEntry, start: datetime, end: datetime) -> list[datetime]:
    return list(entry.ticks(start, end))


def matching_minutes(expression: str, start: datetime, minutes: int) -> list[datetime]:
    parsed = CronExpression.parse(expression)
    return [m for m in (start + timedelta(minutes=i) for i in range(minutes)) if parsed.matches(m)]


# -- valid forms ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        ("* * * * *", "minutes", set(range(60))),
        ("5 * * * *", "minutes", {5}),
        ("1,2,30 * * * *", "minutes", {1, 2, 30}),
        ("10-14 * * * *", "minutes", {10, 11, 12, 13, 14}),
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("10-30/10 * * * *", "minutes", {10, 20, 30}),
        ("50/4 * * * *", "minutes", {50, 54, 58}),
        ("0,30-32,*/20 * * * *", "minutes", {0, 20, 30, 31, 32, 40}),
        ("* 9-17/4 * * *", "hours", {9, 13, 17}),
        ("* * 1,15,31 * *", "days", {1, 15, 31}),
        ("* * * JAN-MAR *", "months", {1, 2, 3}),
        ("* * * jan,Jul,DEC *", "months", {1, 7, 12}),
        ("* * * */3 *", "months", {1, 4, 7, 10}),
        ("* * * * MON-FRI", "weekdays", {1, 2, 3, 4, 5}),
        ("* * * * sun,sat", "weekdays", {0, 6}),
        ("* * * * 7", "weekdays", {0}),
        ("* * * * 5-7", "weekdays", {5, 6, 0}),
        ("* * * * 0,7", "weekdays", {0}),
        ("* * * * */2", "weekdays", {0, 2, 4, 6}),
        ("  0   12  *  *  *  ", "hours", {12}),
    ],
)
def test_valid_fields_expand_to_their_values(expression: str, field: str, values: set[int]) -> None:
    assert set(getattr(CronExpression.parse(expression), field)) == values


@pytest.mark.parametrize(
    ("nickname", "equivalent"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_nicknames_tick_like_their_expansion(nickname: str, equivalent: str) -> None:
    start = utc(2023, 12, 31, 22, 0)  # a span crossing a year, a month, a Sunday and midnights
    span = 60 * 24 * 9
    ticks = matching_minutes(nickname, start, span)
    assert ticks == matching_minutes(equivalent, start, span)
    assert ticks, f"{nickname} never ticked between {start} and {span} minutes later"


def test_reboot_is_its_own_kind_and_never_ticks_by_the_clock() -> None:
    parsed = CronExpression.parse("@reboot")
    assert parsed.reboot
    assert not parsed.matches(utc(2024, 1, 1, 0, 0))
    entry = CronEntry(parsed, cluster_jobs.cron_tick.new())
    assert ticks_between(entry, utc(2024, 1, 1), utc(2024, 1, 3)) == []


def test_weekday_seven_and_names_mean_sunday() -> None:
    sunday = utc(2024, 3, 10, 6, 0)
    assert sunday.isoweekday() == 7
    for expression in ("0 6 * * 7", "0 6 * * 0", "0 6 * * SUN", "0 6 * * sun"):
        parsed = CronExpression.parse(expression)
        assert parsed.matches(sunday), expression
        assert not parsed.matches(sunday + timedelta(days=1)), expression


# -- errors name the field ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "fragments"),
    [
        ("60 * * * *", ["field 1 (minute)", "60 is out of range 0-59"]),
        ("* 24 * * *", ["field 2 (hour)", "24 is out of range 0-23"]),
        ("* * 0 * *", ["field 3 (day of month)", "0 is out of range 1-31"]),
        ("* * 32 * *", ["field 3 (day of month)", "32 is out of range 1-31"]),
        ("0 0 * 13 *", ["field 4 (month)", "13 is out of range 1-12"]),
        ("0 0 * JANUARY *", ["field 4 (month)", "'JANUARY' is not a number"]),
        ("* * * * 8", ["field 5 (day of week)", "8 is out of range 0-7"]),
        ("* * * * FUN", ["field 5 (day of week)", "'FUN' is not a number"]),
        ("*/0 * * * *", ["field 1 (minute)", "step '0' must be >= 1"]),
        ("*/x * * * *", ["field 1 (minute)", "step 'x' must be >= 1"]),
        ("30-10 * * * *", ["field 1 (minute)", "range goes backwards"]),
        ("1,,2 * * * *", ["field 1 (minute)", "empty list item"]),
        ("* -1 * * *", ["field 2 (hour)", "is not a number"]),
        ("* * * * * *", ["has 6 fields; expected 5"]),
        ("* * * *", ["has 4 fields; expected 5"]),
        ("@fortnightly", ["unknown nickname '@fortnightly'", "@reboot"]),
        ("", ["non-empty"]),
        ("   ", ["non-empty"]),
        # Digits and names are ASCII: "²" passed str.isdigit and then int() raised a bare ValueError,
        # "٣" was read as 3 and "\u017fep" as SEP (found by tests/test_properties.py).
        ("0 0 \u00b2 * *", ["field 3 (day of month)", "is not a number"]),
        ("\u0663 * * * *", ["field 1 (minute)", "is not a number"]),
        ("*/\u00b2 * * * *", ["field 1 (minute)", "must be >= 1"]),
        ("0 0 1 \u017fep *", ["field 4 (month)", "is not a number"]),
    ],
)
def test_errors_name_the_bad_field(expression: str, fragments: list[str]) -> None:
    with pytest.raises(CronError) as caught:
        CronExpression.parse(expression)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert isinstance(caught.value, ValidationError)


def test_only_the_bad_field_is_blamed() -> None:
    with pytest.raises(CronError) as caught:
        CronExpression.parse("0 9 1 13 MON")
    message = str(caught.value)
    assert "field 4 (month) '13'" in message
    for other in ("field 1", "field 2", "field 3", "field 5"):
        assert other not in message


# -- which minutes tick ---------------------------------------------------------------------------
def test_day_of_month_and_day_of_week_restricted_together_match_either() -> None:
    # September 2024: the 13th is a Friday; the other Fridays are the 6th, 20th and 27th.
    start = utc(2024, 9, 1, 0, 0)
    minutes = 60 * 24 * 30

    def days(expression: str) -> list[int]:
        return [m.day for m in matching_minutes(expression, start, minutes)]

    assert days("0 0 13 * *") == [13]
    assert days("0 0 * * FRI") == [6, 13, 20, 27]
    assert days("0 0 13 * FRI") == [6, 13, 20, 27]  # either rule: the 13th or a Friday
    assert days("0 0 1 * MON") == [1, 2, 9, 16, 23, 30]  # the 1st (a Sunday) or any Monday
    # Only one day field restricted: that one alone decides.
    assert days("0 0 1,2 * *") == [1, 2]
    assert days("0 0 * * 1") == [2, 9, 16, 23, 30]


def test_months_hours_and_minutes_must_all_match() -> None:
    parsed = CronExpression.parse("30 9 * FEB *")
    assert parsed.matches(utc(2024, 2, 7, 9, 30))
    assert not parsed.matches(utc(2024, 3, 7, 9, 30))
    assert not parsed.matches(utc(2024, 2, 7, 10, 30))
    assert not parsed.matches(utc(2024, 2, 7, 9, 31))


def test_ticks_are_whole_utc_minutes_in_the_half_open_span() -> None:
    entry = CronEntry(CronExpression.parse("*/10 * * * *"), cluster_jobs.cron_tick.new())
    ticks = ticks_between(entry, utc(2024, 5, 1, 12, 0, 0), utc(2024, 5, 1, 12, 30, 59))
    # The start is excluded, the end included; seconds never matter.
    assert ticks == [utc(2024, 5, 1, 12, m) for m in (10, 20, 30)]
    assert all(t.tzinfo is UTC and t.second == 0 for t in ticks)
    assert ticks_between(entry, utc(2024, 5, 1, 12, 0, 1), utc(2024, 5, 1, 12, 10, 0)) == [
        utc(2024, 5, 1, 12, 10)
    ]


def test_ticks_follow_the_entry_time_zone_across_daylight_saving() -> None:
    entry = CronEntry.build("0 9 * * *", cluster_jobs.cron_tick, timezone="Europe/Paris")
    # Winter (CET, UTC+1): 09:00 in Paris is 08:00 UTC.
    assert ticks_between(entry, utc(2024, 1, 15), utc(2024, 1, 16)) == [utc(2024, 1, 15, 8, 0)]
    # Summer (CEST, UTC+2): 07:00 UTC.
    assert ticks_between(entry, utc(2024, 7, 15), utc(2024, 7, 16)) == [utc(2024, 7, 15, 7, 0)]
    # Across the spring change (31 March 2024) the UTC hour moves by one, one tick per day.
    week = ticks_between(entry, utc(2024, 3, 28), utc(2024, 4, 3))
    assert [t.hour for t in week] == [8, 8, 8, 7, 7, 7]
    assert [t.day for t in week] == [28, 29, 30, 31, 1, 2]
    # The same expression in UTC is not shifted.
    plain = CronEntry.build("0 9 * * *", cluster_jobs.cron_tick)
    assert ticks_between(plain, utc(2024, 7, 15), utc(2024, 7, 16)) == [utc(2024, 7, 15, 9, 0)]


def test_unknown_time_zone_is_rejected() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        CronEntry.build("0 9 * * *", cluster_jobs.cron_tick, timezone="Mars/Olympus_Mons")


# -- @job(cron=...) -------------------------------------------------------------------------------
def test_job_with_bad_cron_fails_at_decoration_time() -> None:
    with pytest.raises(CronError, match=r"field 4 \(month\)"):

        @job(cron="0 0 * 13 *")
        def monthly_report() -> None: ...

    with pytest.raises(CronError, match="has 1 fields"):

        @job(cron="bad")
        def broken() -> None: ...

    with pytest.raises(ValidationError, match="timezone"):

        @job(cron="0 0 * * *", timezone="Nowhere/City")
        def zoned() -> None: ...


def test_job_with_good_cron_keeps_its_schedule() -> None:
    @job(cron="*/5 * * * *", timezone="Europe/Paris")
    def every_five() -> None: ...

    assert every_five.definition.cron == "*/5 * * * *"
    assert every_five.definition.timezone == "Europe/Paris"


# -- entry names ----------------------------------------------------------------------------------
def test_default_entry_names_are_stable_and_differ_by_what_they_run() -> None:
    def name(
        expression: str = "0 * * * *",
        args: dict[str, object] | None = None,
        timezone: str = "UTC",
        name: str = "",
    ) -> str:
        return CronEntry.build(expression, cluster_jobs.cron_tick, args, timezone=timezone, name=name).name

    first = name(args={"label": "a"})
    assert first == name(args={"label": "a"})
    assert first.startswith("tests.cluster_jobs.cron_tick@")
    # The same args in another order are the same entry.
    assert name(args={"label": "a", "x": 1}) == name(args={"x": 1, "label": "a"})
    others = {
        name(args={"label": "b"}),
        name(args={}),
        name("5 * * * *", args={"label": "a"}),
        name(args={"label": "a"}, timezone="Europe/Paris"),
    }
    assert first not in others
    assert len(others) == 4
    # An explicit name wins.
    assert name(args={"label": "a"}, name="hourly-a") == "hourly-a"


def test_default_name_does_not_depend_on_the_process() -> None:
    # A fixed digest: nodes started at different times and places agree on the entry's identity.
    entry = CronEntry.build("0 * * * *", "some.module.Worker", {"n": 1})
    again = CronEntry.build("0 * * * *", "some.module.Worker", {"n": 1})
    assert entry.name == again.name
    assert entry.name.startswith("some.module.Worker@")
    assert len(entry.name.split("@", 1)[1]) == 10


def test_jobs_of_an_entry_carry_its_identity_in_meta() -> None:
    entry = CronEntry.build(
        "*/2 * * * *", cluster_jobs.cron_tick, {"label": "x"}, timezone="Europe/Paris", queue="reports"
    )
    request = entry.job_for(utc(2024, 1, 1, 10, 0))
    assert request.queue == "reports"
    assert request.args == {"label": "x"}
    assert request.meta["cron"] is True
    assert request.meta["cron_expr"] == "*/2 * * * *"
    assert request.meta["cron_tz"] == "Europe/Paris"
    assert request.meta["cron_name"] == entry.name


def test_crontab_setting_rejects_two_entries_with_one_name() -> None:
    with pytest.raises(ValidationError, match="same name"):
        parse_crontab([("0 * * * *", cluster_jobs.cron_tick), ("0 * * * *", cluster_jobs.cron_tick)])
    entries = parse_crontab(
        [
            ("0 * * * *", cluster_jobs.cron_tick, {"label": "a"}),
            {"expression": "@daily", "worker": "tests.cluster_jobs.cron_tick", "name": "daily"},
        ]
    )
    assert [e.name for e in entries][1] == "daily"
    assert entries[0].name != entries[1].name


def test_daylight_saving_follows_classic_cron() -> None:
    fixed = CronEntry.build("30 2 * * *", "x.y", timezone="Europe/Paris")
    hourly = CronEntry.build("*/30 * * * *", "x.y", timezone="Europe/Paris")
    # 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:30 happens twice; a fixed time runs once.
    autumn = (datetime(2026, 10, 24, 22, 0, tzinfo=UTC), datetime(2026, 10, 25, 4, 0, tzinfo=UTC))
    assert [t.strftime("%H:%M") for t in fixed.ticks(*autumn)] == ["00:30"]
    assert len(list(hourly.ticks(*autumn))) == 12  # wildcard hours run in both passes
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST; the skipped 02:30 runs at 03:00 local (01:00 UTC).
    spring = (datetime(2026, 3, 28, 22, 0, tzinfo=UTC), datetime(2026, 3, 29, 4, 0, tzinfo=UTC))
    assert [t.strftime("%H:%M") for t in fixed.ticks(*spring)] == ["01:00"]


def test_backfill_limit_must_be_positive() -> None:
    with pytest.raises(ValidationError) as exc:
        CronEntry(CronExpression.parse("* * * * *"), JobRequest(worker="x.y"), backfill_limit=0)
    assert exc.value.field == "backfill_limit"


# -- entries of the wrong type (issue 31.15) -----------------------------------------------------
WRONG_TYPES = [
    ({"timezone": 5}, "timezone"),
    ({"timezone": None}, "timezone"),
    ({"args": 5}, "args"),
    ({"args": [1, 2]}, "args"),
    ({"args": "ab"}, "args"),
    ({"name": 5}, "name"),
    ({"name": "x" * 256}, "name"),
    ({"backfill": "yes"}, "backfill"),
    ({"backfill_limit": "x"}, "backfill_limit"),
    ({"priority": "x"}, "priority"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"tags": 5}, "tags"),
    ({"queue": 5}, "queue"),
    ({"expression": 5}, "cron"),
    ({"expression": None}, "cron"),
]


@pytest.mark.parametrize(
    ("fields", "field"), WRONG_TYPES, ids=[f"{f}={v!r}"[:30] for (d, f) in WRONG_TYPES for v in d.values()]
)
def test_entries_of_the_wrong_type_name_the_field(fields: dict[str, object], field: str) -> None:
    spec: dict[str, object] = {"expression": "0 * * * *", **fields}
    expression = spec.pop("expression")
    args = spec.pop("args", None)
    with pytest.raises(ValidationError) as raised:
        CronEntry.build(expression, cluster_jobs.cron_tick, args, **spec)  # type: ignore[arg-type]
    assert raised.value.field == field
    # From settings or a config file: the same, naming the entry too.
    mapping = {"expression": "0 * * * *", "worker": "tests.cluster_jobs.cron_tick", **fields}
    with pytest.raises(ValidationError) as raised:
        parse_crontab([("0 * * * *", cluster_jobs.cron_tick), mapping])
    assert raised.value.field == f"crontab[1].{field}"


def test_a_config_files_crontab_of_the_wrong_type_names_the_entry_and_field(tmp_path: Path) -> None:
    config = tmp_path / "conveyor.toml"
    config.write_text(
        '[[crontab]]\nexpression = "0 * * * *"\nworker = "tests.cluster_jobs.cron_tick"\ntimezone = 5\n'
    )
    with pytest.raises(ValidationError, match=r"crontab\[0\]\.timezone=5: .*\(from "):
        load_settings(config_file=config, environ={}, cwd=tmp_path)
    config.write_text(
        '[[crontab]]\nexpression = "0 * * * *"\nworker = "tests.cluster_jobs.cron_tick"\nargs = [1, 2]\n'
    )
    with pytest.raises(ValidationError, match=r"crontab\[0\]\.args=\[1, 2\]: must be a mapping"):
        load_settings(config_file=config, environ={}, cwd=tmp_path)
    for crontab in (5, "0 * * * *"):
        with pytest.raises(ValidationError, match="must be a list of cron entries"):
            parse_crontab(crontab)


@pytest.mark.parametrize("timezone", [5, None, b"UTC"])
def test_a_decorated_jobs_time_zone_of_the_wrong_type_names_the_field(timezone: object) -> None:
    with pytest.raises(ValidationError) as raised:

        @job(cron="0 0 * * *", timezone=timezone)  # type: ignore[call-overload]
        def zoned() -> None: ...

    assert raised.value.field == "timezone"
    with pytest.raises(ValidationError, match="timezone"):  # even without cron: it would mean nothing

        @job(timezone="Nowhere/City")
        def unscheduled() -> None: ...


def test_entries_built_directly_check_their_parts() -> None:
    with pytest.raises(ValidationError, match="expression"):
        CronEntry("0 * * * *", cluster_jobs.cron_tick.new())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="request"):
        CronEntry(CronExpression.parse("0 * * * *"), cluster_jobs.cron_tick)  # type: ignore[arg-type]
    entry = CronEntry(CronExpression.parse("0 * * * *"), cluster_jobs.cron_tick.new(), name=None)  # type: ignore[arg-type]
    assert entry.name.startswith("tests.cluster_jobs.cron_tick@")
