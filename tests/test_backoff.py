"""The default retry backoff: 15 + 2^attempt seconds plus up to 10% jitter, rescaled past 20 attempts."""

from __future__ import annotations

import random

import pytest

from conveyor.backoff import default_backoff


def bounds(exponent: int) -> tuple[float, float]:
    base = 15 + 2**exponent
    return base, base * 1.1


@pytest.mark.parametrize("attempt", range(1, 21))
def test_backoff_grows_exponentially_with_bounded_jitter(attempt: int) -> None:
    low, high = bounds(attempt)
    rng = random.Random(attempt)
    values = [default_backoff(attempt, 20, rng=rng) for _ in range(200)]
    assert all(low <= v <= high for v in values)
    assert max(values) - min(values) > 0  # jitter spreads retries of simultaneous failures


def test_seeded_backoff_is_reproducible_and_exact() -> None:
    draw = random.Random(42).random()
    assert default_backoff(3, 20, rng=random.Random(42)) == pytest.approx(23 + 23 * 0.1 * draw)
    assert default_backoff(3, 20, rng=random.Random(42)) == default_backoff(3, 20, rng=random.Random(42))


class ZeroRandom(random.Random):
    """Always draws 0.0 or 1.0, to read the base and the top of the jitter range."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "exponent"),
    [
        (10, 20, 10),  # 20 attempts: no rescaling
        (10, 40, 5),  # 10 / 40 * 20
        (40, 40, 20),  # the last attempt of 40 waits as long as the 20th of 20
        (1, 100, 0),  # int(1 / 100 * 20) == 0
        (99, 100, 19),  # int(19.8)
        (100, 100, 20),
        (21, 21, 20),
        (1, 21, 0),
    ],
)
def test_attempts_are_rescaled_when_max_attempts_exceeds_20(
    attempt: int, max_attempts: int, exponent: int
) -> None:
    low, high = bounds(exponent)
    assert default_backoff(attempt, max_attempts, rng=ZeroRandom(0.0)) == low
    assert default_backoff(attempt, max_attempts, rng=ZeroRandom(1.0)) == pytest.approx(high)
    rng = random.Random(7)
    assert all(low <= default_backoff(attempt, max_attempts, rng=rng) <= high for _ in range(50))


def test_rescaled_backoff_never_decreases_with_the_attempt() -> None:
    bases = [default_backoff(a, 1000, rng=ZeroRandom(0.0)) for a in range(1, 1001)]
    assert bases == sorted(bases)
    assert bases[0] == 16 and bases[-1] == 15 + 2**20


def test_exponent_is_capped_and_never_negative() -> None:
    assert default_backoff(50, 20, rng=ZeroRandom(0.0)) == 15 + 2**20
    assert default_backoff(0, 20, rng=ZeroRandom(0.0)) == 16
    assert default_backoff(-3, 20, rng=ZeroRandom(0.0)) == 16


def test_without_rng_the_module_random_is_used() -> None:
    random.seed(5)
    first = default_backoff(4, 20)
    random.seed(5)
    assert default_backoff(4, 20) == first
    assert 31 <= first <= 31 * 1.1
