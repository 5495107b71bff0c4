"""Conformance: the ``domains`` capability (proxy tiers per domain) on every backend —
unknown domains, a record that escalates at the backend's now, the stored type-wide
config's numbers over the caller's rule, pages by name, set_tier, forget, and a stored
row or config that cannot be read never breaking a read or a record."""

from __future__ import annotations

import pytest

from fleet.backends.base import Backend
from fleet.backends.redis.backend import RedisBackend
from fleet.backends.sqlite import SQLiteBackend
from fleet.core.clock import ManualClock
from fleet.core.errors import ContractValueError
from fleet.core.records import now
from fleet.core.tiers import DomainTier, TierRule

TYPE = "conf-domains"
RULE = TierRule(tiers=3, escalate_after=2, window_seconds=60, probe_after_seconds=100)


async def _blocks(
    backend: Backend, domain: str, n: int, tier: int = 0, rule: TierRule = RULE
) -> str | None:
    change = None
    for _ in range(n):
        got = await backend.domains.record(TYPE, domain, tier=tier, kind="blocked", rule=rule)
        change = got.change or change
    return change


async def test_unknown_domain_and_a_record_that_escalates(
    backend: Backend, frozen: ManualClock
) -> None:
    assert await backend.domains.get(TYPE, "shop.test") is None
    first = await backend.domains.record(
        TYPE, "Shop.TEST", tier=0, kind="challenge", vendor="cloudflare", rule=RULE
    )
    t0 = now()
    assert first.change is None
    assert first.state == DomainTier(
        domain="shop.test",
        since=t0,
        window_start=t0,
        window_blocks=1,
        counts={"0:challenge": 1},
        last_kind="challenge",
        last_vendor="cloudflare",
        last_at=t0,
    )
    frozen.advance(5.25)
    up = await backend.domains.record(TYPE, "shop.test", tier=0, kind="captcha", rule=RULE)
    assert up.change == "up" and up.state.tier == 1 and up.state.since == t0 + 5.25
    assert await backend.domains.get(TYPE, "SHOP.test") == up.state
    # the other worker's block of the same burst, met at tier 0: no second escalation
    late = await backend.domains.record(TYPE, "shop.test", tier=0, kind="blocked", rule=RULE)
    assert late.change is None and late.state.tier == 1 and late.state.changes == 1
    assert await backend.domains.get(TYPE, "shop.test") == late.state
    assert await backend.domains.get("another-type", "shop.test") is None


async def test_probes_step_down_at_the_backends_now(backend: Backend, frozen: ManualClock) -> None:
    rule = TierRule(tiers=2, escalate_after=1, probe_after_seconds=100, probe_successes=3)
    assert await _blocks(backend, "p.test", 1, rule=rule) == "up"
    early = await backend.domains.record(TYPE, "p.test", tier=0, kind="ok", rule=rule, count=5)
    assert early.change is None and early.state.probe_streak == 0
    frozen.advance(100)
    down = await backend.domains.record(TYPE, "p.test", tier=0, kind="ok", rule=rule, count=3)
    assert (
        down.change == "down"
        and down.state.tier == 0
        and down.state.counts
        == {
            "0:blocked": 1,
            "0:ok": 8,
        }
    )


async def test_the_stored_type_wide_config_wins_over_the_rule(
    backend: Backend, frozen: ManualClock
) -> None:
    # the caller's rule: 2 blocks escalate; the stored config says 4, and two tiers
    await backend.configs.publish(
        TYPE,
        {
            "proxy_tiers": ["direct", "residential"],
            "tier_escalate_after": 4,
            "tier_window_seconds": 10,
            "tier_probe_successes": "many",  # the wrong type: the caller's stands
        },
    )
    assert await _blocks(backend, "cfg.test", 3) is None
    assert await _blocks(backend, "cfg.test", 1) == "up"
    # two tiers: at the top now, however many blocks
    assert await _blocks(backend, "cfg.test", 8, tier=1) is None
    got = await backend.domains.get(TYPE, "cfg.test")
    assert got is not None and got.tier == 1 and got.changes == 1
    # its window is 10 s, not the rule's 60: blocks 11 s apart never add up
    for _ in range(5):
        assert await _blocks(backend, "w.test", 1) is None
        frozen.advance(11)
    # a worker override is not the type-wide config
    await backend.configs.publish(TYPE, {"tier_escalate_after": 1}, worker_id="w-1")
    assert await _blocks(backend, "w2.test", 3) is None
    # the type-wide config read at each record: a change holds at once
    await backend.configs.publish(TYPE, {"tier_escalate_after": 1})
    assert await _blocks(backend, "w3.test", 1) == "up"


async def test_pages_by_name(backend: Backend) -> None:
    names = [f"d{i:02d}.test" for i in range(7)] + ["a.test", "z.test"]
    for name in reversed(names):
        await backend.domains.record(TYPE, name, tier=0, kind="ok", rule=RULE)
    await backend.domains.record("other-type", "b.test", tier=0, kind="ok", rule=RULE)
    seen: list[str] = []
    after = None
    while True:
        page = await backend.domains.page(TYPE, after=after, limit=4)
        assert len(page.items) <= 4
        seen += [d.domain for d in page.items]
        if page.next is None:
            break
        after = page.next
    assert seen == sorted(names)
    whole = await backend.domains.page(TYPE, limit=500)
    assert [d.domain for d in whole.items] == sorted(names) and whole.next is None
    exact = await backend.domains.page(TYPE, limit=len(names))
    assert exact.next is None and len(exact.items) == len(names)
    rest = await backend.domains.page(TYPE, after="d05.test", limit=50)
    assert [d.domain for d in rest.items] == ["d06.test", "z.test"]
    assert (await backend.domains.page(TYPE, after="zz", limit=5)).items == ()
    assert (await backend.domains.page("never-made")).items == ()
    for bad in (0, 501, -1, True, 2.0):
        with pytest.raises(ContractValueError):
            await backend.domains.page(TYPE, limit=bad)  # type: ignore[arg-type]


async def test_set_tier_and_forget(backend: Backend, frozen: ManualClock) -> None:
    await _blocks(backend, "s.test", 1)
    t = now()
    moved = await backend.domains.set_tier(TYPE, "S.test", 2)
    assert moved == DomainTier(
        domain="s.test",
        tier=2,
        since=t,
        counts={"0:blocked": 1},
        last_kind="blocked",
        last_at=t,
        changes=1,
    )
    assert await backend.domains.get(TYPE, "s.test") == moved
    frozen.advance(1)
    again = await backend.domains.set_tier(TYPE, "s.test", 2)  # no move: no change
    assert again.changes == 1 and again.since == t + 1
    new = await backend.domains.set_tier(TYPE, "new.test", 0)
    assert new == DomainTier(domain="new.test", since=t + 1)
    assert [d.domain for d in (await backend.domains.page(TYPE)).items] == ["new.test", "s.test"]
    assert await backend.domains.forget(TYPE, "S.TEST")
    assert not await backend.domains.forget(TYPE, "s.test")
    assert await backend.domains.get(TYPE, "s.test") is None
    assert [d.domain for d in (await backend.domains.page(TYPE)).items] == ["new.test"]
    fresh = await backend.domains.record(TYPE, "s.test", tier=2, kind="ok", rule=RULE)
    assert fresh.state.tier == 0 and fresh.state.counts == {"2:ok": 1}
    for bad_tier in (-1, 1.5, None, True, 10_000):
        with pytest.raises(ContractValueError):
            await backend.domains.set_tier(TYPE, "s.test", bad_tier)  # type: ignore[arg-type]


async def test_arguments_are_checked(backend: Backend) -> None:
    bad: list[dict[str, object]] = [
        {"domain": "has space"},
        {"domain": ""},
        {"kind": "nope"},
        {"tier": -1},
        {"tier": "0"},
        {"count": 0},
        {"count": 1.0},
        {"vendor": 3},
    ]
    for wrong in bad:
        args: dict[str, object] = {"domain": "x.test", "tier": 0, "kind": "ok", "count": 1}
        args.update(wrong)
        domain = args.pop("domain")
        with pytest.raises(ContractValueError):
            await backend.domains.record(TYPE, domain, rule=RULE, **args)  # type: ignore[arg-type]
    assert (await backend.domains.page(TYPE)).items == ()
    with pytest.raises(ContractValueError):
        await backend.domains.get(TYPE, "a b")
    with pytest.raises(ContractValueError):
        await backend.domains.forget(TYPE, "")


async def _corrupt_row(backend: Backend, domain: str) -> None:
    if isinstance(backend, RedisBackend):
        key = backend._keys.domain_keys(TYPE)[0]
        await backend._r.hset(
            key, domain, '{"tier": "x", "since": "abc", "counts": [1], "changes": 1.5'
        )
        return
    assert isinstance(backend, SQLiteBackend)
    await backend._db.write(
        lambda c: c.execute(
            "UPDATE domains SET counts = '{not json', since = 'abc', tier = 'x', "
            "window_blocks = 'y' "
            "WHERE type = ? AND domain = ?",
            (TYPE, domain),
        )
    )


async def _corrupt_config(backend: Backend, text: str) -> None:
    if isinstance(backend, RedisBackend):
        await backend._r.set(backend._keys.config(TYPE), text)
        return
    assert isinstance(backend, SQLiteBackend)
    await backend._db.write(
        lambda c: c.execute(
            "INSERT OR REPLACE INTO config (type, worker_id, config) VALUES (?, '', ?)",
            (TYPE, text),
        )
    )


async def test_an_unreadable_row_or_config_breaks_nothing(
    backend: Backend, frozen: ManualClock
) -> None:
    await _blocks(backend, "bad.test", 1)
    await _blocks(backend, "good.test", 1)
    await _corrupt_row(backend, "bad.test")
    got = await backend.domains.get(TYPE, "bad.test")
    assert got is not None and got.domain == "bad.test" and got.counts == {} and got.tier == 0
    page = await backend.domains.page(TYPE)
    assert [d.domain for d in page.items] == ["bad.test", "good.test"]
    assert page.items[1].counts == {"0:blocked": 1}
    after = await backend.domains.record(TYPE, "bad.test", tier=0, kind="blocked", rule=RULE)
    assert after.state.counts["0:blocked"] == 1 and after.state.tier == 0
    assert await backend.domains.get(TYPE, "bad.test") == after.state
    # a config that is not JSON, or JSON but not an object: the caller's rule holds
    texts = ("{not json", "[1, 2]", '"text"', '{"proxy_tiers": 3, "tier_escalate_after": true}')
    for i, text in enumerate(texts):
        await _corrupt_config(backend, text)
        assert await _blocks(backend, f"c{i}.test", 2) == "up", text
    if isinstance(backend, RedisBackend):  # a config key of another type: the same
        await backend._r.delete(backend._keys.config(TYPE))
        await backend._r.hset(backend._keys.config(TYPE), "a", "b")
        assert await _blocks(backend, "hash.test", 2) == "up"


async def test_purging_a_type_forgets_its_domains(backend: Backend, frozen: ManualClock) -> None:
    await _blocks(backend, "gone.test", 1)
    await backend.domains.record("other-type", "kept.test", tier=0, kind="ok", rule=RULE)
    await backend.purge_type(TYPE)
    assert await backend.domains.get(TYPE, "gone.test") is None
    assert (await backend.domains.page(TYPE)).items == ()
    assert await backend.domains.get("other-type", "kept.test") is not None


async def test_record_counts_is_record_for_each(backend: Backend, frozen: ManualClock) -> None:
    counts = [("a.test", 0, "ok", 5), ("b.test", 0, "blocked", 2), ("a.test", 0, "blocked", 1)]
    steps = await backend.domains.record_counts(TYPE, counts, rule=RULE)
    assert [s.state.domain for s in steps] == ["a.test", "b.test", "a.test"]
    assert steps[1].change == "up"  # escalate_after 2: two blocks at once move it
    a = await backend.domains.get(TYPE, "a.test")
    assert a is not None and a.counts == {"0:ok": 5, "0:blocked": 1}
    b = await backend.domains.get(TYPE, "b.test")
    assert b is not None and b.tier == 1
    with pytest.raises(ContractValueError):
        await backend.domains.record_counts(TYPE, [("x y", 0, "ok", 1)], rule=RULE)
