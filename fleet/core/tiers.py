"""Proxy tiers per domain, learned fleet-wide (docs/blocks.md#tiers).

A type's ``proxy_tiers`` is an ordered list of exits, cheap first (direct, datacenter,
residential, mobile). For each ``(type, domain)`` the backend keeps the tier requests go
through now; every verdict a worker meets is one atomic :func:`step` of that state.

**The rule** (one pure function; SQLite runs it in Python, Redis in
``lua/domains.lua``, and the differential tests hold the two together):

- Every verdict counts toward its tier's counts (``"<tier>:<kind>"``) and sets the last
  verdict; a domain starts at tier 0.
- **Escalate.** A ``blocked``, ``challenge`` or ``captcha`` verdict *met at the current
  tier* counts in a window opened by the first of them; ``escalate_after`` of them
  within ``window_seconds`` move the domain one tier up (unless it is at the top): its
  ``since`` is now, its window and probe streak start over. A verdict met at another tier
  (a request that left before the change) never moves it: two workers meeting one burst
  of blocks escalate once.
- **Step down.** Once a domain has been at a tier above 0 for ``probe_after_seconds``,
  workers send one request in :data:`PROBE_ONE_IN` one tier down (:func:`probe_due`).
  An ``ok`` met there adds to the probe streak; ``probe_successes`` of them in a row
  step the domain down (``since`` now, the streak and window start over). A block met
  there ends the streak and starts the wait again (``since`` is now). ``throttled``
  says slow down, not go elsewhere: it neither escalates nor breaks a streak.
- A tier past the top (the tiers list was shortened) reads as the top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from fleet.core.blocks.verdicts import ESCALATING, VERDICT_KINDS, VerdictKind
from fleet.core.errors import ContractValueError

#: Defaults of the ``tier_*`` config fields.
DEFAULT_ESCALATE_AFTER = 3
DEFAULT_WINDOW_SECONDS = 300.0
DEFAULT_PROBE_AFTER_SECONDS = 1800.0
DEFAULT_PROBE_SUCCESSES = 5
#: Once a step down is due, one request in this many goes one tier down.
PROBE_ONE_IN: Final = 4
#: Longest domain kept (a host name is at most 253).
MAX_DOMAIN = 253

#: Characters no host name holds.
_NOT_IN_HOSTS = frozenset("/\\?#%;'\"<>")

#: What a step did to the domain's tier.
Change = Literal["up", "down"]


@dataclass(frozen=True, slots=True)
class TierRule:
    """The numbers of the rule, for one type.

    Attributes:
        tiers: How many tiers the type has (``len(proxy_tiers)``; 1 without tiers).
    """

    tiers: int = 1
    escalate_after: int = DEFAULT_ESCALATE_AFTER
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    probe_after_seconds: float = DEFAULT_PROBE_AFTER_SECONDS
    probe_successes: int = DEFAULT_PROBE_SUCCESSES

    @property
    def top(self) -> int:
        return max(self.tiers - 1, 0)


@dataclass(frozen=True, slots=True)
class DomainTier:
    """What the fleet knows of one domain of a type.

    Attributes:
        domain: The host (lower case).
        tier: The tier requests go through now (an index of ``proxy_tiers``).
        since: When it moved to that tier (its first verdict for tier 0).
        window_start: When the current window of escalating verdicts opened (0: none).
        window_blocks: Escalating verdicts in it, met at the current tier.
        probe_streak: ``ok`` verdicts in a row met one tier down.
        counts: Verdicts by ``"<tier index>:<kind>"``.
        last_kind: The last verdict's kind; ``last_vendor`` its vendor; ``last_at`` when.
        changes: How many times the tier moved.
    """

    domain: str
    tier: int = 0
    since: float = 0.0
    window_start: float = 0.0
    window_blocks: int = 0
    probe_streak: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    last_kind: str | None = None
    last_vendor: str | None = None
    last_at: float = 0.0
    changes: int = 0

    def count(self, kind: str, tier: int | None = None) -> int:
        """Verdicts of ``kind`` at ``tier`` (None: at every tier)."""
        if tier is not None:
            return self.counts.get(f"{tier}:{kind}", 0)
        return sum(n for k, n in self.counts.items() if k.partition(":")[2] == kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "tier": self.tier,
            "since": self.since,
            "window_start": self.window_start,
            "window_blocks": self.window_blocks,
            "probe_streak": self.probe_streak,
            "counts": dict(self.counts),
            "last_kind": self.last_kind,
            "last_vendor": self.last_vendor,
            "last_at": self.last_at,
            "changes": self.changes,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> DomainTier:
        counts = doc.get("counts") or {}
        return cls(
            domain=str(doc["domain"]),
            tier=int(doc.get("tier") or 0),
            since=float(doc.get("since") or 0.0),
            window_start=float(doc.get("window_start") or 0.0),
            window_blocks=int(doc.get("window_blocks") or 0),
            probe_streak=int(doc.get("probe_streak") or 0),
            counts={str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {},
            last_kind=doc.get("last_kind"),
            last_vendor=doc.get("last_vendor"),
            last_at=float(doc.get("last_at") or 0.0),
            changes=int(doc.get("changes") or 0),
        )


@dataclass(frozen=True, slots=True)
class TierStep:
    """A step's result: the domain after it, and whether its tier moved."""

    state: DomainTier
    change: Change | None = None


@dataclass(frozen=True, slots=True)
class DomainPage:
    """A page of a type's domains, by name."""

    items: tuple[DomainTier, ...]
    next: str | None


def check_domain(value: object) -> str:
    """A domain as kept: a host name (or address), lower case, 1-253 characters, none of
    them a space, a control character or one a host cannot hold (``/ \\ ? # % ; ' " < >``),
    and not ``.`` or ``..``.

    Raises:
        ContractValueError: naming ``domain``.
    """
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_DOMAIN
        or value in (".", "..")
        or any(c.isspace() or ord(c) < 32 or ord(c) == 127 or c in _NOT_IN_HOSTS for c in value)
    ):
        raise ContractValueError(
            f"a domain is a host name of 1-{MAX_DOMAIN} characters; got {value!r}",
            field="domain",
        )
    return value.lower()


def check_kind(value: object) -> VerdictKind:
    if value not in VERDICT_KINDS:
        raise ContractValueError(
            f"a verdict kind is one of {', '.join(VERDICT_KINDS)}; got {value!r}", field="kind"
        )
    return value


def step(
    state: DomainTier | None,
    rule: TierRule,
    *,
    domain: str,
    tier: int,
    kind: VerdictKind,
    vendor: str | None = None,
    now: float,
    count: int = 1,
) -> TierStep:
    """One verdict (``count`` alike: ``ok`` verdicts are sent in batches) met at ``tier``
    for ``domain``: the state after it (the module's rule)."""
    s = state if state is not None else DomainTier(domain=domain, since=now)
    cur = min(s.tier, rule.top)
    counts = dict(s.counts)
    key = f"{tier}:{kind}"
    counts[key] = counts.get(key, 0) + count
    s = replace(s, tier=cur, counts=counts, last_kind=kind, last_vendor=vendor, last_at=now)
    if kind in ESCALATING:
        if tier == cur:
            if s.window_start and now - s.window_start <= rule.window_seconds:
                blocks = s.window_blocks + count
                start = s.window_start
            else:
                blocks, start = count, now
            if blocks >= rule.escalate_after and cur < rule.top:
                return TierStep(_moved(s, cur + 1, now), "up")
            return TierStep(replace(s, window_start=start, window_blocks=blocks))
        if tier == cur - 1 and _probing(s, rule, now):
            return TierStep(replace(s, probe_streak=0, since=now))
        return TierStep(s)
    if kind == "ok" and tier == cur - 1 and _probing(s, rule, now):
        streak = s.probe_streak + count
        if streak >= rule.probe_successes:
            return TierStep(_moved(s, cur - 1, now), "down")
        return TierStep(replace(s, probe_streak=streak))
    return TierStep(s)


def _moved(s: DomainTier, tier: int, now: float) -> DomainTier:
    return replace(
        s,
        tier=tier,
        since=now,
        window_start=0.0,
        window_blocks=0,
        probe_streak=0,
        changes=s.changes + 1,
    )


def _probing(s: DomainTier, rule: TierRule, now: float) -> bool:
    return s.tier > 0 and now - s.since >= rule.probe_after_seconds


def probe_due(state: DomainTier | None, rule: TierRule, now: float) -> bool:
    """Whether requests to the domain may probe one tier down now (at a tier above 0
    for ``probe_after_seconds``): the worker then sends one in :data:`PROBE_ONE_IN`."""
    return state is not None and min(state.tier, rule.top) > 0 and _probing(state, rule, now)


def rule_of(config: Any) -> TierRule:
    """A type's rule from its config (its ``proxy_tiers`` and ``tier_*`` fields)."""
    tiers = getattr(config, "proxy_tiers", None) or []
    return TierRule(
        tiers=max(len(tiers), 1),
        escalate_after=int(getattr(config, "tier_escalate_after", DEFAULT_ESCALATE_AFTER)),
        window_seconds=float(getattr(config, "tier_window_seconds", DEFAULT_WINDOW_SECONDS)),
        probe_after_seconds=float(
            getattr(config, "tier_probe_after_seconds", DEFAULT_PROBE_AFTER_SECONDS)
        ),
        probe_successes=int(getattr(config, "tier_probe_successes", DEFAULT_PROBE_SUCCESSES)),
    )


def finite(x: float) -> float:
    """``x`` if finite, else 0 (a stored value that cannot be read)."""
    return x if math.isfinite(x) else 0.0
