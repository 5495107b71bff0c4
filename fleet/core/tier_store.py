"""What both engines of the ``domains`` capability share beside the rule itself
(:func:`fleet.core.tiers.step`): the checks of the arguments, how a stored state and a
stored type-wide config read (``lua/domains.lua`` reads them the same way), and the
operator's ``set_tier``.

A stored value that cannot be read never fails a read or a record: a time that is not a
finite number reads as 0, a count that is not a whole number as 0, counts that are not
an object of whole numbers as empty, and a config field of the wrong type as unset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.errors import ContractValueError
from fleet.core.tiers import DomainTier, TierRule, check_domain, check_kind

#: Largest page of :meth:`Domains.page`.
MAX_PAGE: Final = 500
#: Highest tier index taken (a type has a handful; this keeps it an integer everywhere).
MAX_TIER: Final = 9_999


def _whole(value: object, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ContractValueError(f"{what}; got {value!r}", field=field)
    return value


def check_tier(value: object) -> int:
    """A tier index, 0..:data:`MAX_TIER`.

    Raises:
        ContractValueError: naming ``tier``.
    """
    return _whole(value, "tier", 0, MAX_TIER, f"a tier is an index 0..{MAX_TIER}")


def check_count(value: object) -> int:
    """How many verdicts one record carries: 1..1,000,000."""
    return _whole(value, "count", 1, 1_000_000, "a count is a whole number 1..1000000")


def check_limit(value: object) -> int:
    """A page's size, 1..:data:`MAX_PAGE`."""
    return _whole(value, "limit", 1, MAX_PAGE, f"a page holds 1..{MAX_PAGE} domains")


def check_vendor(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ContractValueError(f"a vendor is a name or None; got {value!r}", field="vendor")
    return value


def check_record(
    domain: object, tier: object, kind: object, vendor: object, count: object
) -> tuple[str, int, VerdictKind, str | None, int]:
    """The arguments of :meth:`Domains.record`, checked (the domain in lower case)."""
    return (
        check_domain(domain),
        check_tier(tier),
        check_kind(kind),
        check_vendor(vendor),
        check_count(count),
    )


def _number(value: object) -> float | None:
    """A finite JSON number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return x if math.isfinite(x) else None


def _integral(value: object) -> int | None:
    x = _number(value)
    return int(x) if x is not None and x.is_integer() else None


def real(value: object) -> float:
    """A stored time: a finite number or numeric text, else 0."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return 0.0
    x = _number(value)
    return 0.0 if x is None else x


def integer(value: object) -> int:
    """A stored count: a whole finite number, else 0."""
    n = _integral(value)
    return 0 if n is None else n


def counts_of(value: object) -> dict[str, int]:
    """Stored counts: the entries of an object whose values are whole numbers."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, int] = {}
    for k, v in value.items():
        n = _integral(v)
        if isinstance(k, str) and n is not None:
            out[k] = n
    return out


def state_of(domain: str, doc: object) -> DomainTier:
    """A domain's state from its stored fields (``doc``: the fields of
    :meth:`DomainTier.to_dict` but ``domain``; anything else: a bare state)."""
    if not isinstance(doc, Mapping):
        return DomainTier(domain=domain)
    kind, vendor = doc.get("last_kind"), doc.get("last_vendor")
    return DomainTier(
        domain=domain,
        tier=integer(doc.get("tier")),
        since=real(doc.get("since")),
        window_start=real(doc.get("window_start")),
        window_blocks=integer(doc.get("window_blocks")),
        probe_streak=integer(doc.get("probe_streak")),
        counts=counts_of(doc.get("counts")),
        last_kind=kind if isinstance(kind, str) else None,
        last_vendor=vendor if isinstance(vendor, str) else None,
        last_at=real(doc.get("last_at")),
        changes=integer(doc.get("changes")),
    )


def stored_rule(config: Mapping[str, Any], rule: TierRule) -> TierRule:
    """``rule`` with the numbers the type's stored type-wide config sets: the length of
    its ``proxy_tiers`` list (at least 1; an empty object counts as an empty list, as
    the Lua copy cannot tell them apart), whole numbers for ``tier_escalate_after`` and
    ``tier_probe_successes``, finite numbers for ``tier_window_seconds`` and
    ``tier_probe_after_seconds``. A field of another type is ignored."""
    tiers = config.get("proxy_tiers")
    if isinstance(tiers, list) or tiers == {}:
        rule = replace(rule, tiers=max(len(tiers), 1))
    n = _integral(config.get("tier_escalate_after"))
    if n is not None:
        rule = replace(rule, escalate_after=n)
    x = _number(config.get("tier_window_seconds"))
    if x is not None:
        rule = replace(rule, window_seconds=x)
    x = _number(config.get("tier_probe_after_seconds"))
    if x is not None:
        rule = replace(rule, probe_after_seconds=x)
    n = _integral(config.get("tier_probe_successes"))
    if n is not None:
        rule = replace(rule, probe_successes=n)
    return rule


def placed(state: DomainTier | None, domain: str, tier: int, now: float) -> DomainTier:
    """:meth:`Domains.set_tier`: the domain at ``tier`` since ``now``, its window and
    streak started over; a move counts as a change (a new domain starts at tier 0)."""
    s = state if state is not None else DomainTier(domain=domain, since=now)
    return replace(
        s,
        tier=tier,
        since=now,
        window_start=0.0,
        window_blocks=0,
        probe_streak=0,
        changes=s.changes + (tier != s.tier),
    )
