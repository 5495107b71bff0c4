"""A type runner following its config in and out of ``slots: "auto"``: the controller
runs only while the type runs slots, starts at ``min_slots``, and a fixed ``slots``
has none (every backend)."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend
from fleet.worker.runner import TypeRunner
from tests.plugins_fixture.echo import EchoAutomation
from tests.worker.support import wait_until

AUTO = {"slots": "auto", "min_slots": 2, "max_slots": 5}


async def test_the_controller_follows_the_config(backend: Backend) -> None:
    runner = TypeRunner(EchoAutomation, backend, "w-auto", grace=1)
    assert runner.apply(AUTO, 1)
    runner.start()
    try:
        assert runner.autoslots is not None
        assert len(runner.slots) == 2  # min_slots, before any window closed
        runner.set_draining(True)
        assert runner.autoslots is None
        await wait_until(lambda: not runner.slots, timeout=10, what="slots stopped")
        runner.set_draining(False)
        assert runner.autoslots is not None and runner.autoslots.target == 2
        assert len(runner.slots) == 2
        # Bounds that move: the count follows at once.
        assert runner.apply({**AUTO, "min_slots": 4}, 2)
        assert len([s for s in runner.slots.values() if not s.stopping]) == 4
        assert runner.apply({"slots": 3}, 3)
        assert runner.autoslots is None
        await wait_until(lambda: len(runner.slots) == 3, timeout=10, what="3 fixed slots")
        assert "autoslots" not in runner.stats(0.0, 0)
        assert runner.apply(AUTO, 4)
        await asyncio.sleep(0)
        assert runner.stats(0.0, 0)["autoslots"]["min_slots"] == 2
    finally:
        await runner.shutdown(1)
    assert runner.autoslots is None
