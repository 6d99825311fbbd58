"""Queue and job control signals in Oban's format, on the ``signal`` channel.

Payloads: ``{"action": "pause" | "resume", "queue": name or "*"}``, ``{"action": "scale", "queue",
"limit"}``, ``{"action": "start", "queue", "limit"}``, ``{"action": "stop", "queue"}``,
``{"action": "pkill", "job_id"}``; an ``ident`` of ``"any"`` (or absent) reaches every node,
``"<name>.<node>"`` one node.
"""

from __future__ import annotations

from typing import Any

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
