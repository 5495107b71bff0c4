"""The tier rule per domain (``fleet.core.tiers.step``), on its own: escalation within a
window, one escalation for one burst met by two workers, the top, probes one tier down
and the step down, what a probe block and ``throttled`` do, counts per tier, a shortened
tiers list, batches."""

from __future__ import annotations

import pytest

from fleet.core.blocks.verdicts import VerdictKind
from fleet.core.errors import ContractValueError
from fleet.core.tiers import (
    DomainTier,
    TierRule,
    TierStep,
    check_domain,
    check_kind,
    probe_due,
    rule_of,
    step,
)

T0 = 1_800_000_000.0
RULE = TierRule(
    tiers=3, escalate_after=3, window_seconds=60.0, probe_after_seconds=600.0, probe_successes=2
)


def rec(
    s: DomainTier | None,
    at: float,
    kind: VerdictKind = "blocked",
    tier: int | None = None,
    rule: TierRule = RULE,
    count: int = 1,
) -> TierStep:
    here = (s.tier if s is not None else 0) if tier is None else tier
    return step(s, rule, domain="shop.test", tier=here, kind=kind, now=at, count=count)


def at_tier(tier: int, since: float = T0) -> DomainTier:
    return DomainTier(domain="shop.test", tier=tier, since=since)


def test_a_new_domain_starts_at_tier_zero_since_its_first_verdict() -> None:
    got = rec(None, T0, "ok")
    assert got.change is None
    assert got.state == DomainTier(
        domain="shop.test",
        since=T0,
        counts={"0:ok": 1},
        last_kind="ok",
        last_at=T0,
    )


def test_escalates_after_n_blocks_within_the_window() -> None:
    s = rec(None, T0).state
    s = rec(s, T0 + 10, "challenge").state
    assert s.tier == 0 and s.window_blocks == 2 and s.window_start == T0
    up = rec(s, T0 + 60, "captcha")  # the window's edge still counts
    assert up.change == "up"
    assert up.state.tier == 1 and up.state.since == T0 + 60 and up.state.changes == 1
    assert (up.state.window_start, up.state.window_blocks, up.state.probe_streak) == (0.0, 0, 0)


def test_blocks_spread_beyond_the_window_never_escalate() -> None:
    s: DomainTier | None = None
    for i in range(10):
        step_ = rec(s, T0 + i * 61)
        assert step_.change is None
        s = step_.state
    assert s is not None and s.tier == 0 and s.window_blocks == 1 and s.window_start == T0 + 9 * 61
    # two in a window, then the third just past it: a new window of one
    s = rec(rec(s, T0 + 1000).state, T0 + 1030).state
    assert s.window_blocks == 2
    late = rec(s, T0 + 1061)
    assert late.change is None and late.state.window_blocks == 1


def test_one_burst_met_by_two_workers_escalates_once() -> None:
    s: DomainTier | None = None
    for i in range(3):
        s = rec(s, T0 + i, tier=0).state
    assert s is not None and s.tier == 1
    # the other worker's requests left at tier 0 before the change: they never move it
    for i in range(5):
        got = rec(s, T0 + 3 + i, tier=0)
        assert got.change is None
        s = got.state
    assert s.tier == 1 and s.changes == 1 and s.window_blocks == 0
    assert s.count("blocked", 0) == 8 and s.count("blocked", 1) == 0


def test_stays_at_the_top() -> None:
    s = at_tier(2)
    for i in range(6):
        got = rec(s, T0 + i, tier=2)
        assert got.change is None
        s = got.state
    assert s.tier == 2 and s.changes == 0 and s.window_blocks == 6


def test_probe_due_only_after_probe_after_seconds_above_tier_zero() -> None:
    assert not probe_due(None, RULE, T0)
    assert not probe_due(at_tier(0), RULE, T0 + 10_000)
    assert not probe_due(at_tier(1), RULE, T0 + 599.9)
    assert probe_due(at_tier(1), RULE, T0 + 600)
    # a tier past the top of a shortened list reads as the top, tier 0 of one tier
    assert not probe_due(at_tier(2), TierRule(tiers=1, probe_after_seconds=0), T0 + 600)


def test_probe_oks_in_a_row_step_down() -> None:
    s = at_tier(2)
    early = rec(s, T0 + 10, "ok", tier=1)
    assert early.change is None and early.state.probe_streak == 0  # not probing yet
    s = rec(early.state, T0 + 600, "ok", tier=1).state
    assert s.probe_streak == 1 and s.tier == 2
    s = rec(s, T0 + 601, "ok", tier=2).state  # an ok at the tier itself: no probe
    assert s.probe_streak == 1
    down = rec(s, T0 + 602, "ok", tier=1)
    assert down.change == "down"
    assert down.state.tier == 1 and down.state.since == T0 + 602 and down.state.probe_streak == 0
    assert down.state.changes == 1
    assert not probe_due(down.state, RULE, T0 + 602 + 599)


def test_a_probe_block_ends_the_streak_and_starts_the_wait_again() -> None:
    s = rec(at_tier(1), T0 + 700, "ok", tier=0).state
    assert s.probe_streak == 1
    got = rec(s, T0 + 701, "blocked", tier=0)
    assert got.change is None
    assert got.state.probe_streak == 0 and got.state.since == T0 + 701 and got.state.tier == 1
    assert got.state.window_blocks == 0  # a block one tier down is no block at this tier
    assert not probe_due(got.state, RULE, T0 + 701 + 599)
    assert probe_due(got.state, RULE, T0 + 701 + 600)


def test_throttled_neither_escalates_nor_breaks_a_streak() -> None:
    s: DomainTier | None = None
    for i in range(10):
        got = rec(s, T0 + i, "throttled")
        assert got.change is None
        s = got.state
    assert s is not None and s.tier == 0 and s.window_blocks == 0 and s.count("throttled") == 10
    p = rec(at_tier(1), T0 + 600, "ok", tier=0).state
    p = rec(p, T0 + 601, "throttled", tier=0).state
    assert p.probe_streak == 1 and p.since == T0
    assert rec(p, T0 + 602, "ok", tier=0).change == "down"


def test_counts_are_kept_per_tier_and_kind_with_the_last_verdict() -> None:
    s = rec(None, T0, "ok", count=4).state
    s = step(s, RULE, domain="shop.test", tier=1, kind="blocked", vendor="akamai", now=T0 + 1).state
    st = step(
        s, RULE, domain="shop.test", tier=0, kind="captcha", vendor="hcaptcha", now=T0 + 2
    ).state
    assert st.counts == {"0:ok": 4, "1:blocked": 1, "0:captcha": 1}
    assert st.count("ok") == 4 and st.count("blocked", 1) == 1 and st.count("blocked", 0) == 0
    assert (st.last_kind, st.last_vendor, st.last_at) == ("captcha", "hcaptcha", T0 + 2)


def test_a_shortened_tiers_list_clamps_the_tier() -> None:
    one = TierRule(tiers=2, escalate_after=1)
    got = rec(at_tier(3), T0, "blocked", tier=1, rule=one)
    # tier 3 reads as the top (1): a block met there is at the current tier, at the top
    assert got.change is None and got.state.tier == 1 and got.state.window_blocks == 1
    assert rec(at_tier(3), T0, "ok", tier=0, rule=one).state.tier == 1


def test_a_batch_counts_as_many() -> None:
    up = rec(None, T0, "blocked", count=3)
    assert up.change == "up" and up.state.counts == {"0:blocked": 3}
    s = rec(at_tier(1), T0 + 600, "ok", tier=0, count=5)
    assert s.change == "down" and s.state.counts == {"0:ok": 5}
    assert rec(None, T0, "blocked", count=2).change is None


def test_rule_of_a_config_and_the_checks() -> None:
    class Config:
        proxy_tiers = ["direct", "dc", "resi"]
        tier_escalate_after = 2
        tier_window_seconds = 30
        tier_probe_after_seconds = 90
        tier_probe_successes = 4

    assert rule_of(Config()) == TierRule(3, 2, 30.0, 90.0, 4)
    assert rule_of(object()) == TierRule()
    assert check_domain("Shop.EXAMPLE") == "shop.example"
    for bad in ("", "a b", "x" * 254, None, "a\x00"):
        with pytest.raises(ContractValueError):
            check_domain(bad)
    assert check_kind("ok") == "ok"
    with pytest.raises(ContractValueError):
        check_kind("nope")
