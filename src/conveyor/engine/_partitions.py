"""Partition keys in SQL: the expression an engine evaluates on a job row to tell which partition of a
limit it belongs to (``conveyor.limits.Partition``), and the parameters that expression reads.

Only the *shape* of a partition (worker or not, how many args and meta keys) reaches the SQL text;
the key names travel as parameters, so no user string is ever pasted into a statement. An engine's
statements are cached per shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conveyor.limits import FetchLimits, Partition

#: The shape of a partition: (by worker, number of args keys, number of meta keys); None: none.
Shape = tuple[bool, int, int] | None


def shape_of(partition: Partition | None) -> Shape:
    return None if partition is None else (partition.worker, len(partition.args), len(partition.meta))


def limits_shape(limits: FetchLimits) -> tuple[Shape, Shape]:
    """The shapes of the global and the rate partition: what a partitioned claim's text depends on."""
    cap, rate = limits.global_limit, limits.rate
    return shape_of(cap.partition if cap else None), shape_of(rate.partition if rate else None)


@dataclass(frozen=True, slots=True)
class KeySyntax:
    """How one engine spells a partition key: a JSON array of the worker and the values read."""

    #: ``read(column, parameter)``: the JSON value under the key named by the parameter (NULL when
    #: absent or when the column is not an object).
    read: Callable[[str, str], str]
    #: ``array(items)``: the items as one text value, equal for equal partitions.
    array: Callable[[list[str]], str]
    #: The parameter's value for a key name (the name itself, or a JSON path to it).
    param: Callable[[str], str]
    #: The key of everything when a limit is not partitioned.
    whole: str = "''"


def key_sql(syntax: KeySyntax, shape: Shape, slot: str) -> str:
    """The partition key of a job row (columns unqualified) for a partition of ``shape``."""
    if shape is None:
        return syntax.whole
    by_worker, n_args, n_meta = shape
    items = ["worker"] if by_worker else []
    items += [syntax.read("args", f"{slot}_args_{i}") for i in range(n_args)]
    items += [syntax.read("meta", f"{slot}_meta_{i}") for i in range(n_meta)]
    return syntax.array(items)


def key_params(syntax: KeySyntax, partition: Partition | None, slot: str) -> dict[str, Any]:
    """The parameters ``key_sql`` reads for ``partition``."""
    if partition is None:
        return {}
    params = {f"{slot}_args_{i}": syntax.param(key) for i, key in enumerate(partition.args)}
    return params | {f"{slot}_meta_{i}": syntax.param(key) for i, key in enumerate(partition.meta)}


def partitioned_params(syntax: KeySyntax, limits: FetchLimits) -> dict[str, Any]:
    cap, rate = limits.global_limit, limits.rate
    return key_params(syntax, cap.partition if cap else None, "g") | key_params(
        syntax, rate.partition if rate else None, "r"
    )


def render(text: str, syntax: KeySyntax, shapes: tuple[Shape, Shape]) -> str:
    """``text`` with ``{global_key}`` and ``{rate_key}`` filled for the two shapes."""
    return text.replace("{global_key}", key_sql(syntax, shapes[0], "g")).replace(
        "{rate_key}", key_sql(syntax, shapes[1], "r")
    )


def scan_size(demand: int) -> int:
    """How many waiting jobs of unsaturated partitions a partitioned claim ranks: enough for the
    demand even when the first partitions in line have little room; a partition that fills up drops
    out of the scan at the next claim, so the ones behind it get their turn."""
    return demand * 4 + 100
