"""Proxy tiers per domain on Redis: ``fleet:domains:<type>`` (hash domain -> state JSON)
and ``fleet:domains:<type>:names`` (zset domain -> 0, pages by name), one hash tag per
type on Cluster, the same as the type's config key ``fleet:config:<type>``: a record is
one call of ``lua/domains.lua``, which reads that config in the same step (its numbers
win over the caller's rule) and runs the rule of :func:`fleet.core.tiers.step`. A get is
one ``HGET``, a page one call of the script (``ZRANGE BYLEX`` then the states)."""

from __future__ import annotations

import json
from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.scripts import LuaScript
from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.capabilities.domains import Domains
from fleet.core.records import now
from fleet.core.tier_store import (
    check_limit,
    check_record,
    check_tier,
    state_of,
)
from fleet.core.tiers import DomainPage, DomainTier, TierRule, TierStep, check_domain


def _text(raw: Any) -> str:
    if raw is None or raw is False:
        return ""
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def decode(domain: str, raw: Any) -> DomainTier:
    """A domain's state from its stored JSON (text that does not decode: a bare state)."""
    try:
        doc = json.loads(_text(raw))
    except ValueError:
        doc = None
    return state_of(domain, doc)


def record_argv(
    domain: str,
    tier: int,
    kind: VerdictKind,
    vendor: str | None,
    count: int,
    rule: TierRule,
    at: float,
) -> list[str]:
    """The ``ARGV`` of the script's ``record`` (checked arguments; times and seconds as
    ``repr``, which Lua's ``tonumber`` reads back exactly)."""
    return [
        "record",
        repr(float(at)),
        domain,
        str(tier),
        kind,
        "" if vendor is None else "=" + vendor,
        str(count),
        str(int(rule.tiers)),
        str(int(rule.escalate_after)),
        repr(float(rule.window_seconds)),
        repr(float(rule.probe_after_seconds)),
        str(int(rule.probe_successes)),
    ]


class RedisDomains(RedisPart, Domains):
    """:class:`~fleet.core.capabilities.domains.Domains` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self.script = LuaScript("domains")

    async def _call(self, automation_type: str, argv: list[str]) -> Any:
        with self._guard():
            return await self.script(self._lane, self._keys.domain_keys(automation_type), argv)

    async def get(self, automation_type: str, domain: str) -> DomainTier | None:
        name = check_domain(domain)
        with self._guard():
            raw = await self._lane.execute("HGET", self._keys.domain_keys(automation_type)[0], name)
        return None if raw is None else decode(name, raw)

    async def record(
        self,
        automation_type: str,
        domain: str,
        *,
        tier: int,
        kind: VerdictKind,
        vendor: str | None = None,
        rule: TierRule,
        count: int = 1,
    ) -> TierStep:
        name, tier, kind, vendor, count = check_record(domain, tier, kind, vendor, count)
        doc, change = await self._call(
            automation_type, record_argv(name, tier, kind, vendor, count, rule, now())
        )
        moved = _text(change)
        return TierStep(
            decode(name, doc), "up" if moved == "up" else "down" if moved == "down" else None
        )

    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 50
    ) -> DomainPage:
        n = check_limit(limit)
        raw = await self._call(automation_type, ["page", repr(now()), after or "", str(n + 1)])
        rows = [(_text(raw[i]), raw[i + 1]) for i in range(0, len(raw), 2)]
        items = tuple(decode(d, doc) for d, doc in rows[:n])
        return DomainPage(items, items[-1].domain if len(rows) > n else None)

    async def set_tier(self, automation_type: str, domain: str, tier: int) -> DomainTier:
        name, t = check_domain(domain), check_tier(tier)
        doc = await self._call(automation_type, ["set", repr(now()), name, str(t)])
        return decode(name, doc)

    async def forget(self, automation_type: str, domain: str) -> bool:
        name = check_domain(domain)
        return bool(int(await self._call(automation_type, ["forget", repr(now()), name])))
