"""The arguments of ``age_priorities``, checked alike by every engine."""

from __future__ import annotations

import math
from typing import Any

from conveyor.errors import ValidationError


def check_aging(after: Any, limit: Any) -> None:
    """Refuse a threshold that is not a finite number of seconds >= 0, or a batch size below 1."""
    if isinstance(after, bool) or not isinstance(after, int | float) or not math.isfinite(after) or after < 0:
        raise ValidationError("after", after, "must be a finite number of seconds >= 0")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValidationError("limit", limit, "must be an integer >= 1")
