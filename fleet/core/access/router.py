"""A type's way through to sites, shared by the slots of one process: which proxy tier
a request to a domain goes through, and what its verdicts teach the fleet
(docs/blocks.md#tiers).

Reads: each domain's state is cached for :data:`STATE_SECONDS` (and replaced by what
each recorded step answers), so a busy domain costs one backend read per process every
few seconds, not one per request. Writes: an escalating verdict or a probe's verdict is
one atomic step of the backend at once (:meth:`Domains.record`); ``ok`` and
``throttled`` verdicts met at the domain's own tier only add to its counts, so they are
summed here and sent every :data:`FLUSH_SECONDS`.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.core.blocks.verdicts import ESCALATING, Verdict, VerdictKind
from fleet.core.error_book import ErrorBook
from fleet.core.errors import FleetError
from fleet.core.flushing import LaterFlush
from fleet.core.metering import MeterBook
from fleet.core.proxy import provider_factory, proxy_key, proxy_key_salt, split_proxy_urls
from fleet.core.records import new_token
from fleet.core.tiers import PROBE_ONE_IN, DomainTier, TierRule, TierStep, probe_due, rule_of

if TYPE_CHECKING:
    from fleet.core.access.tier_config import ProxyTier
    from fleet.core.capabilities import TaskCapabilities
    from fleet.core.config import BaseConfig

log = logging.getLogger("fleet.blocks")

#: The backend topic of tier changes; the master's event stream relays each as ``tier``.
DOMAINS_TOPIC = "domains"
#: How long a domain's state is trusted without a read (s).
STATE_SECONDS = 2.0
#: How often counted-only verdicts are sent (s).
FLUSH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Route:
    """How one request leaves: the tier (index and name; None without tiers) and
    whether it is a probe one tier below the domain's."""

    tier: int = 0
    name: str | None = None
    probe: bool = False


#: A request of a type without ``proxy_tiers``.
NO_TIERS = Route()


class Access(LaterFlush):
    """A type's tier routing and verdict counting in one process (``ctx.http`` uses it).

    Args:
        backend: Where domains are kept and tier changes published.
        automation_type: The type.
        config: Its current config (read at each use: a PATCH holds at the next request).
    """

    def __init__(
        self,
        backend: TaskCapabilities,
        automation_type: str,
        config: Callable[[], BaseConfig],
    ) -> None:
        super().__init__(FLUSH_SECONDS, "fleet:verdicts")
        self._backend = backend
        self.automation_type = automation_type
        self._config = config
        self._states: dict[str, tuple[float, DomainTier | None]] = {}
        self._pending: dict[tuple[str, int, VerdictKind], int] = {}
        self._session = secrets.token_hex(6)
        self._salt: str | None = None
        #: What the type's tasks spend in this process (docs/costs.md).
        self.book = MeterBook(backend.meters, automation_type, config, backend.runs)
        #: The type's failure groups in this process (docs/errors.md).
        self.errors = ErrorBook(backend.errors, automation_type)

    # ------------------------------------------------------------------ config
    @property
    def config(self) -> BaseConfig:
        return self._config()

    def tiers(self) -> list[ProxyTier]:
        return list(self.config.proxy_tiers)

    def rule(self) -> TierRule:
        return rule_of(self.config)

    # ------------------------------------------------------------------ routing
    async def state(self, domain: str) -> DomainTier | None:
        """The domain's state as this process knows it (read at most every few seconds)."""
        at = time.monotonic()
        cached = self._states.get(domain)
        if cached is not None and at - cached[0] < STATE_SECONDS:
            return cached[1]
        try:
            state = await self._backend.domains.get(self.automation_type, domain)
        except FleetError as exc:  # the backend is away: keep what we knew
            log.warning("%s: domain %s not read: %s", self.automation_type, domain, exc)
            return None if cached is None else cached[1]
        self._states[domain] = (at, state)
        return state

    async def route(self, domain: str) -> Route:
        """The tier a request to ``domain`` goes through now (one in
        :data:`~fleet.core.tiers.PROBE_ONE_IN` a tier lower once a step down is due)."""
        tiers = self.tiers()
        if not tiers:
            return NO_TIERS
        state = await self.state(domain)
        rule = self.rule()
        tier = 0 if state is None else min(state.tier, rule.top)
        probe = False
        if probe_due(state, rule, time.time()) and random.randrange(PROBE_ONE_IN) == 0:
            tier, probe = tier - 1, True
        return Route(tier, tiers[tier].name, probe)

    def tier_of(self, route: Route) -> ProxyTier | None:
        """The tier a route goes through (None: no tiers)."""
        if route.name is None:
            return None
        tiers = self.tiers()
        return tiers[route.tier] if route.tier < len(tiers) else None

    async def proxy_of(self, route: Route) -> str | None:
        """A proxy URL of the route's tier (None: direct, or no tiers): of several
        ``proxy_url`` entries, one at random among those not cooling fleet-wide."""
        if route.name is None:
            return None
        tiers = self.tiers()
        if route.tier >= len(tiers):
            return None
        tier = tiers[route.tier]
        if tier.direct or tier.identity_pool is not None:
            return None
        if tier.proxy_url is not None:
            return await self._healthy(split_proxy_urls(tier.proxy_url))
        assert tier.proxy_provider is not None
        provider = provider_factory(tier.proxy_provider)(dict(tier.proxy_provider_config))
        return provider.url(session=f"{self._session}-{secrets.token_hex(4)}", country=None)

    async def _healthy(self, urls: list[str]) -> str | None:
        """One of ``urls`` at random, passing over those cooling fleet-wide (every
        one cooling: the one whose cool-down ends first), as the proxy health's take
        decides in one step; the place it takes is given back at once."""
        order = random.sample(urls, len(urls))
        if len(order) == 1:
            return order[0]
        try:
            if self._salt is None:  # made once per backend, never changed: read once
                self._salt = await proxy_key_salt(self._backend.kv)
            salt = self._salt
            keys = [proxy_key(u, salt) for u in order]
            token = new_token()
            got = await self._backend.proxies.take(
                keys, token, hold_seconds=1.0, automation_type=self.automation_type
            )
            if got.key is None:  # every one at its place cap: any will do
                return order[0]
            await self._backend.proxies.release(got.key, token)
            return order[keys.index(got.key)]
        except FleetError as exc:  # health unknown: a random one
            log.warning("%s: proxy health not read: %s", self.automation_type, exc)
            return order[0]

    # ------------------------------------------------------------------ verdicts
    async def note(self, domain: str, route: Route, verdict: Verdict) -> TierStep | None:
        """What a response to ``domain`` through ``route`` was: an escalating verdict or
        a probe's is one backend step now (a tier change is published); the others are
        counted and sent within :data:`FLUSH_SECONDS`."""
        kind = verdict.kind
        if kind not in ESCALATING and not route.probe:
            key = (domain, route.tier, kind)
            self._pending[key] = self._pending.get(key, 0) + 1
            self._schedule()
            return None
        try:
            stepped = await self._backend.domains.record(
                self.automation_type,
                domain,
                tier=route.tier,
                kind=kind,
                vendor=verdict.vendor,
                rule=self.rule(),
            )
        except FleetError as exc:
            log.warning("%s: verdict for %s not recorded: %s", self.automation_type, domain, exc)
            return None
        self._states[domain] = (time.monotonic(), stepped.state)
        if stepped.change is not None:
            await self._tell(stepped, verdict)
        return stepped

    async def _tell(self, stepped: TierStep, verdict: Verdict) -> None:
        state = stepped.state
        tiers = self.tiers()
        name = tiers[state.tier].name if state.tier < len(tiers) else str(state.tier)
        log.info(
            "%s: %s moved %s to tier %s (%s)",
            self.automation_type,
            state.domain,
            stepped.change,
            name,
            verdict.kind if stepped.change == "up" else "probes passed",
        )
        event = tier_event(self.automation_type, state, stepped.change, name, verdict)
        try:
            await self._backend.events.publish(DOMAINS_TOPIC, event)
        except Exception as exc:  # fire and forget: the backend holds the state
            log.warning("tier event not sent: %s", exc)

    async def flush(self) -> None:
        """Send the counted-only verdicts now (a worker's stop calls it): one call of
        the backend for all of them."""
        pending, self._pending = self._pending, {}
        if not pending:
            return
        counts = [(d, t, k, n) for (d, t, k), n in pending.items()]
        try:
            steps = await self._backend.domains.record_counts(
                self.automation_type, counts, rule=self.rule()
            )
        except FleetError as exc:
            log.warning("%s: %d verdicts lost: %s", self.automation_type, len(counts), exc)
            return
        at = time.monotonic()
        for stepped in steps:
            self._states[stepped.state.domain] = (at, stepped.state)

    async def close(self) -> None:
        """Flush what is pending (verdicts, meters, failures) and stop the flushers."""
        await super().close()
        await self.book.close()
        await self.errors.close()


def tier_event(
    automation_type: str,
    state: DomainTier,
    change: str | None,
    tier_name: str,
    verdict: Verdict | None = None,
) -> dict[str, Any]:
    """The message of a tier change: ``{type, domain, tier, tier_index, change, kind,
    vendor}``."""
    return {
        "type": automation_type,
        "domain": state.domain,
        "tier": tier_name,
        "tier_index": state.tier,
        "change": change,
        "kind": None if verdict is None else verdict.kind,
        "vendor": None if verdict is None else verdict.vendor,
    }
