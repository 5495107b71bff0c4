"""Differential: proxy tiers per domain on SQLite (``sqlite/domains.py``: the pure rule
:func:`fleet.core.tiers.step` in Python; memory:// runs the same) against Redis (its only
other copy, ``lua/domains.lua``), and both against the pure rule run here, on the same
random sequences under one stopped clock (``fleet.core.clock``).

A sequence records verdicts (domains, tiers met, kinds, counts, vendors, callers' rules
of different numbers), moves the clock (to a window's edge and past it, by fractions of
a second, so times are compared to the last bit), publishes type-wide configs (fewer
tiers, other numbers, fields of the wrong type), sets tiers and forgets domains. Every
step's state and change, and each domain's state at the end, must be the same three
times.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from redis.crc import key_slot

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.redis.keys import KeySpace
from fleet.backends.redis.scripts import load_source
from fleet.core import clock
from fleet.core.blocks.verdicts import ESCALATING, VERDICT_KINDS
from fleet.core.clock import ManualClock
from fleet.core.tier_store import placed, stored_rule
from fleet.core.tiers import DomainTier, TierRule, step

DOMAINS = ["a.test", "b.test", "c.test"]
KINDS = [*VERDICT_KINDS, "blocked", "blocked", "ok", "ok"]
VENDORS = [None, "cloudflare", "datadome", ""]
RULES = [
    TierRule(
        tiers=3, escalate_after=2, window_seconds=10.0, probe_after_seconds=15.0, probe_successes=2
    ),
    TierRule(
        tiers=4, escalate_after=1, window_seconds=0.3, probe_after_seconds=5.5, probe_successes=3
    ),
    TierRule(
        tiers=2, escalate_after=3, window_seconds=30.0, probe_after_seconds=0.0, probe_successes=1
    ),
]
CONFIGS: list[dict[str, Any]] = [
    {},
    {"proxy_tiers": ["direct", "dc"], "tier_escalate_after": 2},
    {"proxy_tiers": ["direct", "dc", "resi", "mobile"], "tier_window_seconds": 0.7},
    {"proxy_tiers": [], "tier_probe_after_seconds": 3, "tier_probe_successes": 2.0},
    {"proxy_tiers": "direct", "tier_escalate_after": 1.5, "tier_window_seconds": "9"},
    {"tier_escalate_after": True, "tier_probe_successes": None, "proxy_tiers": {}},
    {"proxy_tiers": ["direct", None, "resi"], "tier_probe_after_seconds": 12.25},
]
ADVANCES = [0.0, 0.1, 0.3, 1.0, 2.5, 5.5, 10.0, 15.0, 30.0]
SEQUENCES = 150


def sequence(rng: random.Random, length: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(length):
        kind = rng.choices(["record", "tick", "config", "set", "forget"], [12, 6, 1, 1, 1])[0]
        if kind == "record":
            ops.append(
                (
                    "record",
                    rng.choice(DOMAINS),
                    rng.choice([0, 0, 1, 1, 2, 3]),
                    rng.choice(KINDS),
                    rng.choice(VENDORS),
                    rng.choice([1, 1, 1, 2, 4]),
                    rng.randrange(len(RULES)),
                )
            )
        elif kind == "tick":
            ops.append(("tick", rng.choice(ADVANCES)))
        elif kind == "config":
            ops.append(("config", rng.randrange(len(CONFIGS))))
        elif kind == "set":
            ops.append(("set", rng.choice(DOMAINS), rng.choice([0, 1, 2, 5])))
        else:
            ops.append(("forget", rng.choice(DOMAINS)))
    return ops


def _shown(s: DomainTier | None) -> Any:
    return None if s is None else s.to_dict()


async def run(
    backend: Backend, type_: str, ops: list[tuple[Any, ...]], manual: ManualClock
) -> list[Any]:
    d = backend.domains
    trace: list[Any] = []
    for op in ops:
        if op[0] == "record":
            _, domain, tier, kind, vendor, count, r = op
            got = await d.record(
                type_, domain, tier=tier, kind=kind, vendor=vendor, rule=RULES[r], count=count
            )
            trace.append((got.change, _shown(got.state)))
        elif op[0] == "tick":
            manual.advance(op[1])
        elif op[0] == "config":
            await backend.configs.publish(type_, CONFIGS[op[1]])
        elif op[0] == "set":
            trace.append(_shown(await d.set_tier(type_, op[1], op[2])))
        else:
            trace.append(await d.forget(type_, op[1]))
    trace.append([_shown(await d.get(type_, name)) for name in DOMAINS])
    page = await d.page(type_, limit=2)
    rest = await d.page(type_, after=page.next, limit=2) if page.next else None
    trace.append([s.domain for s in page.items] + ([s.domain for s in rest.items] if rest else []))
    return trace


def model(ops: list[tuple[Any, ...]], start: float) -> list[Any]:
    """The sequence by the pure rule: what both engines must answer."""
    t = start
    config: dict[str, Any] = {}
    known: dict[str, DomainTier] = {}
    trace: list[Any] = []
    for op in ops:
        if op[0] == "record":
            _, domain, tier, kind, vendor, count, r = op
            rule = stored_rule(config, RULES[r])
            got = step(
                known.get(domain),
                rule,
                domain=domain,
                tier=tier,
                kind=kind,
                vendor=vendor,
                now=t,
                count=count,
            )
            known[domain] = got.state
            trace.append((got.change, _shown(got.state)))
        elif op[0] == "tick":
            t += op[1]
        elif op[0] == "config":
            config = CONFIGS[op[1]]
        elif op[0] == "set":
            known[op[1]] = placed(known.get(op[1]), op[1], op[2], t)
            trace.append(_shown(known[op[1]]))
        else:
            trace.append(known.pop(op[1], None) is not None)
    trace.append([_shown(known.get(name)) for name in DOMAINS])
    trace.append(sorted(known))
    return trace


async def test_domains_agree_on_sqlite_redis_and_the_rule(tmp_path: Path, redis_url: str) -> None:
    sq = await open_backend(f"sqlite:///{tmp_path / 'domains.db'}")
    rd = await open_backend(redis_url)
    ups = downs = 0
    try:
        for seed in range(SEQUENCES):
            rng = random.Random(seed)
            ops = sequence(rng, rng.randrange(10, 70))
            # A start with a fraction: differences of times are inexact in binary, as in use.
            start = 1_800_000_000.1 + seed * 0.37
            expected = model(ops, start)
            for backend in (sq, rd):
                with clock.frozen(start) as manual:
                    got = await run(backend, f"diff-{seed}", ops, manual)
                assert got == expected, (seed, type(backend).__name__, ops)
            changes = [step_[0] for step_ in expected if isinstance(step_, tuple)]
            ups += changes.count("up")
            downs += changes.count("down")
    finally:
        await sq.close()
        await rd.close()
    # The sequences did move tiers both ways.
    assert ups > SEQUENCES and downs > SEQUENCES // 5, (ups, downs)


def test_the_lua_escalating_kinds_are_the_python_ones() -> None:
    table = re.search(r"local ESCALATING = \{([^}]*)\}", load_source("domains"))
    assert table is not None
    assert set(re.findall(r"(\w+) = true", table.group(1))) == set(ESCALATING)


def test_the_scripts_keys_share_the_types_slot_on_a_cluster() -> None:
    ks = KeySpace("acme", cluster=True)
    names = ks.domain_keys("scrape")
    assert names == [
        "acme:fleet:domains:{scrape}",
        "acme:fleet:domains:{scrape}:names",
        "acme:fleet:config:{scrape}",
    ]
    assert {key_slot(n.encode()) for n in names} == {key_slot(b"scrape")}
    assert KeySpace().domain_keys("scrape")[:2] == [
        "fleet:domains:scrape",
        "fleet:domains:scrape:names",
    ]
