"""The batch slot: takes reserved tasks one at a time from the type's feeder and
puts each through the steps of :mod:`fleet.worker.steps`, then settles it."""

from __future__ import annotations

import asyncio

from fleet.core import logs
from fleet.core.logs import bind_fields, reset_fields
from fleet.core.records import Reservation
from fleet.worker.outcomes import Outcome
from fleet.worker.settle import settle
from fleet.worker.slots import Slot
from fleet.worker.steps import admit, lease


class BatchSlot(Slot):
    """Reserve → admit → lease → run ``run_one`` → cleanup → settle, until stopped."""

    async def _main(self) -> None:
        feeder = self.env.feeder
        assert feeder is not None
        while not self.stopping:
            self.phase = "wait"
            try:
                res = await feeder.get()
            except asyncio.CancelledError:
                if self.take_cancel() is None:
                    raise
                break
            finally:
                self.phase = "idle"
            if res is None:
                break
            await self._handle(res)
        self.phase = "idle"

    async def _handle(self, res: Reservation) -> None:
        # Every line about this task, from admission to its settling, names it.
        body = res.body
        fields = (
            bind_fields(type=self.env.automation_type, task_id=body.id, attempt=body.attempt)
            if logs.STRUCTURED
            else None
        )
        self.attempt_started = None  # set when its run_one begins
        try:
            task = admit(self, res)
            outcome = task if isinstance(task, Outcome) else await lease(self, res, task)
            self.phase = "settle"
            await settle(self, res, outcome)
        finally:
            if fields is not None:
                reset_fields(fields)
