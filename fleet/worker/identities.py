"""A batch task's identity (``identity_pool`` in its type's config): leased before
``run_one`` in one atomic backend step, renewed while the task runs, released after it
with what the task learned (:mod:`fleet.core.identity`). A block or a retirement is
published on :data:`~fleet.core.identity.IDENTITIES_TOPIC` (the master's event stream
relays it as the event ``identity``)."""

from __future__ import annotations

from fleet.core.identity import NoIdentity, leased_handle, policy_of
from fleet.worker.outcomes import OK, Outcome, throttled
from fleet.worker.slots import Slot

#: How long a task that found no usable identity waits before it is tried again (s).
RETRY_WITHOUT_IDENTITY = 5.0


async def take(slot: Slot) -> Outcome | None:
    """Lease the task's identity into ``ctx.identity``; the outcome that ends the task
    instead (``throttled``: none became usable in time), or None."""
    policy = policy_of(slot.env.config())
    if policy is None:
        return None
    try:
        handle = await leased_handle(
            slot.env.backend,
            policy,
            proxy=slot.ctx.proxy,
            browser=slot.ctx.browser,
            access=slot.ctx.access,
        )
    except NoIdentity as exc:
        slot.ctx.logger.warning("%s; the task goes back uncharged", exc)
        return throttled(RETRY_WITHOUT_IDENTITY)
    slot.ctx.identity = handle
    return None


async def give_back(slot: Slot, outcome: Outcome | None) -> None:
    """Release the task's identity, if it holds one (``ok`` unless the task said
    otherwise, when it succeeded)."""
    if slot.ctx.holds_tier_identities:  # most tasks lease none: no await for them
        await slot.ctx.release_tier_identities(outcome is OK)
    handle = slot.ctx.identity
    if handle is None:
        return
    slot.ctx.identity = None
    await handle.finish(outcome is OK)
