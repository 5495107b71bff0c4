"""The master's sweeper: visibility-expired reservations, due retries, expired pool
items, and the monitors of the newest runs (services/monitors.py).

Every ``sweep_seconds`` the sweeper of each master tries to take (or renew)
one backend lock with a lease; only the holder sweeps, so two masters side by
side never do the work twice, and if the holder dies its lease runs out and
another master takes over within a few periods.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from fleet.backends.base import Backend
from fleet.core.records import new_token, now
from fleet.master.services import monitors
from fleet.master.services.periodic import Periodic

log = logging.getLogger(__name__)

#: The lock every master's sweeper competes for (``fleet:lock:master-sweeper`` on Redis).
LOCK_NAME = "master-sweeper"
#: The lease lasts this many periods, so one slow tick does not lose the lock.
LEASE_PERIODS = 3


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did."""

    at: float
    types: int
    requeued: int
    pool_items_pruned: int


class Sweeper(Periodic):
    """Periodic sweeps of one master, guarded by the backend lock.

    Args:
        backend: The backend to sweep.
        period: Seconds between ticks (``FLEET_SWEEP_SECONDS``).
    """

    name = "sweeper"
    hint = "skipping sweeps until it is back"
    skipped = "sweep skipped: backend error (%s)"
    failed = "sweep failed"

    def __init__(self, backend: Backend, period: float) -> None:
        super().__init__(backend, period, log)
        self.token = new_token()
        self.leader = False
        self.sweeps = 0
        self.last: SweepReport | None = None

    @property
    def hold_seconds(self) -> float:
        return max(LEASE_PERIODS * self.period, 1.0)

    async def _hold_lock(self) -> bool:
        if self.leader:
            self.leader = await self.backend.locks.renew(LOCK_NAME, self.token, self.hold_seconds)
        if not self.leader:
            self.leader = await self.backend.locks.acquire(LOCK_NAME, self.token, self.hold_seconds)
        return self.leader

    async def tick(self) -> SweepReport | None:
        """Sweep once if this master holds (or can take) the lock.

        Returns:
            The report, or None if another master holds the lock.
        """
        if not await self._hold_lock():
            return None
        types = set(await self.backend.catalog.all())
        types.update(t for t, _ in await self.backend.workers.all())
        requeued = 0
        for automation_type in sorted(types):
            requeued += await self.backend.queues.sweep(automation_type)
        pruned = 0
        for name in await self.backend.pools.names():
            pruned += await self.backend.pools.prune(name)
        await monitors.tick(self.backend)
        self.sweeps += 1
        self.last = SweepReport(
            at=now(), types=len(types), requeued=requeued, pool_items_pruned=pruned
        )
        if requeued or pruned:
            log.info(
                "sweep: re-queued %d expired reservations, pruned %d pool items", requeued, pruned
            )
        return self.last

    def on_backend_error(self) -> None:
        self.leader = False  # the lock may have run out meanwhile: take it again

    async def stop(self) -> None:
        """Stop ticking and give the lock up so another master can take over at once."""
        await super().stop()
        if self.leader:
            with contextlib.suppress(Exception):
                await self.backend.locks.release(LOCK_NAME, self.token)
            self.leader = False
