"""Settings come from arguments, then CONVEYOR_* variables, then a config file, then defaults."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, ExecutorKind, QueueSettings, Settings, ValidationError
from conveyor.engine.urls import default_database_url
from conveyor.queue_settings import parse_queues
from conveyor.settings import load_settings

URL = "postgresql://someone@localhost/app"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No CONVEYOR_* variable of the developer's leaks in, and the working directory has no config."""
    for name in list(os.environ):
        if name.startswith("CONVEYOR_"):
            monkeypatch.delenv(name)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    yield workdir


def write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path


def test_defaults(clean_environment: Path) -> None:
    settings = Conveyor(URL).settings
    assert settings.database_url == URL
    assert settings.prefix == "public"
    assert settings.queues == ()
    assert settings.poll_interval == 1.0
    assert settings.notifications is True
    assert settings.shutdown_grace == 15.0
    assert settings.imports == ()
    assert settings.node != Conveyor(URL).settings.node  # unique per app


def test_arguments_beat_environment_beat_conveyor_toml(
    monkeypatch: pytest.MonkeyPatch, clean_environment: Path
) -> None:
    write(
        clean_environment / "conveyor.toml",
        """
        prefix = "from_file"
        poll_interval = 9.0
        stage_interval = 7.0
        shutdown_grace = 3.0
        queues = "file:1"
        """.replace("        ", ""),
    )
    monkeypatch.setenv("CONVEYOR_POLL_INTERVAL", "2.5")
    monkeypatch.setenv("CONVEYOR_PREFIX", "from_env")
    monkeypatch.setenv("CONVEYOR_QUEUES", "env:2")
    monkeypatch.setenv("CONVEYOR_NOTIFICATIONS", "off")

    settings = Conveyor(URL, poll_interval=0.5, queues={"args": 3}).settings
    assert settings.poll_interval == 0.5  # argument
    assert settings.queues == (QueueSettings("args", 3),)  # argument
    assert settings.prefix == "from_env"  # environment over file
    assert settings.notifications is False  # environment
    assert settings.stage_interval == 7.0  # file
    assert settings.shutdown_grace == 3.0  # file
    assert settings.ack_batch_size == Settings().ack_batch_size  # default

    without_arguments = Conveyor.from_config(URL).settings
    assert without_arguments.poll_interval == 2.5
    assert without_arguments.queues == (QueueSettings("env", 2),)


def test_arguments_given_as_none_do_not_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVEYOR_PREFIX", "from_env")
    assert Conveyor(URL, prefix=None).settings.prefix == "from_env"


def test_pyproject_tool_table(clean_environment: Path) -> None:
    write(
        clean_environment / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.conveyor]\nprefix = "from_pyproject"\n'
        'imports = ["myapp.jobs"]\n\n[tool.conveyor.queues]\ndefault = 4\n'
        'cpu = { limit = 2, executor = "process" }\n',
    )
    settings = Conveyor.from_config(URL).settings
    assert settings.prefix == "from_pyproject"
    assert settings.imports == ("myapp.jobs",)
    assert settings.queues == (
        QueueSettings("default", 4),
        QueueSettings("cpu", 2, ExecutorKind.PROCESS),
    )


def test_conveyor_toml_wins_over_pyproject(clean_environment: Path) -> None:
    write(clean_environment / "pyproject.toml", '[tool.conveyor]\nprefix = "from_pyproject"\n')
    write(clean_environment / "conveyor.toml", '[conveyor]\nprefix = "from_conveyor_toml"\n')
    assert Conveyor(URL).settings.prefix == "from_conveyor_toml"


def test_pyproject_without_a_conveyor_table(clean_environment: Path) -> None:
    write(clean_environment / "pyproject.toml", '[project]\nname = "x"\n')
    assert Conveyor(URL).settings.prefix == "public"


def test_config_from_environment_variable_and_argument(
    monkeypatch: pytest.MonkeyPatch, clean_environment: Path, tmp_path: Path
) -> None:
    write(clean_environment / "conveyor.toml", 'prefix = "local"\n')
    elsewhere = write(tmp_path / "elsewhere.toml", 'prefix = "elsewhere"\n')
    chosen = write(tmp_path / "chosen.toml", '[conveyor]\nprefix = "chosen"\n')
    monkeypatch.setenv("CONVEYOR_CONFIG", str(elsewhere))
    assert Conveyor(URL).settings.prefix == "elsewhere"
    assert Conveyor(URL, config_file=str(chosen)).settings.prefix == "chosen"


def test_database_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without any URL, the default: the SQLite file conveyor.db in the working directory.
    assert Conveyor().settings.database_url == default_database_url()
    monkeypatch.setenv("CONVEYOR_DATABASE_URL", URL)
    assert Conveyor().settings.database_url == URL


@pytest.mark.parametrize(
    ("variable", "text", "field", "expected"),
    [
        ("CONVEYOR_NOTIFICATIONS", "false", "notifications", False),
        ("CONVEYOR_NOTIFICATIONS", "1", "notifications", True),
        ("CONVEYOR_NOTIFICATIONS", "Yes", "notifications", True),
        ("CONVEYOR_POLL_INTERVAL", "3", "poll_interval", 3.0),
        ("CONVEYOR_STAGE_LIMIT", "250", "stage_limit", 250),
        ("CONVEYOR_THREADS", "8", "threads", 8),
        ("CONVEYOR_IMPORTS", "app.jobs, app.more ,", "imports", ("app.jobs", "app.more")),
        ("CONVEYOR_NODE", "worker-7", "node", "worker-7"),
        ("CONVEYOR_PROCESSES", "", "processes", None),  # empty means unset
        ("CONVEYOR_SYNCHRONOUS_COMMIT", "off", "synchronous_commit", False),
    ],
)
def test_environment_values_are_typed(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str, field: str, expected: Any
) -> None:
    monkeypatch.setenv(variable, text)
    assert getattr(Conveyor(URL).settings, field) == expected


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"poll_interval": -1}, "poll_interval"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"poll_interval": "soon"}, "poll_interval"),
        ({"shutdown_grace": True}, "shutdown_grace"),
        ({"stage_limit": 0}, "stage_limit"),
        ({"pool_size": 1.5}, "pool_size"),
        ({"synchronous_commit": "false"}, "synchronous_commit"),
        ({"synchronous_commit": 0}, "synchronous_commit"),
        ({"threads": 0}, "threads"),
        ({"processes": -2}, "processes"),
        ({"queues": "default:ten"}, "queues"),
        ({"queues": "default:0"}, "queues.default.limit"),
        ({"queues": "a:1,a:2"}, "queues"),
        ({"queues": "bad queue!:3"}, "queue"),
        ({"queues": {"mail": {"limit": 2, "executor": "gpu"}}}, "queues.mail.executor"),
        ({"queues": [3]}, "queues"),
        ({"pol_interval": 1}, "pol_interval"),
    ],
)
def test_bad_arguments_name_the_setting(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, **arguments)
    assert raised.value.field == field
    assert field in str(raised.value)


@pytest.mark.parametrize(
    ("variable", "text"),
    [
        ("CONVEYOR_POLL_INTERVAL", "soon"),
        ("CONVEYOR_NOTIFICATIONS", "maybe"),
        ("CONVEYOR_STAGE_LIMIT", "1.5"),
    ],
)
def test_bad_environment_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == variable


def test_bad_file_values_name_the_setting_and_the_file(clean_environment: Path) -> None:
    path = write(clean_environment / "conveyor.toml", "pol_interval = 1\n")
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == "pol_interval"
    assert str(path) in str(raised.value)

    write(path, 'poll_interval = "soon"\n')
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == "poll_interval"

    write(path, "poll_interval = \n")
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == "config_file"


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, config_file=str(tmp_path / "missing.toml"))
    assert raised.value.field == "config_file"


def test_queues_parse_from_text() -> None:
    assert parse_queues("default:10,mail:5") == (QueueSettings("default", 10), QueueSettings("mail", 5))
    assert parse_queues(" default , mail:3 ,") == (QueueSettings("default", 10), QueueSettings("mail", 3))
    assert parse_queues(["a:1", "b"]) == (QueueSettings("a", 1), QueueSettings("b", 10))


def test_queues_parse_from_a_mapping_with_executor() -> None:
    queues = parse_queues({"default": 10, "cpu": {"limit": 2, "executor": "process"}, "io": {"limit": 4}})
    assert queues == (
        QueueSettings("default", 10, ExecutorKind.AUTO),
        QueueSettings("cpu", 2, ExecutorKind.PROCESS),
        QueueSettings("io", 4, ExecutorKind.AUTO),
    )
    assert isinstance(queues[1].executor, ExecutorKind)


def test_thread_count_follows_queue_limits() -> None:
    assert Settings(queues=parse_queues("a:1")).thread_count == 4
    assert Settings(queues=parse_queues("a:30,b:20")).thread_count == 50
    assert Settings(queues=parse_queues("a:500")).thread_count == 100
    assert Settings(queues=parse_queues("a:500"), threads=7).thread_count == 7


def test_load_settings_with_explicit_sources(tmp_path: Path) -> None:
    write(tmp_path / "conveyor.toml", "poll_interval = 4.0\nstage_interval = 4.0\n")
    settings = load_settings(
        {"stage_interval": 1.0},
        environ={"CONVEYOR_POLL_INTERVAL": "2.0", "CONVEYOR_SHUTDOWN_GRACE": "3"},
        cwd=tmp_path,
    )
    assert (settings.poll_interval, settings.stage_interval, settings.shutdown_grace) == (2.0, 1.0, 3.0)


# -- strict validation (issue 10, point 6) ---------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "poll_interval",
        "stage_interval",
        "leader_ttl",
        "heartbeat_interval",
        "producer_timeout",
        "rescue_interval",
        "rescue_backstop",
        "prune_interval",
        "shutdown_grace",
        "cancel_grace",
        "ack_delay",
        "ack_max_delay",
        "prune_max_age",
    ],
)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -0.5, 1e300])
def test_durations_refuse_nan_infinity_negative_and_huge(name: str, value: float) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, **{name: value})
    assert raised.value.field == name


@pytest.mark.parametrize(
    "name",
    [
        "poll_interval",
        "stage_interval",
        "leader_ttl",
        "heartbeat_interval",
        "rescue_interval",
        "rescue_backstop",
        "prune_interval",
    ],
)
def test_intervals_refuse_zero(name: str) -> None:
    with pytest.raises(ValidationError, match="greater than 0") as raised:
        Conveyor(URL, **{name: 0})
    assert raised.value.field == name


def test_grace_and_ack_delay_may_be_zero() -> None:
    settings = Conveyor(URL, shutdown_grace=0, ack_delay=0, prune_max_age=0).settings
    assert (settings.shutdown_grace, settings.ack_delay, settings.prune_max_age) == (0, 0, 0)


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "0"])
def test_environment_poll_interval_nan_and_infinity_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("CONVEYOR_POLL_INTERVAL", text)
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == "CONVEYOR_POLL_INTERVAL"


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ('notifications = "false"', "notifications"),
        ("notifications = 0", "notifications"),
        ('leadership = "no"', "leadership"),
        ('prune = "true"', "prune"),
        ('poll_interval = "1"', "poll_interval"),
        ("poll_interval = nan", "poll_interval"),
        ("poll_interval = inf", "poll_interval"),
        ("stage_limit = 2.5", "stage_limit"),
        ('node = ""', "node"),
        ("node = 7", "node"),
        ("imports = 5", "imports"),
        ('prefix = "x"', None),  # control: a valid file loads
    ],
)
def test_file_values_are_typed_strictly_and_name_the_file(
    clean_environment: Path, line: str, name: str | None
) -> None:
    path = write(clean_environment / "conveyor.toml", line + "\n")
    if name is None:
        assert Conveyor(URL).settings.prefix == "x"
        return
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == name
    assert str(path) in str(raised.value)


def test_string_false_in_a_file_is_refused_not_read_as_true(clean_environment: Path) -> None:
    write(clean_environment / "conveyor.toml", '[conveyor]\nnotifications = "false"\n')
    with pytest.raises(ValidationError, match="must be true or false"):
        Conveyor(URL)


@pytest.mark.parametrize("node", ["", "   ", "a\x00b", "tab\there", "x" * 256])
def test_bad_node_names_are_refused(node: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, node=node)
    assert raised.value.field == "node"


def test_empty_node_from_the_command_line_is_refused(clean_environment: Path) -> None:
    from click.testing import CliRunner

    from conveyor.cli.main import main

    result = CliRunner().invoke(main, ["start", "--dsn", URL, "-q", "default", "--node", ""])
    assert result.exit_code == 2
    assert "invalid node=''" in result.output


@pytest.mark.parametrize(
    ("queues", "field"),
    [
        ({"mail": {"limit": 2, "concurrency": 3}}, "queues.mail.concurrency"),
        ({"mail": {"limt": 2}}, "queues.mail.limt"),
        ({"mail": True}, "queues.mail.limit"),
        ({"mail": "5"}, "queues.mail.limit"),
        (5, "queues"),
    ],
)
def test_bad_queue_entries_are_validation_errors(queues: Any, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, queues=queues)
    assert raised.value.field == field


def test_unknown_queue_key_in_a_file_names_the_key_and_the_file(clean_environment: Path) -> None:
    path = write(
        clean_environment / "conveyor.toml", "[conveyor.queues]\nmail = { limit = 2, workers = 4 }\n"
    )
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL)
    assert raised.value.field == "queues.mail.workers"
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("length", [52, 63, 64])
def test_prefixes_too_long_for_channel_names_are_refused(length: int) -> None:
    with pytest.raises(ValidationError, match="63-byte") as raised:
        Conveyor(URL, prefix="p" * length)
    assert raised.value.field == "prefix"


async def test_the_longest_prefix_installs_and_enqueues(dsn: str) -> None:
    """51 characters is the most that keeps '<prefix>.oban_insert' within 63 bytes: it works end to
    end, notification included."""
    import psycopg

    from conveyor import JobRequest

    prefix = "p" * 51
    app = Conveyor(dsn, prefix=prefix)
    try:
        await app.install()
        job_id = await app.enqueue(JobRequest("tests.Some", args={}))
        found = await app.get_job(job_id)
        assert found is not None
    finally:
        await app.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE'.encode())


# -- the role of the process (issue 10, point 7) -----------------------------------------------


def test_plain_conveyor_ignores_queues_from_the_file_and_environment(
    monkeypatch: pytest.MonkeyPatch, clean_environment: Path
) -> None:
    write(clean_environment / "conveyor.toml", 'prefix = "from_file"\nqueues = "mail:5"\n')
    web = Conveyor(URL)
    assert web.settings.queues == ()  # a web process: no node
    assert web.settings.prefix == "from_file"  # the other settings still apply
    worker = Conveyor.from_config(URL)
    assert worker.settings.queues == (QueueSettings("mail", 5),)
    assert Conveyor.from_config(URL, queues="other:1").settings.queues == (QueueSettings("other", 1),)
    assert Conveyor(URL, queues="args:2").settings.queues == (QueueSettings("args", 2),)

    monkeypatch.setenv("CONVEYOR_QUEUES", "env:3")
    assert Conveyor(URL).settings.queues == ()
    assert Conveyor.from_config(URL).settings.queues == (QueueSettings("env", 3),)


def test_configured_queues_are_still_validated(clean_environment: Path) -> None:
    write(clean_environment / "conveyor.toml", 'queues = "bad queue!:3"\n')
    with pytest.raises(ValidationError):
        Conveyor(URL)


async def test_a_web_app_in_a_worker_directory_runs_no_node(
    clean_environment: Path, dsn: str, prefix: str
) -> None:
    write(clean_environment / "conveyor.toml", f'prefix = "{prefix}"\n[conveyor.queues]\ndefault = 5\n')
    web = Conveyor(dsn)
    try:
        await web.install()
        async with web:
            assert web.node is None
    finally:
        await web.close()
    worker = Conveyor.from_config(dsn, poll_interval=0.2, shutdown_grace=0.5)
    try:
        async with worker:
            assert worker.node is not None
    finally:
        await worker.close()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"notifications": "false"}, "notifications"),
        ({"leadership": 1}, "leadership"),
        ({"prune": None, "prune_interval": float("nan")}, "prune_interval"),
        ({"name": ""}, "name"),
        ({"imports": [""]}, "imports"),
        ({"crontab": "0 * * * *"}, "crontab"),
        ({"pool_size": 2**40}, "pool_size"),
    ],
)
def test_arguments_are_typed_strictly_too(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Conveyor(URL, **arguments)
    assert raised.value.field == field


async def test_synchronous_commit_reaches_the_engine_an_app_builds(dsn: str) -> None:
    # On by default; off only when asked, and only for the hot pool's sessions (test_hot_path.py).
    assert Conveyor(dsn).settings.synchronous_commit is True
    app = Conveyor(dsn, synchronous_commit=False)
    try:
        engine = await app.engine()
        assert engine.hot_session["synchronous_commit"] == "off"  # type: ignore[attr-defined]
    finally:
        await app.close()
    default = Conveyor(dsn)
    try:
        assert "synchronous_commit" not in (await default.engine()).hot_session  # type: ignore[attr-defined]
    finally:
        await default.close()
