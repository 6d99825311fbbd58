"""Conveyor's own JSON columns (stored cron entries, declared queues) as the engines read them: a
value another client stored that is not a JSON object reads as an empty one, never an error that
would stop the listing of every other row."""

from __future__ import annotations

import pytest

from conveyor.fleet import json_mapping


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ({"queue": "q"}, {"queue": "q"}),  # jsonb, decoded by the driver
        ('{"queue": "q"}', {"queue": "q"}),  # SQLite text
        (b'{"queue": "q"}', {"queue": "q"}),
        ([1, 2], {}),  # jsonb array: psycopg hands a list (orjson.loads of it raised TypeError)
        ("[1, 2]", {}),
        ("{not json", {}),  # hand-edited text (it raised JSONDecodeError)
        ("", {}),
        (None, {}),
        (42, {}),
    ],
)
def test_a_json_column_reads_as_a_dict_or_empty(stored: object, read: dict[str, object]) -> None:
    assert json_mapping(stored) == read
