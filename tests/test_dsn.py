"""Connection strings (issue 32.3): libpq's key=value form works like a URL, a password never shows
in an error or a log line (from the app or the CLI), and an unencoded special character in a URL's
password gets a hint about percent-encoding instead of a confusing failure."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conveyor import Conveyor, JobRequest
from conveyor.engine.postgres import dsn as pg_dsn
from conveyor.engine.urls import engine_from_url
from conveyor.errors import ConveyorError, ValidationError
from tests.conftest import DSN
from tests.test_cli_errors import conveyor

SECRET = "Sekr1tPw"
_server = urlsplit(DSN)
HOST, PORT, USER = _server.hostname or "127.0.0.1", _server.port or 5432, _server.username or "postgres"
DATABASE = _server.path.lstrip("/") or "test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = free_port()

#: Strings that fail (to parse, or to connect), each holding the password (or pieces of it).
FAILING = {
    "url-closed-port": f"postgresql://{USER}:{SECRET}@{HOST}:{CLOSED}/{DATABASE}",
    "url-no-database": f"postgresql://{USER}:{SECRET}@{HOST}:{PORT}/conveyor_no_such_db",
    "url-no-role": f"postgresql://conveyor_no_such_role:{SECRET}@{HOST}:{PORT}/{DATABASE}",
    "url-query-password": f"postgresql://{USER}@{HOST}:{CLOSED}/{DATABASE}?password={SECRET}",
    "url-slash": f"postgresql://{USER}:Sekr1t/{SECRET}@{HOST}:{PORT}/{DATABASE}",
    "url-at": f"postgresql://{USER}:Sekr1t@{SECRET}@{HOST}:{PORT}/{DATABASE}",
    "url-bad-percent": f"postgresql://{USER}:{SECRET}%zz@{HOST}:{PORT}/{DATABASE}",
    "url-blank": f"postgresql://{USER}:Sekr1t {SECRET}@{HOST}:{PORT}/{DATABASE}",
    "url-bad-option": f"postgresql://{USER}:{SECRET}@{HOST}:{PORT}/{DATABASE}?sslmode=bogus",
    "kv-closed-port": f"host={HOST} port={CLOSED} user={USER} password={SECRET} dbname={DATABASE}",
    "kv-no-database": f"host={HOST} port={PORT} user={USER} password={SECRET} dbname=conveyor_no_such_db",
    "kv-quoted": f"host={HOST} port={CLOSED} user={USER} password='{SECRET} x' dbname={DATABASE}",
    "kv-unquoted-blank": f"host={HOST} port={PORT} user={USER} password=Sekr1t {SECRET} dbname={DATABASE}",
    "kv-unterminated": f"host={HOST} port={PORT} password='{SECRET}",
    "kv-typo": f"host={HOST} port={PORT} pasword={SECRET}",
}


def leaks(text: str) -> bool:
    return SECRET in text or "Sekr1t" in text


def test_a_key_value_string_builds_a_postgres_engine(prefix: str) -> None:
    engine = engine_from_url(f"host={HOST} port={PORT} user={USER} dbname={DATABASE}", prefix=prefix)
    assert engine.name == "postgres"


async def test_the_key_value_form_connects_and_enqueues(prefix: str) -> None:
    # A password the trust-authenticated test server ignores: present as platforms hand it out.
    kv = f"host={HOST} port={PORT} user={USER} password='{SECRET} x' dbname={DATABASE}"
    app = Conveyor(kv, prefix=prefix)
    try:
        await app.install()
        job_id = await app.enqueue(JobRequest("a.b"))
        assert (await app.get_job(job_id)).worker == "a.b"
    finally:
        await app.close()


@pytest.mark.parametrize("name", sorted(FAILING))
async def test_no_error_or_log_line_shows_the_password(
    name: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises((ConveyorError, ValueError)) as raised:
        app = Conveyor(FAILING[name], prefix=prefix, queues={"default": 1})
        try:
            await app.start()
        finally:
            await app.close()
    shown = [str(raised.value), repr(raised.value)] + [r.getMessage() for r in caplog.records]
    assert not [text for text in shown if leaks(text)], shown


@pytest.mark.parametrize("name", ["url-slash", "url-at", "url-bad-percent", "url-blank"])
def test_an_unencoded_character_in_a_url_password_gets_a_hint(name: str) -> None:
    with pytest.raises(ValidationError, match="percent-encode") as raised:
        Conveyor(FAILING[name])
    assert "***" in str(raised.value) and not leaks(str(raised.value))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p%40ss%2F1@h:5432/db?application_name=a@b",
        "postgresql://u@h:5432/db?application_name=a@b",
        "postgresql://u:pw:with:colons@h1,h2/db?target_session_attrs=read-write",
    ],
)
def test_valid_urls_with_special_characters_elsewhere_are_accepted(url: str) -> None:
    assert pg_dsn.check(url) == url


def test_a_blank_in_an_unquoted_key_value_password_gets_a_hint() -> None:
    with pytest.raises(ValidationError, match="single-quoted") as raised:
        Conveyor(FAILING["kv-unquoted-blank"])
    assert not leaks(str(raised.value))


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("postgresql://u:p%40ss@h1:5432,h2/db", "postgresql://u:***@h1:5432,h2/db"),
        (
            "postgresql://u@h/db?sslmode=require&password=x1",
            "postgresql://u@h/db?sslmode=require&password=***",
        ),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("host=h password='a b' dbname=d", "host=h password=*** dbname=d"),
        ("host=h password = x dbname=d", "host=h password = *** dbname=d"),
    ],
)
def test_mask(text: str, masked: str) -> None:
    assert pg_dsn.mask(text) == masked


@pytest.mark.parametrize("name", ["url-closed-port", "url-slash", "kv-closed-port", "kv-unquoted-blank"])
def test_the_cli_never_prints_the_password(name: str, tmp_path: Path) -> None:
    for args in (["jobs", "--dsn", FAILING[name]], ["install", "--dsn", FAILING[name]]):
        run = conveyor(*args, cwd=tmp_path)
        assert run.code != 0
        assert "Error:" in run.err
        assert not leaks(run.out + run.err), run.err


def test_the_settings_repr_masks_the_password() -> None:
    app = Conveyor(FAILING["url-closed-port"])
    assert "database_url='postgresql://postgres:***@" in repr(app.settings)
    assert not leaks(repr(app.settings))
