"""Connection strings: both forms libpq reads (``postgresql://user:pw@host/db`` and the key=value
``host=... password=...`` many platforms hand out), checked before anything connects, and never
shown with their password.

A password can reach a message in three ways: Conveyor quoting the string (a ``ValidationError``),
libpq quoting a piece of it (``invalid percent-encoded token: "p%zz"``, ``missing "=" after "x"``),
or a log line quoting such an error. ``mask`` covers the first, ``scrub`` the others.
"""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote

from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict

from conveyor.errors import ValidationError

#: The URL schemes of PostgreSQL (SQLAlchemy's ``postgresql+psycopg`` too, so one URL serves both).
SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
#: What a password is replaced by wherever a connection string or an error is shown.
MASK = "***"

# key=value: the value of password (or of a misspelt key meant as one: pasword, passwd, pw), quoted
# ('a\'b'), else up to the next key: in "password=two words dbname=x" libpq takes "two" alone and
# fails on "words", which is the password's too.
_KEYWORD_PASSWORD = re.compile(
    r"(\b\w*(?:pas|pw)\w*\s*=\s*)('(?:[^'\\]|\\.)*'?|.*?(?=\s+\w+\s*=|\s*$))", re.IGNORECASE
)
# A URL's query parameter (postgresql://host/db?password=...).
_QUERY_PASSWORD = re.compile(r"([?&]\w*(?:pas|pw)\w*=)([^&#]*)", re.IGNORECASE)
_KEYWORD_START = re.compile(r"\s*[A-Za-z_]+\s*=")
# In a URL's password, these end or split the password for libpq unless percent-encoded.
_URL_SPECIAL = frozenset(" /?#@[]")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def is_keyword_form(text: str) -> bool:
    """True for a libpq key=value string (``host=db.internal dbname=app``), not a URL."""
    return "://" not in text and _KEYWORD_START.match(text) is not None


def is_postgres(text: str) -> bool:
    return text.startswith(SCHEMES) or is_keyword_form(text)


def _url_userinfo(text: str) -> tuple[str, str, str] | None:
    """``(scheme://user, password, @rest)`` of a URL holding a password, or None. The userinfo
    ends at the last ``@``, so that a password with an unencoded ``@`` or ``/`` is still found
    (and masked whole) where libpq would split it."""
    scheme, sep, rest = text.partition("://")
    at, query = rest.rfind("@"), rest.find("?")
    if 0 <= query < at and "=" in rest[query:at]:
        at = rest.rfind("@", 0, query)  # that "@" is in a parameter (application_name=a@b)
    if not sep or at < 0 or ":" not in rest[:at]:
        return None
    user, _, password = rest[:at].partition(":")
    return f"{scheme}://{user}", password, rest[at:]


def mask(text: str) -> str:
    """``text`` with every password in it replaced by ``***``: the URL's userinfo and its
    ``password`` parameter, and the key=value ``password``."""
    if not isinstance(text, str):
        return text
    if is_keyword_form(text):
        return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    parts = _url_userinfo(text)
    if parts is not None:
        text = f"{parts[0]}:{MASK}{parts[2]}"
    return _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


def secrets(text: str) -> list[str]:
    """Every spelling of the passwords in ``text`` a message could quote (as written, decoded),
    longest first."""
    found: set[str] = set()
    if is_keyword_form(text):
        for match in _KEYWORD_PASSWORD.finditer(text):
            raw = match.group(2)
            found.add(raw)
            if raw.startswith("'"):
                found.add(re.sub(r"\\(.)", r"\1", raw.strip("'")))
    else:
        parts = _url_userinfo(text)
        raws = [parts[1]] if parts is not None else []
        raws += [m.group(2) for m in _QUERY_PASSWORD.finditer(text)]
        for raw in raws:
            found.update((raw, unquote(raw)))
    with contextlib.suppress(ProgrammingError):
        found.add(str(conninfo_to_dict(text).get("password") or ""))
    # libpq may quote a word of a password it split at a blank.
    found.update(word for secret in list(found) for word in secret.split())
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(message: str, dsn: str) -> str:
    """``message`` (an error, a log line) with the passwords of ``dsn`` masked out."""
    for secret in secrets(dsn):
        if len(secret) >= 4:
            message = message.replace(secret, MASK)
        else:  # a short one only where it stands alone, not inside every word holding it
            message = re.sub(rf"(?<![\w%]){re.escape(secret)}(?![\w%])", MASK, message)
    return message


def check(text: str, field: str = "database_url") -> str:
    """The connection string psycopg is given for ``text`` (a ``postgresql://`` URL or key=value
    pairs), after libpq's own parser accepted it; else ``ValidationError`` (for the setting
    ``field``) naming what is wrong, with the password masked."""
    dsn = text.replace("postgresql+psycopg://", "postgresql://", 1)
    if not is_keyword_form(dsn):
        parts = _url_userinfo(dsn)
        if parts is not None:
            special = sorted(_URL_SPECIAL.intersection(parts[1]))
            if special or _BAD_PERCENT.search(parts[1]):
                shown = " ".join(repr(c) for c in special) or "a '%' that starts no %XX escape"
                raise ValidationError(
                    field,
                    mask(text),
                    f"the password holds {shown}, which a URL must percent-encode: write it "
                    "encoded (urllib.parse.quote(password, safe=''): 'p@ss/word' is "
                    "'p%40ss%2Fword'), or use the key=value form (host=... password=...), or a "
                    "~/.pgpass file",
                )
    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        problem = scrub(str(exc).strip(), text)
        if problem.startswith('missing "=" after'):
            # libpq quotes the word, which may be the rest of a password holding a blank.
            problem = (
                "a word stands without '=' (in the key=value form a value holding blanks must be "
                "single-quoted: password='two words')"
            )
        raise ValidationError(field, mask(text), problem) from None
    return dsn
