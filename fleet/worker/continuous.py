"""The continuous slot: runs ``run_slot`` and respawns it with backoff until the
slot stops."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fleet.core.automation import ContinuousAutomation
from fleet.core.context import Context
from fleet.core.outage import is_outage
from fleet.worker.slots import Slot, SlotEnv

#: A continuous run shorter than this counts towards the respawn backoff.
SHORT_RUN_SECONDS = 30.0
#: After a backend outage, a respawned ``run_slot`` that runs this long without
#: raising counts as "backend back" (longer than a connect timeout, so a run
#: still waiting to fail does not count).
SETTLED_SECONDS = 5.0


class ContinuousSlot(Slot):
    """``run_slot`` → cleanup, respawned with backoff until the slot stops.

    ``run_slot`` and ``cleanup`` report an outage as one component, "<type>:
    slots", which only a lasting run declares over: after the outage a healthy
    ``run_slot`` may run for ever, so no later cleanup would say it was back.
    """

    def __init__(self, env: SlotEnv, ctx: Context[Any]) -> None:
        super().__init__(env, ctx)
        self._running = self._cleaning = f"{env.automation_type}: slots"

    def _cleaned(self) -> None:
        # A cleanup that never touches the backend returns even while it is down.
        pass

    async def _main(self) -> None:
        automation = self.env.automation
        assert isinstance(automation, ContinuousAutomation)
        short_runs = 0
        while not self.stopping:
            started = time.monotonic()
            self.stats.busy = True
            self.phase = "run"
            settled = self._watch_recovery()
            try:
                await self.ctx.proxy.ensure()
                await automation.run_slot(self.ctx)
                self.stats.completed += 1
                self.env.outages.recovered(self._running, certain=False, logger=self.ctx.logger)
                if not self.stopping:
                    self.ctx.logger.warning("run_slot returned; respawning it")
            except asyncio.CancelledError:
                if self.take_cancel() is None:
                    raise
            except Exception as exc:
                self.stats.failed += 1
                self.env.counters.failed += 1
                if is_outage(exc):
                    # The backend is down: one line per outage, not a traceback per respawn.
                    self.env.outages.failed(
                        self._running, exc, hint="respawning it", logger=self.ctx.logger
                    )
                else:
                    self.ctx.logger.exception("run_slot raised; respawning it")
            finally:
                if settled is not None:
                    settled.cancel()
                await self.ctx.proxy.release()
                # Identities its proxy tiers leased outside a use_identity round.
                await self.ctx.release_tier_identities(False)
            await self.run_cleanup()
            self.stats.busy = False
            if self.stopping:
                break
            short = time.monotonic() - started < SHORT_RUN_SECONDS
            short_runs = short_runs + 1 if short else 1
            self.phase = "sleep"
            try:
                await asyncio.sleep(self.env.policy.delay(short_runs))
            except asyncio.CancelledError:
                if self.take_cancel() is None:
                    raise
        self.phase = "idle"

    def _watch_recovery(self) -> asyncio.TimerHandle | None:
        """While the type's slots are in an outage: a timer that declares it over
        once this run has lasted ``SETTLED_SECONDS`` (a healthy ``run_slot`` may
        never return, so its return cannot be what tells)."""
        outages = self.env.outages
        if not outages.is_down(self._running):
            return None
        # A run that lasted proves nothing of the backend if it never called it: the
        # process's outage ends here only if no other loop still fails.
        return asyncio.get_running_loop().call_later(
            SETTLED_SECONDS,
            lambda: outages.recovered(self._running, certain=False, logger=self.ctx.logger),
        )
