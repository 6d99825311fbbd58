"""Queue and job control signals in Oban's format, on the ``signal`` channel.

Payloads: ``{"action": "pause" | "resume", "queue": name or "*"}``, ``{"action": "scale", "queue",
"limit"}``, ``{"action": "start", "queue", "limit"}``, ``{"action": "stop", "queue"}``,
``{"action": "pkill", "job_id"}``; an ``ident`` of ``"any"`` (or absent) reaches every node,
``"<name>.<node>"`` one node. A scale may carry ``"global_limit"`` (an int or
``{"allowed", "partition"}``, or null to lift it) and ``"rate_limit"`` (``{"allowed", "period",
"partition"}``, or null), as Oban Pro's does.
"""

from __future__ import annotations

from typing import Any

from conveyor.errors import ValidationError
from conveyor.limits import FetchLimits, RateLimit

ACTIONS = ("pause", "resume", "scale", "start", "stop", "pkill")


def ident_for(name: str, node: str | None) -> str:
    return "any" if node is None else f"{name}.{node}"


def addressed_to(payload: dict[str, Any], name: str, node: str) -> bool:
    ident = payload.get("ident", "any")
    return ident in ("any", None) or ident == f"{name}.{node}"


def queue_signal(action: str, queue: str, node_ident: str, limit: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"action": action, "queue": queue, "ident": node_ident}
    if limit is not None:
        payload["limit"] = limit
    return payload


def limits_from_signal(payload: dict[str, Any], current: FetchLimits) -> FetchLimits | None:
    """The limits a scale signal asks for, from ``current``; None when it changes none (or carries
    values no node could apply: another client's junk is ignored, not applied halfway)."""
    if "global_limit" not in payload and "rate_limit" not in payload:
        return None
    try:
        global_limit = payload.get("global_limit", current.global_limit)
        rate = current.rate
        if "rate_limit" in payload:
            rate = RateLimit.build(payload["rate_limit"])
        return FetchLimits(global_limit=global_limit, rate=rate)
    except (ValidationError, TypeError):
        return None
