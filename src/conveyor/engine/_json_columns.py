"""JSON columns of Conveyor's own tables as both engines read them back.

A row may have been written by another client (Oban Pro, a hand edit): a column that is not a JSON
object reads as an empty one, so one bad row never stops the listing of the others.
"""

from __future__ import annotations

from typing import Any

import orjson


def json_mapping(value: object) -> dict[str, Any]:
    """A JSON column (jsonb already decoded by the driver, or text) as a dict; anything else {}."""
    if isinstance(value, str | bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}
