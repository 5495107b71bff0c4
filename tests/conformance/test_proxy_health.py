"""Conformance of the ProxyHealth capability (``proxy_take``/``renew``/``release``/
``report``/``list``/``sticky``): scores and thresholds, cool-downs and their end,
places under a cap and their expiry, places counted without a cap, spreading them
(``spread=True``, held to :func:`spread_choice`), sticky choices, listing."""

from __future__ import annotations

import random
import time

import pytest

from fleet.backends.base import Backend
from fleet.core.capabilities.proxies import (
    MAX_REASON_LEN,
    PLACE_RETRY_SECONDS,
    ProxyInfo,
    spread_choice,
)
from fleet.core.clock import ManualClock

from .helpers import elapse

A, B, C = "http://a.test:8080", "http://b.test:8080", "http://c.test:8080#3f2a9c01bd"


async def info(backend: Backend, key: str) -> ProxyInfo:
    found = {p.key: p for p in await backend.proxies.listing()}
    return found[key]


async def bad(
    backend: Backend, key: str, *, threshold: int = 1, cooldown: float = 60.0
) -> float | None:
    return await backend.proxies.report(
        key, ok=False, threshold=threshold, cooldown_seconds=cooldown, reason="403"
    )


# ------------------------------------------------------------ scores and cool-downs


async def test_threshold_counts_bad_reports_in_a_row(backend: Backend) -> None:
    assert await bad(backend, A, threshold=3) is None
    assert await bad(backend, A, threshold=3) is None
    assert (await info(backend, A)).score == 2
    # An ok report starts the count again.
    assert await backend.proxies.report(A, ok=True, threshold=3) is None
    p = await info(backend, A)
    assert (p.score, p.oks, p.failures, p.cooling_until) == (0, 1, 2, None)
    before = time.time()
    assert await bad(backend, A, threshold=3) is None
    assert await bad(backend, A, threshold=3) is None
    until = await bad(backend, A, threshold=3, cooldown=60)
    assert until is not None and before + 60 <= until <= time.time() + 60
    p = await info(backend, A)
    assert p.cooling_until == pytest.approx(until)
    assert (p.score, p.failures, p.last_reason) == (3, 5, "403")
    assert p.last_bad_at is not None and before <= p.last_bad_at <= time.time()


async def test_reports_during_a_cool_down_count_but_do_not_extend_it(
    backend: Backend, frozen: ManualClock
) -> None:
    until = await bad(backend, A, cooldown=60)
    assert until is not None
    frozen.advance(0.01)
    assert await bad(backend, A, cooldown=60) == pytest.approx(until)
    assert await backend.proxies.report(A, ok=True) == pytest.approx(until)  # runs on
    p = await info(backend, A)
    assert (p.failures, p.oks, p.score) == (2, 1, 0)
    assert p.cooling_until == pytest.approx(until)


async def test_a_cool_down_ends_and_the_next_bad_report_cools_again(
    backend: Backend, frozen: ManualClock
) -> None:
    assert await bad(backend, A, cooldown=0.3) is not None
    assert (await backend.proxies.take([A, B], "t")).key == B
    frozen.advance(0.35)
    assert (await info(backend, A)).cooling_until is None
    assert (await backend.proxies.take([A, B], "t", held=B)).key == A  # back in use
    # Still on probation: its score was not reset by the cool-down.
    assert await bad(backend, A, threshold=2, cooldown=0.3) is not None


async def test_reasons_are_cut(backend: Backend) -> None:
    await backend.proxies.report(A, ok=False, reason="x" * 1000)
    assert (await info(backend, A)).last_reason == "x" * MAX_REASON_LEN
    await backend.proxies.report(A, ok=False, reason="")
    assert (await info(backend, A)).last_reason is None


# ------------------------------------------------------------ taking


async def test_take_skips_cooling_proxies_in_order(backend: Backend) -> None:
    assert (await backend.proxies.take([A, B, C], "t1")).key == A
    await bad(backend, A)
    got = await backend.proxies.take([A, B, C], "t2")
    assert (got.key, got.cooling) == (B, False)
    await bad(backend, B)
    assert (await backend.proxies.take([A, B, C], "t3")).key == C
    p = await info(backend, A)
    assert (p.uses, p.in_use) == (1, 1)  # t1 still holds its place on the cooling proxy


async def test_every_candidate_cooling_gives_the_least_bad(backend: Backend) -> None:
    await bad(backend, A, cooldown=60)
    await bad(backend, B, cooldown=30)  # ends first
    await bad(backend, C, cooldown=90)
    got = await backend.proxies.take([A, B, C], "t")
    assert (got.key, got.cooling) == (B, True)
    # A healthy candidate wins again.
    got = await backend.proxies.take([A, B, C, "http://d.test:1"], "t", held=B)
    assert (got.key, got.cooling) == ("http://d.test:1", False)
    assert (await info(backend, B)).in_use == 0  # the held place moved


async def test_a_repeated_candidate_counts_once(backend: Backend) -> None:
    got = await backend.proxies.take([A, A, B], "t", max_concurrency=1)
    assert got.key == A
    assert (await info(backend, A)).uses == 1


async def test_looking_at_candidates_stores_nothing(backend: Backend) -> None:
    await backend.proxies.take([A, B, C], "t")
    assert [p.key for p in await backend.proxies.listing()] == [A]


# ------------------------------------------------------------ places


async def test_the_cap_holds_and_waits_are_short(backend: Backend) -> None:
    assert (await backend.proxies.take([A, B], "t1", max_concurrency=1)).key == A
    assert (await backend.proxies.take([A, B], "t2", max_concurrency=1)).key == B
    full = await backend.proxies.take([A, B], "t3", max_concurrency=1)
    assert full.key is None and 0 < full.wait <= PLACE_RETRY_SECONDS
    # A token that holds a place keeps it (a retried take, or ensure() per task).
    assert (await backend.proxies.take([A, B], "t1", held=A, max_concurrency=1)).key == A
    assert (await info(backend, A)).uses == 2
    assert await backend.proxies.release(A, "t1")
    assert not await backend.proxies.release(A, "t1")
    assert not await backend.proxies.release(A, "nobody")
    assert not await backend.proxies.release("http://unknown:1", "t1")
    assert (await backend.proxies.take([A, B], "t3", max_concurrency=1)).key == A
    # No cap: places are still counted (the in-use figure).
    assert (await backend.proxies.take([A], "t4")).key == A
    assert (await info(backend, A)).in_use == 2


async def test_a_cooling_proxy_is_not_a_fallback_while_a_healthy_one_is_full(
    backend: Backend,
) -> None:
    await bad(backend, A)
    assert (await backend.proxies.take([A, B], "t1", max_concurrency=1)).key == B
    got = await backend.proxies.take([A, B], "t2", max_concurrency=1)
    assert got.key is None and got.wait > 0


async def test_places_expire_and_renew(backend: Backend, frozen: ManualClock) -> None:
    assert (await backend.proxies.take([A], "dies", max_concurrency=1, hold_seconds=0.3)).key == A
    assert (await backend.proxies.take([A], "lives", max_concurrency=2, hold_seconds=0.3)).key == A
    wait = (await backend.proxies.take([A], "t", max_concurrency=2)).wait
    assert 0 < wait <= PLACE_RETRY_SECONDS
    frozen.advance(0.15)
    assert await backend.proxies.renew(A, "lives", 0.5)
    frozen.advance(0.25)
    # The worker of "dies" stopped renewing: its place is free again, "lives" kept its own.
    assert (await info(backend, A)).in_use == 1
    assert not await backend.proxies.renew(A, "dies", 5)
    assert (await backend.proxies.take([A], "t", max_concurrency=2)).key == A
    assert (await backend.proxies.take([A], "u", max_concurrency=2)).key is None
    assert not await backend.proxies.renew("http://unknown:1", "t", 5)


async def test_moving_frees_the_held_place(backend: Backend) -> None:
    assert (await backend.proxies.take([A, B], "t", max_concurrency=1)).key == A
    await bad(backend, A)
    assert (await backend.proxies.take([A, B], "t", held=A, max_concurrency=1)).key == B
    assert (await info(backend, A)).in_use == 0
    assert (await info(backend, B)).in_use == 1


# ------------------------------------------------------------ spreading the load


async def hold(backend: Backend, key: str, *tokens: str) -> None:
    """Each token takes a place on ``key`` (no cap, no spreading)."""
    for token in tokens:
        assert (await backend.proxies.take([key], token)).key == key


async def in_use(backend: Backend, *keys: str) -> list[int]:
    found = {p.key: p.in_use for p in await backend.proxies.listing()}
    return [found.get(k, 0) for k in keys]


async def test_places_are_counted_without_a_cap(backend: Backend, frozen: ManualClock) -> None:
    await hold(backend, A, "t1", "t2", "t3")
    await hold(backend, B, "t4")
    assert await in_use(backend, A, B) == [3, 1]
    assert await backend.proxies.release(A, "t2")
    # Moving frees the held place, and a short hold lapses, with no cap either.
    assert (await backend.proxies.take([B], "t1", held=A)).key == B
    assert (await backend.proxies.take([C], "brief", hold_seconds=0.2)).key == C
    assert await in_use(backend, A, B, C) == [1, 2, 1]
    frozen.advance(0.25)
    assert await in_use(backend, A, B, C) == [1, 2, 0]


async def test_spread_moves_a_slot_off_a_proxy_above_its_share(backend: Backend) -> None:
    await hold(backend, A, "t1", "t2")
    await hold(backend, B, "t3")
    # Staying on A would make it 3 of 4 places over 3 proxies (share 2): to C, the least used.
    assert (await backend.proxies.take([A, B, C], "t4", spread=True)).key == C
    # B would carry 2 of 5 (share 2): it stays.
    assert (await backend.proxies.take([B, C, A], "t5", spread=True)).key == B
    # Without spread the first healthy candidate wins, as before.
    assert (await backend.proxies.take([A, B, C], "t6")).key == A
    assert await in_use(backend, A, B, C) == [3, 2, 1]


async def test_spread_counts_the_callers_own_place_once(backend: Backend) -> None:
    await hold(backend, A, "me", "t2")
    await hold(backend, B, "t3")
    await hold(backend, C, "t4")
    # A holds "me" and one other: 2 of 4 places, share 2 — the slot keeps its place.
    assert (await backend.proxies.take([A, B, C], "me", held=A, spread=True)).key == A
    assert await in_use(backend, A, B, C) == [2, 1, 1]


async def test_a_recovered_proxy_takes_its_share_again(
    backend: Backend, frozen: ManualClock
) -> None:
    await bad(backend, A, cooldown=0.4)
    tokens = [f"s{i}" for i in range(6)]
    held: dict[str, str] = {}
    for i, token in enumerate(tokens):
        order = [A, B, C][i % 3 :] + [A, B, C][: i % 3]
        got = await backend.proxies.take(order, token, spread=True)
        assert got.key is not None
        held[token] = got.key
    assert await in_use(backend, A, B, C) == [0, 3, 3]  # spread over the healthy two
    frozen.advance(0.45)
    # One take per slot, each preferring the proxy it holds (as ensure() does).
    for token in tokens:
        here = held[token]
        order = [here, *(k for k in (A, B, C) if k != here)]
        got = await backend.proxies.take(order, token, held=here, spread=True)
        assert got.key is not None
        held[token] = got.key
    assert await in_use(backend, A, B, C) == [2, 2, 2]


async def test_spread_never_picks_a_full_or_cooling_proxy(backend: Backend) -> None:
    await hold(backend, A, "t1", "t2")
    await bad(backend, C)
    # A is at the cap and C cools: B, though the slot prefers A.
    assert (await backend.proxies.take([A, B, C], "t3", max_concurrency=2, spread=True)).key == B
    assert (await backend.proxies.take([A, B, C], "t4", max_concurrency=2, spread=True)).key == B
    full = await backend.proxies.take([A, B, C], "t5", max_concurrency=2, spread=True)
    assert full.key is None and full.wait > 0
    # Every candidate cooling: the fallback is unchanged by spread.
    await bad(backend, A, cooldown=30)
    await bad(backend, B, cooldown=90)
    got = await backend.proxies.take([B, C, A], "t6", spread=True)
    assert (got.key, got.cooling) == (A, True)


async def test_a_sticky_name_is_not_spread(backend: Backend) -> None:
    assert (await backend.proxies.take([A, B], "t1", sticky="acct")).key == A
    await hold(backend, A, "t2", "t3")
    got = await backend.proxies.take([B, A], "t4", sticky="acct", spread=True)
    assert got.key == A and await backend.proxies.sticky("acct") == A


async def test_spread_follows_spread_choice(backend: Backend) -> None:
    """Random places, cool-downs, caps and preferences: every backend takes what the
    pure rule names (Redis runs it in Lua, memory and SQLite call it)."""
    rng = random.Random(23)
    for case in range(40):
        names = [f"http://p{n}.case{case}.test:1" for n in range(rng.randint(1, 4))]
        loads = {k: rng.randint(0, 4) for k in names}
        for k in names:
            await hold(backend, k, *(f"c{case}-{k}-{i}" for i in range(loads[k])))
        cooling = {k for k in names if rng.random() < 0.25}
        for k in cooling:
            await bad(backend, k)
        cap = rng.choice([None, 2, 3, 4])
        order = rng.sample(names, len(names))
        mine = rng.choice([None, *names])  # the caller may already hold a place
        token = f"me-{case}"
        if mine is not None:
            await hold(backend, mine, token)
        healthy = [k for k in order if k not in cooling]
        full = {k for k in healthy if cap is not None and k != mine and loads[k] >= cap}
        want = spread_choice([(k, loads[k]) for k in healthy], order[0], full)
        got = await backend.proxies.take(order, token, held=mine, max_concurrency=cap, spread=True)
        if healthy:
            assert got.key == want, (case, order, loads, cooling, cap, mine)
            assert not got.cooling
        else:
            assert got.cooling or got.key is None, (case, got)


def test_spread_choice() -> None:
    assert spread_choice([], A) is None
    assert spread_choice([(A, 5)], A) == A  # alone: always its share
    assert spread_choice([(A, 1), (B, 1), (C, 1)], A) == A  # even: stays
    assert spread_choice([(A, 2), (B, 1), (C, 0)], A) == C  # above its share
    assert spread_choice([(A, 2), (B, 2), (C, 0)], B) == C
    assert spread_choice([(A, 1), (B, 0), (C, 0)], A) == B  # a tie: the first in order
    assert spread_choice([(A, 0), (B, 3)], A, full={A}) == B  # full: no place to stay
    assert spread_choice([(A, 0), (B, 3)], C) == A  # current gone: the least used
    assert spread_choice([(A, 0), (B, 3)], None, full={A, B}) is None


# ------------------------------------------------------------ sticky choices


async def test_a_sticky_name_keeps_its_proxy(backend: Backend) -> None:
    first = await backend.proxies.take([B, A, C], "t1", sticky="acct-1")
    assert first.key == B
    assert await backend.proxies.sticky("acct-1") == B
    # Another slot, another order of preference: the stored choice wins.
    assert (await backend.proxies.take([C, A, B], "t2", sticky="acct-1")).key == B
    # ... and waits for a place rather than moving.
    full = await backend.proxies.take([C, A, B], "t3", sticky="acct-1", max_concurrency=2)
    assert full.key is None and full.wait > 0
    assert await backend.proxies.sticky("acct-1") == B
    assert await backend.proxies.sticky("other") is None


async def test_a_sticky_choice_moves_when_its_proxy_cools(backend: Backend) -> None:
    assert (await backend.proxies.take([A, B], "t", sticky="acct")).key == A
    await bad(backend, A)
    assert (await backend.proxies.take([A, B], "t", held=A, sticky="acct")).key == B
    assert await backend.proxies.sticky("acct") == B
    # A choice outside the candidates (another proxy list) is replaced too.
    assert (await backend.proxies.take([C], "u", sticky="acct")).key == C
    assert await backend.proxies.sticky("acct") == C


async def test_a_sticky_choice_expires(backend: Backend, frozen: ManualClock) -> None:
    assert (await backend.proxies.take([A, B], "t", sticky="s", sticky_seconds=0.2)).key == A
    await elapse(backend, frozen, 0.25)
    assert await backend.proxies.sticky("s") is None
    assert (await backend.proxies.take([B, A], "t", held=A, sticky="s")).key == B


# ------------------------------------------------------------ listing


async def test_listing_is_sorted_and_limited(backend: Backend) -> None:
    assert await backend.proxies.listing() == []
    await backend.proxies.take([C], "t1", max_concurrency=1)
    await backend.proxies.take([A], "t2")
    await backend.proxies.report(B, ok=True)
    listed = await backend.proxies.listing()
    assert [p.key for p in listed] == [A, B, C]
    assert [(p.uses, p.oks, p.in_use) for p in listed] == [(1, 0, 1), (0, 1, 0), (1, 0, 1)]
    assert [p.key for p in await backend.proxies.listing(limit=2)] == [A, B]
    assert listed[0].to_dict() == {
        "proxy": A,
        "uses": 1,
        "oks": 0,
        "failures": 0,
        "score": 0,
        "cooling": False,
        "cooling_until": None,
        "in_use": 1,
        "last_reason": None,
        "last_bad_at": None,
    }
