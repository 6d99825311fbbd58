"""Jobs whose args are stored encrypted (``@job(encrypted=True)``), for the encryption contract."""

from __future__ import annotations

from conveyor import job

#: What the jobs saw, by ``tag``: the plaintext args reach the code.
SEEN: dict[str, dict[str, str]] = {}


@job(queue="default", max_attempts=1, encrypted=True, record=True)
async def charge(card: str, tag: str) -> str:
    SEEN[tag] = {"card": card}
    return card[-4:]


@job(queue="default", max_attempts=1, encrypted=True)
def charge_in_thread(card: str, tag: str) -> None:
    SEEN[tag] = {"card": card}


@job(queue="default", max_attempts=1)
async def ping(tag: str) -> None:
    """A plain job: the node that declined an encrypted one still runs the rest."""
    SEEN[tag] = {}
