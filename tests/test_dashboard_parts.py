"""The dashboard's parts that need no database: the cron page's next run, the workflow layout,
the filter read from a request, the loopback rule and its CLI refusal, option checks, charts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from conveyor import Conveyor, JobRequest
from conveyor.cli import main
from conveyor.cron import CronEntry
from conveyor.errors import ValidationError
from conveyor.fleet import QueueInfo
from conveyor.job import Job, JobState
from conveyor.limits import GlobalLimit
from conveyor.web.dashboard import InsecureDashboardError, check_exposure, dashboard_app, is_loopback
from conveyor.web.dashboard.charts import bar_chart
from conveyor.web.dashboard.context import time_at, when
from conveyor.web.dashboard.counts import QueueRow
from conveyor.web.dashboard.graph import dependency_order, layout, workflow_svg
from conveyor.web.dashboard.pages import _progress_bar
from conveyor.web.dashboard.querying import parse_ids, parse_query
from conveyor.web.dashboard.schedule import next_run

T0 = datetime(2026, 3, 7, 10, 7, 30, tzinfo=UTC)  # a Saturday


def entry(expression: str, timezone: str = "UTC") -> CronEntry:
    return CronEntry.build(expression, "app.tick", timezone=timezone)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("* * * * *", datetime(2026, 3, 7, 10, 8, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 3, 7, 10, 15, tzinfo=UTC)),
        ("0 9 * * *", datetime(2026, 3, 8, 9, 0, tzinfo=UTC)),
        ("30 8 * * MON", datetime(2026, 3, 9, 8, 30, tzinfo=UTC)),
        ("0 0 1 * *", datetime(2026, 4, 1, tzinfo=UTC)),
        ("0 12 29 2 *", datetime(2028, 2, 29, 12, tzinfo=UTC)),  # the next leap day
        ("0 0 13 * FRI", datetime(2026, 3, 13, tzinfo=UTC)),  # either day field matches (classic cron)
        ("@yearly", datetime(2027, 1, 1, tzinfo=UTC)),
    ],
)
def test_next_run(expression: str, expected: datetime) -> None:
    assert next_run(entry(expression), T0) == expected


def test_next_run_follows_the_entrys_time_zone_and_dst() -> None:
    # 02:30 does not exist in New York on 8 March 2026: classic cron runs it at 03:00 local.
    found = next_run(entry("30 2 * * *", "America/New_York"), datetime(2026, 3, 8, 5, tzinfo=UTC))
    assert found == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    # And on an ordinary day 02:30 local is 07:30 UTC (EDT) or 06:30 (after the change).
    later = next_run(entry("30 2 * * *", "America/New_York"), datetime(2026, 3, 9, 0, tzinfo=UTC))
    assert later == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)


def test_next_run_of_a_reboot_entry_is_none() -> None:
    assert next_run(entry("@reboot"), T0) is None


def step(job_id: int, name: str, deps: object, state: JobState = JobState.AVAILABLE) -> Job:
    return Job(
        id=job_id,
        state=state,
        queue="default",
        worker="app.step",
        args={},
        meta={"workflow_id": "w", "name": name, "deps": deps},
        tags=(),
        errors=(),
        attempt=0,
        max_attempts=20,
        priority=0,
        attempted_by=(),
        inserted_at=T0,
        scheduled_at=T0,
    )


def test_workflow_layout_puts_each_step_after_its_dependencies() -> None:
    steps = {
        "a": step(1, "a", []),
        "b": step(2, "b", ["a"]),
        "c": step(3, "c", ["a"]),
        "d": step(4, "d", ["b", "c", "missing"]),
        "e": step(5, "e", ["a", "d"]),
    }
    columns = {p.name: (p.column, p.row) for p in layout(steps)}
    assert columns == {"a": (0, 0), "b": (1, 0), "c": (1, 1), "d": (2, 0), "e": (3, 0)}


def test_workflow_layout_survives_cycles_and_junk_deps() -> None:
    steps = {"x": step(1, "x", ["y"]), "y": step(2, "y", ["x"]), "z": step(3, "z", "not a list")}
    placed = {p.name for p in layout(steps)}
    assert placed == {"x", "y", "z"}
    svg = workflow_svg(steps, lambda job_id: f"/jobs/{job_id}")
    assert svg is not None and svg.count("<a ") == 3


def test_steps_are_listed_in_dependency_order_ties_by_insertion() -> None:
    steps = {
        "zeta": step(1, "zeta", []),
        "alpha": step(3, "alpha", ["zeta"]),
        "beta": step(2, "beta", []),
        "mid": step(4, "mid", ["alpha", "beta", "missing"]),
        "x": step(6, "x", ["y"]),  # a cycle: last, by id
        "y": step(5, "y", ["x"]),
    }
    assert [name for name, _ in dependency_order(steps)] == ["zeta", "beta", "alpha", "mid", "y", "x"]
    chain = {f"s{i}": step(i + 1, f"s{i}", [f"s{i - 1}"] if i else []) for i in range(5000)}
    assert [name for name, _ in dependency_order(chain)] == [f"s{i}" for i in range(5000)]


def test_progress_label_and_times_in_utc() -> None:
    assert _progress_bar({"done": 10, "total": 20}) == (10.0, 20.0, "10 / 20")
    assert _progress_bar({"done": 2.5, "total": 4}) == (2.5, 4.0, "2.5 / 4")
    assert _progress_bar({"percent": 45}) == (45.0, 100.0, "45%")
    assert _progress_bar({"done": True, "total": 3}) is None and _progress_bar({"phase": "x"}) is None
    naive = datetime(2026, 3, 7, 10, 7, 30)  # as Oban stores times: UTC without a zone
    expected = '<time datetime="2026-03-07T10:07:30Z">2026-03-07 10:07:30 UTC</time>'
    assert time_at(naive) == time_at(T0) == time_at("2026-03-07T10:07:30") == expected
    assert time_at("<b>not a time</b>") == "&lt;b&gt;not a time&lt;/b&gt;" and time_at(None) == "—"
    assert when(T0.astimezone(timezone(timedelta(hours=-5)))) == "2026-03-07 10:07:30 UTC"


def test_workflow_svg_escapes_names() -> None:
    steps = {'<b onmouseover="x">': step(1, '<b onmouseover="x">', [])}
    svg = workflow_svg(steps, lambda job_id: f'/jobs/{job_id}"><script>')
    assert svg is not None
    assert "<b " not in svg and "<script>" not in svg and "&lt;b onmouseover=&#34;x&#34;&gt;" in svg


def test_parse_query_keeps_good_values_and_names_bad_ones() -> None:
    query = parse_query(
        {
            "state": ["available", "bogus", ""],
            "queue": ["mail,billing", "bad queue!"],
            "worker": ["app.mail", "x\x00y"],
            "tag": ["vip"],
            "before": ["99999999999999999999999"],
            "limit": ["7"],
        }
    )
    assert query.states == ("available",)
    assert query.queues == ("mail", "billing")
    assert query.workers == ("app.mail",) and query.tags == ("vip",)
    assert query.before is None and query.limit == 50
    assert len(query.problems) == 5
    criteria = query.criteria()
    assert criteria.states == (JobState.AVAILABLE,) and criteria.limit == 50
    assert query.criteria(paged=False).limit is None
    assert (
        query.link(before=5) == "?state=available&queue=mail&queue=billing&worker=app.mail&tag=vip&before=5"
    )


def test_parse_ids() -> None:
    assert parse_ids(["3", " 4 ", "3"]) == ([3, 4], [])
    ids, problems = parse_ids(["x", "9" * 30])
    assert ids == [] and len(problems) == 2


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)
    check_exposure(host, authenticated=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.2", "example.com", "", "192.168.1.1"])
def test_other_hosts_need_authentication(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(InsecureDashboardError, match="without authentication"):
        check_exposure(host, authenticated=False)
    check_exposure(host, authenticated=True)


def test_the_cli_refuses_a_public_address_without_auth_in_one_line() -> None:
    result = CliRunner().invoke(main, ["dashboard", "--dsn", "sqlite:///nowhere.db", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        "Error: refusing to serve the dashboard on 0.0.0.0 without authentication: give a token, "
        "basic auth or an auth hook, or bind 127.0.0.1"
    ]
    bad = CliRunner().invoke(main, ["dashboard", "--basic-auth", "nopassword"])
    assert bad.exit_code == 2 and "USER:PASSWORD" in bad.output


def test_options_are_checked() -> None:
    app = Conveyor("sqlite:///:memory:")
    for options, field in (
        ({"token": "short"}, "token"),
        ({"basic_auth": ("user",)}, "basic_auth"),
        ({"basic_auth": ("us:er", "pw")}, "basic_auth"),
        ({"auth": "yes"}, "auth"),
        ({"secret": "tiny"}, "secret"),
        ({"refresh": -1}, "refresh"),
        ({"read_only": "no"}, "read_only"),
        ({"crontab": ["* * * * *"]}, "crontab"),
    ):
        with pytest.raises(ValidationError) as caught:
            dashboard_app(app, **options)  # type: ignore[arg-type]
        assert caught.value.field == field
        if field == "token":
            assert "short" not in str(caught.value)  # a secret is never echoed
    with pytest.raises(ValidationError):
        dashboard_app(JobRequest(worker="x", args={}))  # type: ignore[arg-type]


def test_bar_chart_scales_and_escapes() -> None:
    start = T0
    points = [(start + timedelta(minutes=i), float(v)) for i, v in enumerate([0, 5, 10])]
    svg = bar_chart(points, label='jobs <per> "minute"', css="throughput")
    assert svg.count('<rect class="bar"') == 3
    assert "&lt;per&gt;" in svg and "<per>" not in svg
    heights = [float(h) for h in re.findall(r'height="([\d.]+)"><title>', svg)]
    assert heights[0] == 0 and heights[2] == pytest.approx(2 * heights[1])


def test_parse_query_reads_times_as_utc_and_names_bad_ones() -> None:
    query = parse_query(
        {"time": ["attempted"], "since": ["2026-03-07T10:00"], "until": ["2026-03-07T13:00+02:00"]}
    )
    assert query.problems == ()
    criteria = query.criteria()
    assert criteria.attempted_after == datetime(2026, 3, 7, 10, tzinfo=UTC)
    assert criteria.attempted_before == datetime(2026, 3, 7, 11, tzinfo=UTC)  # 13:00 at +02:00
    assert ("time", "attempted") in query.params() and ("since", "2026-03-07T10:00") in query.params()
    odd = parse_query({"time": ["born"], "since": ["yesterday"], "worker": [".mail."]})
    assert odd.time == "scheduled" and odd.since is None and odd.workers == ()
    assert len(odd.problems) == 3
    backwards = parse_query({"since": ["2026-03-07T12:00"], "until": ["2026-03-07T10:00"]})
    assert backwards.since is None and backwards.until is None and backwards.problems


def test_a_queue_shows_the_limit_that_binds() -> None:
    def on(node: str, limit: int, global_limit: GlobalLimit | None) -> QueueInfo:
        return QueueInfo(node, "q", limit, 0, False, T0, T0, global_limit=global_limit)

    capped = QueueRow("q", (on("a", 3, GlobalLimit(2)), on("b", 3, GlobalLimit(2))))
    assert (capped.limit, capped.limit_kind, capped.local_limit) == (2, "global", 6)
    roomy = QueueRow("q", (on("a", 3, GlobalLimit(10)),))
    assert (roomy.limit, roomy.limit_kind) == (3, "local")
    per_tenant = QueueRow("q", (on("a", 3, GlobalLimit(1, partition="worker")),))
    assert (per_tenant.limit, per_tenant.limit_kind) == (3, "local")  # 1 per partition, not in all
    assert (QueueRow("q").limit, QueueRow("q").limit_kind) == (0, "local")
