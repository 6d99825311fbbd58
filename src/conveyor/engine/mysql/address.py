"""MySQL and MariaDB URLs: ``mysql://user:password@host:port/database`` (``mariadb://`` alike).

The database in the path is where Conveyor's tables live unless the engine's ``prefix`` names
another one (MySQL's databases play the part PostgreSQL's schemas do). SQLAlchemy's spellings
(``mysql+asyncmy://``, ``mysql+pymysql://``, ``mariadb+...``) are accepted, so one URL can serve both.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from conveyor.errors import ValidationError

SCHEMES = ("mysql", "mariadb")
FORMS = "mysql://user:password@host:3306/database or mariadb://user@host/database"
DEFAULT_PORT = 3306


def is_mysql_url(url: str) -> bool:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    return scheme.split("+", 1)[0].lower() in SCHEMES


@dataclass(frozen=True, slots=True)
class Address:
    """Where a MySQL/MariaDB server is, and as whom to connect."""

    host: str
    port: int
    user: str
    password: str
    database: str

    @property
    def url(self) -> str:
        """The URL again, with the password masked: for messages and ``--dsn`` hints."""
        secret = ":***" if self.password else ""
        return f"mysql://{self.user}{secret}@{self.host}:{self.port}/{self.database}"


def mask(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def parse(url: str) -> Address:
    """The address a ``mysql://`` or ``mariadb://`` URL names; refuses what it cannot use."""
    if not isinstance(url, str) or not is_mysql_url(url):
        raise ValidationError("database_url", url, f"not a MySQL URL; use {FORMS}")
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise ValidationError("database_url", mask(url), f"{exc}; use {FORMS}") from None
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise ValidationError("database_url", mask(url), f"must name one database; use {FORMS}")
    if parts.query or parts.fragment:
        raise ValidationError("database_url", mask(url), f"takes no query string; use {FORMS}")
    return Address(
        host=parts.hostname or "127.0.0.1",
        port=port,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
    )
