"""Encrypted args' keys and their display (issue 37): keys from arguments, environment or file,
bad keys refused naming their place in ``encryption_keys`` (never echoing them), keys never shown
by ``repr``, and encrypted args redacted wherever a job is shown."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from conveyor import JobState, ValidationError, job
from conveyor.cli.job_view import job_json
from conveyor.encryption import REDACTED, EncryptionError, Keyring, key_id, shown_args
from conveyor.settings import Settings, load_settings

KEY = base64.b64encode(os.urandom(32)).decode()
OTHER = base64.b64encode(os.urandom(32)).decode()


def test_keys_come_from_the_environment_newest_first(tmp_path: Path) -> None:
    settings = load_settings(environ={"CONVEYOR_ENCRYPTION_KEYS": f"{KEY}, {OTHER}"}, cwd=tmp_path)
    assert settings.encryption_keys == (KEY, OTHER)
    assert Keyring.from_setting(settings.encryption_keys).keys[0][0] == key_id(base64.b64decode(KEY))


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        (["not base64!"], "encryption_keys[0].*not base64"),
        (
            [KEY, base64.b64encode(b"sixteen bytes!!!").decode()],
            "encryption_keys[1].*16 bytes; AES-256 needs 32",
        ),
        ([KEY, KEY], "listed twice"),
        ([""], "encryption_keys[0]"),
    ],
)
def test_a_bad_key_is_refused_naming_its_place_never_showing_it(keys: list[str], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem.replace("[", r"\[").replace("]", r"\]")) as caught:
        load_settings({"encryption_keys": keys}, environ={}, cwd=Path("/nonexistent"))
    assert KEY not in str(caught.value)


def test_a_bad_key_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="CONVEYOR_ENCRYPTION_KEYS"):
        load_settings(environ={"CONVEYOR_ENCRYPTION_KEYS": "short"}, cwd=tmp_path)


def test_repr_shows_keys_by_id_only() -> None:
    shown = repr(Settings(encryption_keys=(KEY,)))
    assert KEY not in shown and key_id(base64.b64decode(KEY)) in shown


def test_the_option_takes_a_boolean() -> None:
    with pytest.raises(ValidationError, match="encrypted"):
        job(encrypted="yes")(lambda: None)  # type: ignore[call-overload]


def test_a_key_held_decrypts_a_key_missing_names_itself_a_tampered_row_does_not_verify() -> None:
    ring = Keyring.from_setting((KEY,))
    stored, mark = ring.encrypt({"card": "4111"})
    meta = {"encrypted": mark}
    assert ring.decrypt(stored, meta) == {"card": "4111"}
    with pytest.raises(EncryptionError, match=f"key {mark['key']}, which this node does not hold"):
        Keyring.from_setting((OTHER,)).decrypt(stored, meta)
    flipped = base64.b64decode(stored["data"])
    tampered = {**stored, "data": base64.b64encode(bytes([flipped[0] ^ 1]) + flipped[1:]).decode()}
    with pytest.raises(EncryptionError, match="do not verify"):
        ring.decrypt(tampered, meta)


def test_encrypted_args_are_redacted_where_a_job_is_shown() -> None:
    from datetime import UTC, datetime

    from conveyor.job import Job

    stored, mark = Keyring.from_setting((KEY,)).encrypt({"card": "4111"})
    now = datetime.now(UTC)
    row = Job(
        id=1, state=JobState.AVAILABLE, queue="default", worker="w", args=stored, meta={"encrypted": mark},
        tags=[], errors=[], attempt=0, max_attempts=1, priority=0, inserted_at=now, scheduled_at=now,
        attempted_by=[],
    )  # fmt: skip
    assert job_json(row)["args"] == REDACTED
    assert shown_args({"a": 1}, {}) == {"a": 1}


def test_conveyor_job_and_jobs_json_show_encrypted_args_redacted(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from conveyor import Conveyor
    from conveyor.cli import main
    from tests.conformance import encrypted_jobs as ej

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    app = Conveyor(url, encryption_keys=[KEY])
    app.install_sync()
    job_id = app.enqueue_sync(ej.charge.new(card="4111111111111111", tag="cli"))
    stored = app.get_job_sync(job_id)
    app.close_sync()
    assert stored is not None
    runner = CliRunner()
    for command in (["job", str(job_id)], ["job", str(job_id), "--json"], ["jobs", "--json"]):
        result = runner.invoke(main, [*command, "--dsn", url])
        assert result.exit_code == 0, result.output
        assert REDACTED in result.output and "4111111111111111" not in result.output
        assert stored.args["data"] not in result.output


def test_uniqueness_by_args_is_refused_for_an_encrypted_job_by_meta_it_works(tmp_path: Path) -> None:
    from conveyor import Conveyor, Unique
    from tests.conformance import encrypted_jobs as ej

    app = Conveyor(f"sqlite:///{tmp_path / 'u.db'}", encryption_keys=[KEY])
    app.install_sync()
    try:
        by_args = ej.charge.new(card="4111", tag="u").with_options(unique=True)
        with pytest.raises(ValidationError, match=r"stores its args encrypted.*unique by meta"):
            app.enqueue_sync(by_args)
        by_meta = Unique(fields=("worker", "meta"), keys=["order"])
        request = ej.charge.new(card="4111", tag="u").with_options(unique=by_meta, meta={"order": 7})
        first, second = app.enqueue_sync(request), app.enqueue_sync(request)
        assert second == first and second.conflict
    finally:
        app.close_sync()
