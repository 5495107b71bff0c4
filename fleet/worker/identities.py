"""A batch task's identity (``identity_pool`` in its type's config): leased before
``run_one`` in one atomic backend step, renewed while the task runs, released after it
with what the task learned (:mod:`fleet.core.identity`). A block or a retirement is
published on :data:`~fleet.core.identity.IDENTITIES_TOPIC` (the master's event stream
relays it as the event ``identity``)."""

from __future__ import annotations

from typing import Any

from fleet.core.identity import (
    IDENTITIES_TOPIC,
    IdentityHandle,
    IdentityPolicy,
    NoIdentity,
    lease_waiting,
)
from fleet.worker.outcomes import OK, Outcome, throttled
from fleet.worker.slots import Slot

#: How long a task that found no usable identity waits before it is tried again (s).
RETRY_WITHOUT_IDENTITY = 5.0


def policy_of(slot: Slot) -> IdentityPolicy | None:
    """The type's identity settings now (None: it leases no identities)."""
    cfg = slot.env.config()
    if cfg.identity_pool is None:
        return None
    return IdentityPolicy(
        pool=cfg.identity_pool,
        max_concurrency=cfg.identity_max_concurrency,
        cooldown_seconds=cfg.identity_cooldown_seconds,
        retire_after=cfg.identity_retire_after,
        lease_seconds=cfg.identity_lease_seconds,
        wait_seconds=cfg.identity_wait_seconds,
    )


async def take(slot: Slot) -> Outcome | None:
    """Lease the task's identity into ``ctx.identity``; the outcome that ends the task
    instead (``throttled``: none became usable in time), or None."""
    policy = policy_of(slot)
    if policy is None:
        return None
    identities = slot.env.backend.identities
    try:
        lease = await lease_waiting(identities, policy)
    except NoIdentity as exc:
        slot.ctx.logger.warning("%s; the task goes back uncharged", exc)
        return throttled(RETRY_WITHOUT_IDENTITY)
    proxy = slot.ctx.proxy
    events = slot.env.backend.events

    async def report(url: str, reason: str) -> None:
        await proxy.report_url(url, ok=False, reason=reason)

    async def tell(event: dict[str, Any]) -> None:
        await events.publish(IDENTITIES_TOPIC, event)

    handle = IdentityHandle(identities, policy, lease, on_blocked=report, on_event=tell)
    handle.browser = slot.ctx.browser
    handle.start_renewing()
    slot.ctx.identity = handle
    return None


async def give_back(slot: Slot, outcome: Outcome | None) -> None:
    """Release the task's identity, if it holds one (``ok`` unless the task said
    otherwise, when it succeeded)."""
    handle = slot.ctx.identity
    if handle is None:
        return
    slot.ctx.identity = None
    await handle.finish(outcome is OK)
