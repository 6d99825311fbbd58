"""``JobIds`` as a psycopg parameter: ``WHERE id = ANY(%s)`` takes the ids ``enqueue_many`` returned,
as it took a list of ints.

psycopg adapts a ``list`` by its type only, and a ``JobIds`` is no list (it keeps 8 bytes an id).
Its dumpers go into psycopg's global adapters map, keyed by ``JobIds`` alone: no other type is
dumped differently, and a dumper the application registered for ``JobIds`` first is kept. They
write a ``bigint[]`` straight from the ids' array, in text or binary (psycopg's default for ``%s``).
``job_ids`` registers them once psycopg is imported (never importing it itself: an application on
SQLite does not pay for it)."""

from __future__ import annotations

import itertools
import struct

import psycopg
from psycopg import errors
from psycopg.adapt import Dumper, PyFormat
from psycopg.pq import Format

from conveyor.job_ids import JobIds, id_array

#: PostgreSQL's ``bigint`` and ``bigint[]`` types.
INT8_OID = 20
INT8_ARRAY_OID = 1016
#: A one-dimensional array without nulls, of ``bigint`` (binary format): dimensions, has-nulls, the
#: element type, then the length and lower bound of the dimension; each element its length and value.
_HEADER = struct.Struct("!iiIii")
_EMPTY = struct.pack("!iiI", 0, 0, INT8_OID)
_ITEM = struct.Struct("!iq")


class JobIdsTextDumper(Dumper):
    oid = INT8_ARRAY_OID

    def dump(self, obj: JobIds) -> bytes:
        return b"{" + ",".join(map(str, id_array(obj))).encode() + b"}"


class JobIdsBinaryDumper(Dumper):
    oid = INT8_ARRAY_OID
    format = Format.BINARY

    def dump(self, obj: JobIds) -> bytes:
        ids = id_array(obj)
        if not ids:
            return _EMPTY
        items = b"".join(map(_ITEM.pack, itertools.repeat(8, len(ids)), ids))
        return _HEADER.pack(1, 0, INT8_OID, len(ids), 1) + items


def register() -> None:
    """Add the dumpers to psycopg's global adapters map, unless ``JobIds`` has one there already."""
    try:
        psycopg.adapters.get_dumper(JobIds, PyFormat.AUTO)
    except errors.ProgrammingError:
        psycopg.adapters.register_dumper(JobIds, JobIdsTextDumper)
        psycopg.adapters.register_dumper(JobIds, JobIdsBinaryDumper)  # last: what %s uses
