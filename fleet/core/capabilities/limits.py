"""Limiters: fleet-wide rate and concurrency limits on calls (``ctx.limit``).

A limiter is named by a key (an API key, a site, a tenant) shared by every worker
of every automation type on the backend. It keeps two things:

* its *holders*: the tokens that hold a place (a call in flight), each until its
  hold expires; a hold that expires (its worker died or stalled without renewing)
  frees its place by itself;
* its *theoretical arrival time* (``tat``): the GCRA state of its rate, the
  earliest moment the next start is allowed (:func:`fleet.core.flow.next_tat`).

The limits themselves are not stored: each call passes its own ``interval`` and
``concurrency``, so callers sharing a key should pass the same ones (a caller with
a smaller cap counts the same holders against it). A place is recorded for every
acquire, with or without a concurrency cap, so a rate-only caller and a capped
caller on one key still see each other's calls in flight.

The state of a limiter goes away by itself once unused: expired holders are
dropped, and the ``tat`` is forgotten one interval after it passed (from then on
it no longer changes any answer). Times are Unix seconds (float) from
:func:`fleet.core.records.now`, as everywhere in the backends.
"""

from __future__ import annotations

import abc

#: The longest a concurrency-bound ``acquire`` asks its caller to wait before
#: trying again (seconds). The earliest hold to expire bounds the wait from above,
#: but a holder may release its place at any moment, so a waiter looks again after
#: at most this long: a freed place is taken within ~0.1 s, and each waiting caller
#: costs at most ~10 backend calls per second.
CONCURRENCY_RETRY_SECONDS = 0.1


class Limiters(abc.ABC):
    """Named fleet-wide limiters: a concurrency cap, a rate, or both."""

    @abc.abstractmethod
    async def acquire(
        self,
        key: str,
        token: str,
        *,
        interval: float | None,
        concurrency: int | None,
        hold_seconds: float,
    ) -> float:
        """Take a place in limiter ``key`` for ``token`` if both limits allow it now.

        Atomically, at the current time ``now``:

        1. Holders whose hold has expired (``until <= now``) are dropped.
        2. If ``token`` already holds a place (a retried call whose answer was
           lost), its hold is extended to ``now + hold_seconds`` and 0.0 is
           returned: a token never holds two places, and the rate is not charged
           twice.
        3. Concurrency: with ``concurrency`` set, a place is free if fewer than
           ``concurrency`` tokens hold one.
        4. Rate: with ``interval`` set, a start is allowed if ``tat <= now`` (a
           limiter never used, or forgotten, has ``tat`` 0).
        5. If both allow it, ``token`` becomes a holder until ``now +
           hold_seconds``, ``tat`` becomes ``next_tat(tat, now, interval)`` (with
           an ``interval``; else it is left alone) and 0.0 is returned.
        6. Otherwise nothing changes and the seconds until trying again makes
           sense (> 0) are returned: the largest of ``tat - now`` (rate; exact, as
           ``tat`` never moves back) and, if the holders are at the cap, the time
           until the earliest hold expires capped at
           :data:`CONCURRENCY_RETRY_SECONDS` (a holder may release sooner).

        Args:
            key: The limiter (any string; the ``ctx.limit`` handle validates it).
            token: The caller's place (fresh per acquisition, see
                :func:`fleet.core.records.new_token`).
            interval: Seconds between two starts (a rate's
                :attr:`~fleet.core.flow.Rate.interval`), or None for no rate.
            concurrency: The most holders at once (>= 1), or None for no cap.
            hold_seconds: How long the place is held without a renewal (> 0).

        Returns:
            0.0 if the place was taken, else the seconds to wait (> 0).
        """

    @abc.abstractmethod
    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        """Extend ``token``'s hold in limiter ``key`` to now + ``hold_seconds``.

        Returns:
            True if ``token`` held a place (its hold not expired), else False
            (nothing changes: an expired place is not taken back).
        """

    @abc.abstractmethod
    async def release(self, key: str, token: str) -> bool:
        """Free ``token``'s place in limiter ``key`` (the rate's ``tat`` stays).

        Returns:
            True if ``token`` held a place (its hold not expired), else False; a
            stale or unknown token changes nothing.
        """
