"""What the worker does with a ``Blocked`` left uncaught by ``run_one``
(docs/blocks.md#in-the-worker): a ``challenge`` or ``captcha`` goes to the type's
``solver`` first; unless solved, the identity is released as blocked (cooled
fleet-wide) and the exit reported bad; the task goes back without an attempt charged,
after ``retry_after`` when the site named one (a ``throttled`` verdict always waits)."""

from __future__ import annotations

from fleet.core.access.solvers import SolveFailed
from fleet.core.blocks.verdicts import Blocked, Challenge
from fleet.core.errors import ConfigError, FleetError, Throttled
from fleet.worker.outcomes import BLOCKED, Outcome, throttled
from fleet.worker.slots import Slot

#: How long a ``throttled`` verdict that names no ``Retry-After`` holds the task (s).
THROTTLED_WAIT = 5.0


async def _solve(slot: Slot, challenge: Challenge) -> bool:
    """Hand the challenge to the type's solver; True if it got past it. A client the
    task closed (``async with ctx.http()``) is replaced by a fresh one of the task's
    (same identity, exit and headers) holding its cookies."""
    ctx = slot.ctx
    met = challenge.client
    fresh = None
    if met is None or met.is_closed:
        fresh = ctx.http()
        if met is not None:
            fresh.cookies.update(met.cookies)
        challenge.client = fresh
    try:
        await ctx.solve(challenge)
        return True
    except (SolveFailed, ConfigError) as err:
        ctx.logger.warning("%s", err)
        return False
    finally:
        if fresh is not None and ctx.identity is None:  # an identity's closes at release
            await fresh.aclose()


async def settle_blocked(slot: Slot, exc: Blocked) -> Outcome:
    """The outcome of an uncaught block (its side effects done here)."""
    ctx = slot.ctx
    verdict = exc.verdict
    solved = False
    if exc.challenge is not None and ctx.config.solver:
        solved = await _solve(slot, exc.challenge)
    reason = f"{verdict.kind}" + (f" by {verdict.vendor}" if verdict.vendor else "")
    if not solved and verdict.kind != "throttled":
        try:
            identity = exc.identity if exc.identity is not None else ctx.identity
            if identity is not None:
                await identity.mark_blocked(reason, proxy=exc.proxy)
            elif exc.proxy is not None and exc.proxy == ctx.proxy.url:
                await ctx.proxy.report_bad(reason)  # the slot's own exit: it rotates away
            elif exc.proxy is not None:
                await ctx.proxy.report_url(exc.proxy, ok=False, reason=reason)
        except FleetError as err:  # the block still sends the task back
            ctx.logger.warning("block at %s not reported: %s", exc.domain, err)
    ctx.logger.info("%s%s: the task goes back uncharged", exc, " (solved)" if solved else "")
    if verdict.retry_after:
        return throttled(min(verdict.retry_after, Throttled.MAX_RETRY_AFTER))
    if verdict.kind == "throttled":
        return throttled(THROTTLED_WAIT)
    return BLOCKED
