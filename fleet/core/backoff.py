"""Retry delays: exponential backoff with jitter, as plain functions."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass

#: Environment overrides of the task retry policy (seconds).
ENV_RETRY_BASE = "FLEET_RETRY_BASE_SECONDS"
ENV_RETRY_MAX = "FLEET_RETRY_MAX_SECONDS"


def backoff_delay(
    attempt: int,
    *,
    base: float = 1.0,
    cap: float = 300.0,
    jitter: float = 0.5,
    rand: Callable[[], float] = random.random,
) -> float:
    """The delay before retry number ``attempt`` (1 = after the first failure).

    The delay doubles with every attempt from ``base`` up to ``cap``; ``jitter``
    (0..1) takes up to that fraction off at random so that tasks failing together
    do not all come back in the same instant.

    Args:
        attempt: The attempt that just failed, starting at 1 (values < 1 count as 1).
        base: The first delay in seconds.
        cap: The largest delay in seconds.
        jitter: Fraction of the delay that is randomised (0 = deterministic).
        rand: Source of uniform numbers in [0, 1) (injectable for tests).

    Returns:
        Seconds to wait, in ``[(1 - jitter) * d, d]`` where ``d = min(cap, base * 2**(attempt-1))``.

    Raises:
        ValueError: If ``base``/``cap`` are negative or ``jitter`` is outside 0..1.
    """
    if base < 0 or cap < 0:
        raise ValueError("base and cap must be >= 0")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError("jitter must be within 0..1")
    exponent = min(max(attempt, 1) - 1, 62)  # 2**62 already dwarfs any cap
    delay = min(cap, base * float(2**exponent))
    return delay * (1.0 - jitter * rand())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long failed tasks and crashed continuous slots wait before the next try.

    Attributes:
        base: First delay (seconds).
        cap: Largest delay (seconds).
        jitter: Randomised fraction of each delay.
    """

    base: float = 1.0
    cap: float = 300.0
    jitter: float = 0.5

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """See :func:`backoff_delay`."""
        return backoff_delay(attempt, base=self.base, cap=self.cap, jitter=self.jitter, rand=rand)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> RetryPolicy:
        """The policy with ``FLEET_RETRY_BASE_SECONDS``/``FLEET_RETRY_MAX_SECONDS`` applied.

        Raises:
            ValueError: If a variable is set but not a non-negative number.
        """
        env = os.environ if environ is None else environ
        base = _env_float(env, ENV_RETRY_BASE, 1.0)
        cap = _env_float(env, ENV_RETRY_MAX, 300.0)
        return cls(base=base, cap=max(cap, base))


def _env_float(env: dict[str, str] | os._Environ[str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    value = float(raw)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {raw!r}")
    return value
