"""Default retry backoff: exponential with jitter, as Oban computes it."""

from __future__ import annotations

import random

BASE_SECONDS = 15
JITTER = 0.10
#: Attempts beyond this are rescaled so jobs with many attempts still spread over a similar span.
SCALE_ATTEMPTS = 20
MAX_EXPONENT = 20


def default_backoff(attempt: int, max_attempts: int, *, rng: random.Random | None = None) -> float:
    """Seconds until the next attempt: 15 + 2^attempt, plus up to 10% jitter.

    When ``max_attempts`` exceeds 20 the attempt is first rescaled to attempt / max_attempts * 20.
    """
    if max_attempts > SCALE_ATTEMPTS:
        attempt = int(attempt / max_attempts * SCALE_ATTEMPTS)
    base = float(BASE_SECONDS + 2 ** min(max(attempt, 0), MAX_EXPONENT))
    return base + base * JITTER * (rng or random).random()
