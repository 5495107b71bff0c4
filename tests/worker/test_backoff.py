"""Retry backoff: doubling, cap, jitter bounds, environment policy."""

from __future__ import annotations

import pytest

from fleet.core.backoff import RetryPolicy, backoff_delay


def test_delay_doubles_per_attempt_without_jitter() -> None:
    delays = [backoff_delay(a, base=0.5, cap=100, jitter=0) for a in range(1, 6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0]


def test_delay_is_capped_and_huge_attempts_do_not_overflow() -> None:
    assert backoff_delay(10, base=1, cap=30, jitter=0) == 30
    assert backoff_delay(10_000, base=1, cap=30, jitter=0) == 30
    assert backoff_delay(0, base=2, cap=30, jitter=0) == 2  # attempt < 1 counts as 1


@pytest.mark.parametrize("u", [0.0, 0.25, 0.999])
def test_jitter_takes_off_at_most_its_fraction(u: float) -> None:
    d = backoff_delay(3, base=1, cap=100, jitter=0.5, rand=lambda: u)
    assert 2.0 <= d <= 4.0
    assert d == pytest.approx(4.0 * (1 - 0.5 * u))


def test_jitter_spreads_real_random_delays() -> None:
    delays = {backoff_delay(4, base=1, cap=100) for _ in range(50)}
    assert len(delays) > 10
    assert all(4.0 <= d <= 8.0 for d in delays)


def test_invalid_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        backoff_delay(1, jitter=1.5)
    with pytest.raises(ValueError):
        backoff_delay(1, base=-1)


def test_policy_from_env() -> None:
    p = RetryPolicy.from_env({"FLEET_RETRY_BASE_SECONDS": "0.05", "FLEET_RETRY_MAX_SECONDS": "2"})
    assert (p.base, p.cap) == (0.05, 2.0)
    assert p.delay(20, rand=lambda: 0.0) == 2.0
    assert RetryPolicy.from_env({}) == RetryPolicy()
    with pytest.raises(ValueError):
        RetryPolicy.from_env({"FLEET_RETRY_BASE_SECONDS": "-1"})
