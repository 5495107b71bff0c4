"""Conformance of the type's stored proxy policy (``group_defaults_set(..., proxy=)``,
``proxy_policy``): a take or report naming its automation type applies the stored
threshold, cool-down and cap whatever the caller passes; callers naming no type, or a
type with none stored, keep their own; an older config generation never overwrites a
newer policy; each type has its own; a purge forgets it."""

from __future__ import annotations

import time

import pytest

from fleet.backends.base import Backend
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupLimits
from tests.conformance.helpers import TYPE

A, B = "http://a.test:8080", "http://b.test:8080"


async def bad(
    backend: Backend,
    key: str,
    automation_type: str | None = TYPE,
    *,
    threshold: int = 1,
    cooldown: float = 5.0,
) -> float | None:
    """A bad report passing a threshold and a cool-down that a stored policy overrides."""
    return await backend.proxies.report(
        key,
        ok=False,
        threshold=threshold,
        cooldown_seconds=cooldown,
        reason="403",
        automation_type=automation_type,
    )


def cools_for(until: float | None, before: float, seconds: float) -> bool:
    """The cool-down that ``until`` ends, reported between ``before`` and now, lasts
    ``seconds``."""
    return until is not None and before + seconds <= until <= time.time() + seconds


async def store(backend: Backend, policy: ProxyPolicy | None, gen: int, t: str = TYPE) -> bool:
    return await backend.groups.set_defaults(t, GroupLimits(), gen=gen, proxy=policy)


async def test_nothing_stored(backend: Backend) -> None:
    assert await backend.proxies.policy(TYPE) == (None, -1)
    # Group limits alone: a record without a policy.
    assert await backend.groups.set_defaults(TYPE, GroupLimits.of(2, None), gen=3)
    assert await backend.proxies.policy(TYPE) == (None, 3)
    before = time.time()
    assert cools_for(await bad(backend, A, cooldown=7.0), before, 7.0)  # the caller's


async def test_a_stored_threshold_and_cool_down_win_over_the_callers(backend: Backend) -> None:
    policy = ProxyPolicy(bad_threshold=2, cooldown_seconds=100.0)
    assert await store(backend, policy, gen=1)
    assert await backend.proxies.policy(TYPE) == (policy, 1)
    before = time.time()
    # The caller asks for a cool-down at the first bad report, for 5 s: the stored
    # policy needs two, and cools for 100 s.
    assert await bad(backend, A, threshold=1, cooldown=5.0) is None
    assert cools_for(await bad(backend, A, threshold=1, cooldown=5.0), before, 100.0)
    # A stored threshold above the caller's holds back a cool-down the caller's would
    # give, and one below gives one the caller's would not.
    assert await store(backend, ProxyPolicy(bad_threshold=1, cooldown_seconds=40.0), gen=2)
    assert cools_for(await bad(backend, B, threshold=9, cooldown=5.0), before, 40.0)


async def test_callers_naming_no_type_keep_their_own_values(backend: Backend) -> None:
    assert await store(backend, ProxyPolicy(bad_threshold=5, cooldown_seconds=100.0), gen=1)
    before = time.time()
    assert cools_for(await bad(backend, A, None, threshold=1, cooldown=7.0), before, 7.0)
    # Another type with nothing stored: its caller's values too.
    assert cools_for(await bad(backend, B, "other", threshold=1, cooldown=8.0), before, 8.0)


async def test_each_type_has_its_own_policy(backend: Backend) -> None:
    assert await store(backend, ProxyPolicy(cooldown_seconds=100.0), gen=1, t="shop")
    assert await store(backend, ProxyPolicy(cooldown_seconds=200.0), gen=1, t="maps")
    before = time.time()
    assert cools_for(await bad(backend, A, "shop"), before, 100.0)
    assert cools_for(await bad(backend, B, "maps"), before, 200.0)


async def test_a_stored_cap_wins_over_the_callers(backend: Backend) -> None:
    assert await store(backend, ProxyPolicy(max_concurrency=1), gen=1)
    took = await backend.proxies.take([A], "t1", automation_type=TYPE)
    assert took.key == A
    # The caller asks for no cap: the stored cap of 1 holds.
    full = await backend.proxies.take([A], "t2", max_concurrency=None, automation_type=TYPE)
    assert full.key is None and full.wait > 0
    # A caller naming no type is held to its own (none).
    assert (await backend.proxies.take([A], "t3")).key == A
    # A stored policy without a cap lifts the caller's.
    assert await store(backend, ProxyPolicy(max_concurrency=None), gen=2)
    lifted = await backend.proxies.take([A], "t4", max_concurrency=1, automation_type=TYPE)
    assert lifted.key == A
    assert await backend.proxies.take([B], "t5", max_concurrency=1, automation_type=TYPE)
    assert (await backend.proxies.take([B], "t6", max_concurrency=1)).key is None


async def test_a_stored_cap_holds_while_spreading(backend: Backend) -> None:
    assert await store(backend, ProxyPolicy(max_concurrency=1), gen=1)
    assert (await backend.proxies.take([A, B], "t1", spread=True, automation_type=TYPE)).key == A
    assert (await backend.proxies.take([A, B], "t2", spread=True, automation_type=TYPE)).key == B
    third = await backend.proxies.take([A, B], "t3", spread=True, automation_type=TYPE)
    assert third.key is None


async def test_an_older_generation_does_not_overwrite_a_newer_policy(backend: Backend) -> None:
    newer = ProxyPolicy(bad_threshold=1, cooldown_seconds=50.0, max_concurrency=3)
    assert await store(backend, newer, gen=5)
    # A worker applying generation 4 late: refused, the policy of 5 stays.
    assert not await store(backend, ProxyPolicy(cooldown_seconds=5.0), gen=4)
    assert not await backend.groups.set_defaults(TYPE, GroupLimits.of(9, None), gen=4)
    assert await backend.proxies.policy(TYPE) == (newer, 5)
    before = time.time()
    assert cools_for(await bad(backend, A, cooldown=5.0), before, 50.0)
    # The same generation again (the master's PATCH, then each worker applying it):
    # the later write wins.
    same = ProxyPolicy(bad_threshold=1, cooldown_seconds=60.0)
    assert await store(backend, same, gen=5)
    assert await backend.proxies.policy(TYPE) == (same, 5)
    # A newer record without a policy: the callers' values apply again.
    assert await store(backend, None, gen=6)
    assert await backend.proxies.policy(TYPE) == (None, 6)
    assert cools_for(await bad(backend, B, cooldown=5.0), before, 5.0)


async def test_the_policy_shares_its_record_with_the_group_limits(backend: Backend) -> None:
    policy = ProxyPolicy(bad_threshold=3, cooldown_seconds=0.0, max_concurrency=2)
    limits = GroupLimits.of(4, "10/m")
    assert await backend.groups.set_defaults(TYPE, limits, gen=2, proxy=policy)
    assert await backend.groups.defaults(TYPE) == (limits, 2)
    assert await backend.proxies.policy(TYPE) == (policy, 2)
    # Changing one half keeps the generation rule for both.
    assert not await backend.groups.set_defaults(TYPE, GroupLimits(), gen=1, proxy=None)
    assert await backend.groups.defaults(TYPE) == (limits, 2)
    assert await backend.proxies.policy(TYPE) == (policy, 2)


@pytest.mark.parametrize("stored", [True, False])
async def test_ok_reports_ignore_the_policy(backend: Backend, stored: bool) -> None:
    if stored:
        assert await store(backend, ProxyPolicy(bad_threshold=2, cooldown_seconds=100.0), gen=1)
    await bad(backend, A, threshold=2)
    assert (
        await backend.proxies.report(A, ok=True, threshold=1, automation_type=TYPE)
    ) is None  # an ok report never cools
    found = {p.key: p for p in await backend.proxies.listing()}
    assert (found[A].score, found[A].oks) == (0, 1)


async def test_a_purge_forgets_the_policy(backend: Backend) -> None:
    assert await store(backend, ProxyPolicy(cooldown_seconds=100.0), gen=1)
    await backend.purge_type(TYPE)
    assert await backend.proxies.policy(TYPE) == (None, -1)
    before = time.time()
    assert cools_for(await bad(backend, A, cooldown=5.0), before, 5.0)
