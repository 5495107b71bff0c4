"""The domains of a type and the proxy tier each goes through (docs/blocks.md#tiers):
a page read in O(page), tiers named from the type's effective config; an operator may
put a domain at a tier or make the fleet forget it."""

from __future__ import annotations

import contextlib
from typing import Any

from fleet.backends.base import Backend
from fleet.core.access.router import DOMAINS_TOPIC, tier_event
from fleet.core.blocks.verdicts import VERDICT_KINDS
from fleet.core.config import merge_config
from fleet.core.errors import ContractValueError, FleetError, NotFound
from fleet.core.tiers import DomainTier, check_domain
from fleet.master.services.catalog import require_entry
from fleet.master.services.validation import schema_defaults

#: Most domains one page lists.
MAX_PAGE = 500


async def tier_names(backend: Backend, automation_type: str) -> list[str]:
    """The names of the type's ``proxy_tiers`` in its effective type-wide config (404
    for an unknown type)."""
    entry = await require_entry(backend, automation_type)
    effective = merge_config(
        schema_defaults(entry.get("config") or {}), await backend.configs.get(automation_type)
    )
    tiers = effective.get("proxy_tiers") or []
    names = []
    for i, tier in enumerate(tiers if isinstance(tiers, list) else []):
        name = tier.get("name") if isinstance(tier, dict) else None
        names.append(str(name) if name else str(i))
    return names


def domain_out(state: DomainTier, names: list[str]) -> dict[str, Any]:
    """A domain as the API shows it: its tier by name, its verdicts by kind over every
    tier and by tier, the last verdict and since when it is at its tier."""
    top = max(len(names) - 1, 0)
    tier = min(state.tier, top)
    by_tier: dict[str, dict[str, int]] = {}
    for key, n in sorted(state.counts.items()):
        index, _, kind = key.partition(":")
        label = names[int(index)] if index.isdigit() and int(index) < len(names) else index
        by_tier.setdefault(label, {})[kind] = n
    return {
        "domain": state.domain,
        "tier": names[tier] if names else None,
        "tier_index": tier,
        "since": state.since,
        "ok": state.count("ok"),
        "blocked": {k: state.count(k) for k in VERDICT_KINDS if k != "ok"},
        "by_tier": by_tier,
        "last_verdict": state.last_kind,
        "last_vendor": state.last_vendor,
        "last_at": state.last_at or None,
        "probe_streak": state.probe_streak,
        "window_blocks": state.window_blocks,
        "changes": state.changes,
    }


async def page(
    backend: Backend, automation_type: str, *, after: str | None, limit: int
) -> dict[str, Any]:
    """A page of the type's domains by name (404 for an unknown type)."""
    names = await tier_names(backend, automation_type)
    got = await backend.domains.page(automation_type, after=after, limit=limit)
    return {
        "type": automation_type,
        "tiers": names,
        "items": [domain_out(s, names) for s in got.items],
        "next": got.next,
    }


def _unknown(automation_type: str, domain: str) -> NotFound:
    return NotFound(
        f"no verdict was met at {domain} for {automation_type}", automation_type=automation_type
    )


async def one(backend: Backend, automation_type: str, domain: str) -> dict[str, Any]:
    """One domain (404 for an unknown type, or a domain without a verdict)."""
    names = await tier_names(backend, automation_type)
    state = await backend.domains.get(automation_type, check_domain(domain))
    if state is None:
        raise _unknown(automation_type, domain)
    return domain_out(state, names)


async def forget(backend: Backend, automation_type: str, domain: str) -> dict[str, Any]:
    """Forget a domain: it starts again at the first tier (404 if unknown)."""
    await tier_names(backend, automation_type)
    name = check_domain(domain)
    if not await backend.domains.forget(automation_type, name):
        raise _unknown(automation_type, name)
    return {"type": automation_type, "domain": name, "forgotten": True}


async def put_tier(
    backend: Backend, automation_type: str, domain: str, tier: str | int
) -> dict[str, Any]:
    """Put a domain at a tier named (or numbered) among the type's ``proxy_tiers``.

    Raises:
        ContractValueError: 422 for a tier the type does not have.
    """
    names = await tier_names(backend, automation_type)
    if isinstance(tier, str) and tier in names:
        index = names.index(tier)
    elif isinstance(tier, int) and 0 <= tier < max(len(names), 1):
        index = tier
    else:
        raise ContractValueError(
            f"tier {tier!r} is not one of the type's proxy_tiers ({', '.join(names) or 'none'})",
            field="tier",
            automation_type=automation_type,
        )
    state = await backend.domains.set_tier(automation_type, check_domain(domain), index)
    event = tier_event(automation_type, state, "set", names[index] if names else str(index))
    with contextlib.suppress(FleetError):  # fire and forget: the backend holds the tier
        await backend.events.publish(DOMAINS_TOPIC, event)
    return domain_out(state, names)
