"""What a process meters for a type, priced and sent to the backend's ``meters``
(docs/costs.md).

Each slot's running task meters into the type's :class:`MeterBook` as it goes: its
HTTP traffic (requests and bytes each way, by domain and proxy tier), solver calls,
browser-seconds, a plugin's own units (``ctx.meter``), and at its end one attempt and
its run-seconds. The book adds each amount to the scopes it belongs to — the type, the
task's run, the domain, the identity pools the task held, the type's current hour — with
its price (``spend``) beside it, and sends what it holds every :data:`FLUSH_SECONDS` in
one backend step — at once, before its ack, when the attempt's run has a budget
(:meth:`MeterBook.settle`). A worker killed with SIGKILL loses what it held: at most the
last :data:`FLUSH_SECONDS` of its meters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fleet.core.errors import FleetError
from fleet.core.flushing import LaterFlush
from fleet.core.meters import (
    HOUR,
    MeterBatch,
    domain_scope,
    hour_scope,
    hour_start,
    pool_scope,
    run_scope,
    split_meter,
    type_scope,
)

if TYPE_CHECKING:
    from fleet.core.capabilities.meters import Meters
    from fleet.core.capabilities.runs import Runs
    from fleet.core.config import BaseConfig

log = logging.getLogger("fleet.meters")

#: How often a book sends what it holds (s).
FLUSH_SECONDS = 2.0
#: How long a book trusts what it read of a run's budget (s): a budget set at resume
#: is seen within this.
BUDGET_TTL = 5.0
#: The tier name of traffic of a type without ``proxy_tiers``.
NO_TIER = "default"
GB = 1e9


def _price(prices: dict[str, float], name: str) -> float:
    return prices.get(name, prices.get("*", 0.0))


class Attempt:
    """What a running attempt's meters belong to besides its type: its run and the
    identity pools it held."""

    __slots__ = ("pools", "run", "started")

    def __init__(self, run: str | None) -> None:
        self.run = run
        self.pools: set[str] = set()
        self.started = time.perf_counter()


class MeterBook(LaterFlush):
    """A type's meters in one process (``ctx.access.book``).

    Args:
        meters: Where they go.
        automation_type: The type.
        config: Its current config (prices read at each amount).
    """

    def __init__(
        self,
        meters: Meters,
        automation_type: str,
        config: Callable[[], BaseConfig],
        runs: Runs | None = None,
    ) -> None:
        super().__init__(FLUSH_SECONDS, f"meters:{automation_type}")
        self._meters = meters
        self._runs = runs
        #: run -> (read until, whether it has a budget).
        self._budgeted: dict[str, tuple[float, bool]] = {}
        self.automation_type = automation_type
        self._config = config
        self._batch = MeterBatch()
        self._type = type_scope(automation_type)
        self._hour_scope = ""
        self._hour_ends = 0.0
        #: Attempts ended since the last send: (run, pools, hour) -> [count, seconds].
        self._ended: dict[tuple[str | None, tuple[str, ...], str], list[float]] = {}

    # ------------------------------------------------------------------ adding
    def _hour(self) -> str:
        """The current hour's scope (made once an hour: it is asked at every attempt)."""
        now = time.time()
        if now >= self._hour_ends:
            self._hour_scope = hour_scope(self.automation_type, now)
            self._hour_ends = hour_start(now) + HOUR
        return self._hour_scope

    def _scopes(self, attempt: Attempt | None, domain: str | None = None) -> list[str]:
        out = [self._type, self._hour()]
        if attempt is not None:
            if attempt.run is not None:
                out.append(run_scope(attempt.run))
            out.extend(pool_scope(p) for p in sorted(attempt.pools))
        if domain:
            out.append(domain_scope(self.automation_type, domain))
        return out

    def _add(self, scopes: Iterable[str], meter: str, amount: float, spend: float = 0.0) -> None:
        scopes = list(scopes)
        self._batch.add(scopes, meter, amount)
        if spend > 0:
            self._batch.add(scopes, "spend", spend)
        self._schedule()

    def attempt_ended(self, attempt: Attempt | None, run_seconds: float) -> None:
        """One attempt ran, for ``run_seconds`` (retried ones count: they were spent).
        Every task ends here: it is summed by (run, pools, hour) and spread over its
        scopes only when the book is sent."""
        key = (
            None if attempt is None else attempt.run,
            () if attempt is None or not attempt.pools else tuple(sorted(attempt.pools)),
            self._hour(),
        )
        got = self._ended.get(key)
        if got is None:
            self._ended[key] = [1, run_seconds]
            self._schedule()
        else:
            got[0] += 1
            got[1] += run_seconds

    def _spread_ended(self) -> None:
        """Move the summed attempts into the batch, under their scopes."""
        ended, self._ended = self._ended, {}
        for (run, pools, hour), (n, seconds) in ended.items():
            scopes = [self._type, hour, *(pool_scope(p) for p in pools)]
            if run is not None:
                scopes.append(run_scope(run))
            self._batch.add(scopes, "attempts", n)
            self._batch.add(scopes, "run_seconds", seconds)

    def traffic(
        self,
        attempt: Attempt | None,
        domain: str,
        tier: str | None,
        *,
        requests: int = 0,
        sent: int = 0,
        received: int = 0,
    ) -> None:
        """HTTP traffic to ``domain`` through ``tier`` (None: the type has no tiers)."""
        config = self._config()
        per_gb, per_request = config.costs.per_gb, 0.0
        if tier is not None:
            for t in config.proxy_tiers:
                if t.name == tier:
                    per_gb, per_request = t.cost_per_gb or 0.0, t.cost_per_request or 0.0
                    break
        name = tier or NO_TIER
        scopes = self._scopes(attempt, domain)
        spend = (sent + received) / GB * per_gb + requests * per_request
        self._add(scopes, "requests", requests)
        self._add(scopes, split_meter("requests", name), requests)
        self._add(scopes, "bytes_sent", sent)
        self._add(scopes, "bytes_received", received, spend)
        self._add(scopes, split_meter("bytes", name), sent + received)

    def solve(self, attempt: Attempt | None, solver: str, *, ok: bool) -> None:
        """One call of ``solver`` (priced whether it got past or not: it was billed)."""
        price = _price(dict(self._config().costs.per_solve), solver)
        scopes = self._scopes(attempt)
        self._add(scopes, "solves", 1, price)
        self._add(scopes, split_meter("solves", solver), 1)
        if not ok:
            self._add(scopes, "solve_failures", 1)

    def browser(self, attempt: Attempt | None, seconds: float) -> None:
        """A browser context was open ``seconds``."""
        price = self._config().costs.per_browser_second * seconds
        self._add(self._scopes(attempt), "browser_seconds", seconds, price)

    def output(self, attempt: Attempt | None, valid: bool, nulls: Iterable[str]) -> None:
        """One item emitted (``valid``: it validates against its ``Output`` model; its
        top-level ``nulls``): what the monitors read (fleet/core/monitors.py)."""
        scopes = self._scopes(attempt)
        self._add(scopes, "outputs", 1)
        if valid:
            self._add(scopes, "outputs_valid", 1)
        for field in nulls:
            self._add(scopes, split_meter("nulls", field), 1)

    def units(self, attempt: Attempt | None, meter: str, amount: float) -> None:
        """``amount`` of the plugin's own ``meter`` (``ctx.meter``: names checked there)."""
        price = _price(dict(self._config().costs.per_unit), meter) * amount
        self._add(self._scopes(attempt), meter, amount, price)

    # ------------------------------------------------------------------ sending
    async def flush(self) -> None:
        """Send what the book holds (kept for the next flush if the backend fails)."""
        self._spread_ended()
        batch, self._batch = self._batch, MeterBatch()
        if not batch:
            return
        try:
            await self._meters.add(batch)
        except FleetError as exc:
            log.warning("%s: meters not sent, kept for the next try: %s", self.automation_type, exc)
            batch.merge(self._batch)
            self._batch = batch
            self._schedule()

    async def _has_budget(self, run: str) -> bool:
        now = time.monotonic()
        known = self._budgeted.get(run)
        if known is not None and known[0] > now:
            return known[1]
        has = False
        if self._runs is not None:
            try:
                record = await self._runs.get(run)
            except FleetError:  # runs unsupported here, or the backend away: no budget
                record = None
            has = record is not None and bool(record.budget)
        if len(self._budgeted) > 10_000:
            self._budgeted.clear()
        self._budgeted[run] = (now + BUDGET_TTL, has)
        return has

    async def held_back(self, run: str) -> bool:
        """True if ``run`` has a budget and is paused now (one read, only for a run with
        a budget): a task of it a worker took ahead of its slots goes back instead of
        running, so the fleet overshoots a budget by at most the attempts running."""
        if not await self._has_budget(run) or self._runs is None:
            return False
        try:
            record = await self._runs.get(run)
        except FleetError:
            return False
        return record is not None and record.state == "paused"

    @property
    def daily_budgeted(self) -> bool:
        """True if the type's config (as this process has it) sets a ``daily_budget``:
        only a hint of when to send early; the hold itself reads the stored config."""
        return bool(self._config().daily_budget)

    async def settle(self, run: str | None) -> None:
        """An attempt of a task of ``run`` ended: if the run has a budget or the type a
        ``daily_budget``, send the book now (before the task is acked), so the step that
        adds its meters pauses the run (holds the type) before another worker takes the
        next task; else nothing (the next flush)."""
        if self.daily_budgeted or (run is not None and await self._has_budget(run)):
            await self.flush()

    def held(self) -> dict[str, dict[str, Any]]:
        """What the book holds now (not sent yet), by scope."""
        self._spread_ended()
        return {k: dict(v) for k, v in self._batch.sums.items()}


class TaskMeter:
    """The meters of a slot's running attempt (``ctx``'s): what its clients, solvers,
    browser contexts and ``ctx.meter`` spend goes to the type's book under the
    attempt's scopes (its run, its identity pools)."""

    __slots__ = ("attempt", "book")

    def __init__(self, book: MeterBook) -> None:
        self.book = book
        self.attempt: Attempt | None = None

    def start(self, run: str | None) -> None:
        """An attempt of a task of ``run`` starts."""
        self.attempt = Attempt(run)

    def end(self) -> None:
        """The attempt ended: one attempt and its run-seconds metered."""
        attempt, self.attempt = self.attempt, None
        if attempt is not None:
            self.book.attempt_ended(attempt, time.perf_counter() - attempt.started)

    def pool(self, name: str) -> None:
        """The attempt holds an identity of pool ``name``."""
        if self.attempt is not None:
            self.attempt.pools.add(name)

    def traffic(
        self, domain: str, tier: str | None, *, requests: int, sent: int, received: int
    ) -> None:
        self.book.traffic(
            self.attempt, domain, tier, requests=requests, sent=sent, received=received
        )

    def solve(self, solver: str, *, ok: bool) -> None:
        self.book.solve(self.attempt, solver, ok=ok)

    def browser(self, seconds: float) -> None:
        self.book.browser(self.attempt, seconds)

    def units(self, meter: str, amount: float) -> None:
        self.book.units(self.attempt, meter, amount)

    def output(self, valid: bool, nulls: Iterable[str]) -> None:
        self.book.output(self.attempt, valid, nulls)
