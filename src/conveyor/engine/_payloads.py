"""Notification payloads in Oban's wire format.

Payloads written by SQL are plain JSON objects. oban-py compresses large ones: orjson, then gzip,
then base64. A reader tells them apart by the leading ``{``.
"""

from __future__ import annotations

import base64
import gzip
from typing import Any

import orjson

#: PostgreSQL refuses NOTIFY payloads of 8000 bytes or more.
MAX_PAYLOAD = 7999


def encode(payload: dict[str, Any]) -> str:
    text = orjson.dumps(payload)
    if len(text) <= MAX_PAYLOAD:
        return text.decode()
    return base64.b64encode(gzip.compress(text)).decode()


def decode(text: str) -> dict[str, Any] | None:
    """The payload as a dict, or None when it is neither JSON nor compressed JSON."""
    try:
        raw = text.encode() if text.startswith("{") else gzip.decompress(base64.b64decode(text))
        value = orjson.loads(raw)
    except (ValueError, OSError, EOFError):
        return None
    return value if isinstance(value, dict) else None
