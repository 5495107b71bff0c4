"""The suspect gate: how a task lost unstarted with a worker before starts.

A suspect (``refunds > 0``) may be a task that kills its process at once, before
its start mark leaves, which a sweep cannot tell from the innocent tasks lost
beside it. So it starts only once the backend has its mark (one round trip, on
this rare path only): if it kills the process again, the loss is charged to it.
And it starts alone among its type's suspects on this worker: the others wait,
unmarked, until it ends or has run ``SUSPECT_PROBATION_SECONDS``, so its death
is not charged to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fleet.worker.leases import Lease, LeaseKeeper

#: How long a suspect task runs alone among its type's suspects on a worker
#: before the next one may start.
SUSPECT_PROBATION_SECONDS = 1.0


async def pass_gate(
    suspects: asyncio.Lock, keeper: LeaseKeeper, lease: Lease, logger: logging.Logger
) -> Callable[[], None] | None:
    """Wait for the gate ``suspects``, then for the lease's start mark.

    Returns:
        The gate's release (call it once the attempt is over; it may release
        earlier, after the probation), or None if the task must not run: its
        lease was lost (``lease.lost``), or the keeper closed.

    Raises:
        asyncio.CancelledError: Cancelled while waiting (the gate is not held).
    """
    await suspects.acquire()
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            suspects.release()

    try:
        marked = await keeper.mark_confirmed(lease)
    except asyncio.CancelledError:
        release()
        raise
    if marked is False:
        release()
        return None
    if marked is None:
        logger.warning(
            "task %s: its start mark was not confirmed in time; running it anyway",
            lease.task_id,
        )
    asyncio.get_running_loop().call_later(SUSPECT_PROBATION_SECONDS, release)
    return release
