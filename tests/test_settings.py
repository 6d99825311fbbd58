"""Settings come from arguments, then CONVEYOR_* variables, then a config file, then defaults."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, ExecutorKind, QueueSettings, Settings, ValidationError
from conveyor.engines import default_database_url
from conveyor.settings import load_settings, parse_queues

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

    without_arguments = Conveyor(URL).settings
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
    settings = Conveyor(URL).settings
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
