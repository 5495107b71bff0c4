"""Conformance: identity pools (issue 43) — put, get and pages; leases exclusive up to
a concurrency, in the pool's order; renew; a dead worker's lease back after its
deadline; sticky keys; cool-down and retire on blocks; revive, delete; the cookie
merge of two leases of one identity (the later release wins for a cookie both set)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.errors import ContractValueError
from fleet.core.identities import parse_identity
from fleet.core.records import now

POOL = "conf-ids"


def _ident(i: int, **more: Any) -> Any:
    return parse_identity(
        {
            "id": f"id-{i}",
            "proxy": f"http://user:pw@127.0.0.1:{9000 + i}",
            "fingerprint": {"user_agent": f"UA {i}", "headers": [["Accept-Language", "en"]]},
            **more,
        }
    )


def _cookie(name: str, value: str, expires: float = -1) -> dict[str, Any]:
    return {"name": name, "value": value, "domain": "site.test", "path": "/", "expires": expires}


async def test_put_get_and_pages(backend: Backend) -> None:
    assert await backend.identities.put(POOL, [_ident(i) for i in range(5)]) == 5
    assert await backend.identities.put(POOL, [_ident(0, account={"user": "a"}), _ident(9)]) == 1
    got = await backend.identities.get(POOL, "id-0")
    assert got is not None and got.account == {"user": "a"} and got.state == "ready"
    assert got.fingerprint is not None and got.fingerprint.user_agent == "UA 0"
    assert await backend.identities.get(POOL, "nope") is None
    first = await backend.identities.page(POOL, limit=4)
    assert [i.id for i in first.items] == ["id-0", "id-1", "id-2", "id-3"]
    assert first.counts == {"ready": 6, "leased": 0, "cooling": 0, "retired": 0}
    rest = await backend.identities.page(POOL, after=first.next, limit=4)
    assert [i.id for i in rest.items] == ["id-4", "id-9"] and rest.next is None
    assert POOL in await backend.identities.pools()
    assert "never-made" not in await backend.identities.pools()


async def test_leases_are_exclusive_and_go_round(backend: Backend, frozen: ManualClock) -> None:
    await backend.identities.put(POOL, [_ident(i) for i in range(3)])
    taken = []
    for _ in range(3):
        lease = await backend.identities.lease(POOL)
        assert lease is not None
        taken.append(lease)
        frozen.advance(0.01)
    assert sorted(t.identity.id for t in taken) == ["id-0", "id-1", "id-2"]
    assert [t.identity.id for t in taken] == ["id-0", "id-1", "id-2"]  # never used: by id
    assert await backend.identities.lease(POOL) is None  # all three held
    got = await backend.identities.get(POOL, "id-1")
    assert got is not None and got.state == "leased" and got.leases == 1 and got.stats.uses == 1
    # released in another order: the least recently leased comes next
    for t in (taken[2], taken[0], taken[1]):
        assert await backend.identities.release(POOL, t.identity.id, t.token, outcome="ok")
    nxt = await backend.identities.lease(POOL)
    assert nxt is not None and nxt.identity.id == "id-0"
    assert not await backend.identities.release(POOL, "id-1", taken[1].token)  # twice: no
    assert not await backend.identities.release(POOL, "id-0", "not-the-token")


async def test_concurrency_above_one(backend: Backend, frozen: ManualClock) -> None:
    await backend.identities.put(POOL, [_ident(0)])
    a = await backend.identities.lease(POOL, max_concurrency=2)
    frozen.advance(0.01)
    b = await backend.identities.lease(POOL, max_concurrency=2)
    assert a is not None and b is not None and a.identity.id == b.identity.id
    assert await backend.identities.lease(POOL, max_concurrency=2) is None
    assert await backend.identities.lease(POOL, max_concurrency=3) is not None


async def test_a_dead_workers_lease_ends_at_its_deadline(
    backend: Backend, frozen: ManualClock
) -> None:
    await backend.identities.put(POOL, [_ident(0)])
    held = await backend.identities.lease(POOL, lease_seconds=30)
    assert held is not None
    frozen.advance(20)
    assert await backend.identities.renew(POOL, "id-0", held.token, 30)
    frozen.advance(25)  # within the renewed lease
    assert await backend.identities.lease(POOL) is None
    frozen.advance(6)  # past it: the worker is gone
    shown = await backend.identities.get(POOL, "id-0")
    assert shown is not None and shown.state == "ready" and shown.leases == 0
    again = await backend.identities.lease(POOL)
    assert again is not None and again.identity.id == "id-0"
    assert not await backend.identities.renew(POOL, "id-0", held.token, 30)
    assert not await backend.identities.release(POOL, "id-0", held.token)


async def test_sticky_keys_keep_their_identity(backend: Backend, frozen: ManualClock) -> None:
    await backend.identities.put(POOL, [_ident(i) for i in range(3)])
    first = await backend.identities.lease(POOL, key="account-7")
    assert first is not None
    await backend.identities.release(POOL, first.identity.id, first.token)
    frozen.advance(1)
    other = await backend.identities.lease(POOL)  # the round goes on without the key
    assert other is not None and other.identity.id != first.identity.id
    again = await backend.identities.lease(POOL, key="account-7")
    assert again is not None and again.identity.id == first.identity.id
    assert await backend.identities.lease(POOL, key="account-7") is None  # held: wait
    await backend.identities.release(POOL, again.identity.id, again.token)
    await backend.identities.retire(POOL, first.identity.id, "banned")
    moved = await backend.identities.lease(POOL, key="account-7")
    assert moved is not None and moved.identity.id not in (first.identity.id, other.identity.id)


async def test_blocks_cool_down_then_retire(backend: Backend, frozen: ManualClock) -> None:
    await backend.identities.put(POOL, [_ident(0)])
    for n in (1, 2):
        lease = await backend.identities.lease(POOL)
        assert lease is not None
        assert await backend.identities.release(
            POOL, "id-0", lease.token, outcome="blocked", reason=f"captcha {n}",
            cooldown_seconds=60, retire_after=3,
        )  # fmt: skip
        got = await backend.identities.get(POOL, "id-0")
        assert got is not None and got.state == "cooling"
        assert got.cooling_until == pytest.approx(now() + 60)
        assert got.stats.blocked_in_row == n and got.stats.last_reason == f"captcha {n}"
        assert await backend.identities.lease(POOL) is None
        frozen.advance(61)
    lease = await backend.identities.lease(POOL)
    assert lease is not None
    await backend.identities.release(
        POOL, "id-0", lease.token, outcome="blocked", reason="captcha 3", retire_after=3
    )
    got = await backend.identities.get(POOL, "id-0")
    assert got is not None and got.state == "retired" and got.stats.blocked == 3
    frozen.advance(10_000)
    assert await backend.identities.lease(POOL) is None
    page = await backend.identities.page(POOL)
    assert page.counts["retired"] == 1 and page.blocks == 3
    assert await backend.identities.revive(POOL, "id-0")
    back = await backend.identities.lease(POOL)
    assert back is not None
    await backend.identities.release(POOL, "id-0", back.token, outcome="ok")
    got = await backend.identities.get(POOL, "id-0")
    assert got is not None and got.stats.blocked_in_row == 0 and got.stats.ok == 1


async def test_cookies_merge_and_the_later_release_wins(
    backend: Backend, frozen: ManualClock
) -> None:
    await backend.identities.put(
        POOL, [_ident(0, cookies=[_cookie("keep", "1"), _cookie("s", "old")])]
    )
    a = await backend.identities.lease(POOL, max_concurrency=2)
    b = await backend.identities.lease(POOL, max_concurrency=2)
    assert a is not None and b is not None
    assert {c["name"] for c in a.identity.cookies} == {"keep", "s"}
    await backend.identities.release(
        POOL, "id-0", b.token, cookies=[_cookie("s", "from-b"), _cookie("b-only", "x")]
    )
    await backend.identities.release(
        POOL, "id-0", a.token,
        cookies=[_cookie("s", "from-a"), _cookie("keep", "gone", expires=now() - 1)],
        account={"user": "made-by-a"},
    )  # fmt: skip
    got = await backend.identities.get(POOL, "id-0")
    assert got is not None
    jar = {c["name"]: c["value"] for c in got.cookies}
    assert jar == {"s": "from-a", "b-only": "x"}  # a released last; the expired one dropped
    assert got.account == {"user": "made-by-a"}


async def test_delete_and_unknown(backend: Backend) -> None:
    await backend.identities.put(POOL, [_ident(0), _ident(1)])
    lease = await backend.identities.lease(POOL, key="k")
    assert lease is not None
    assert await backend.identities.delete(POOL, lease.identity.id)
    assert not await backend.identities.delete(POOL, lease.identity.id)
    assert await backend.identities.get(POOL, lease.identity.id) is None
    assert not await backend.identities.release(POOL, lease.identity.id, lease.token)
    moved = await backend.identities.lease(POOL, key="k")
    assert moved is not None and moved.identity.id != lease.identity.id
    assert not await backend.identities.retire(POOL, "nope")
    await backend.identities.delete(POOL, moved.identity.id)
    assert POOL not in await backend.identities.pools()  # its last identity went
    assert not await backend.identities.revive(POOL, "nope")


def test_bad_identities_name_their_field() -> None:
    for raw, field in [
        ({"id": ""}, "id"),
        ({"id": "x", "proxy": "ftp://h"}, "proxy"),
        ({"id": "x", "fingerprint": {"user_agent": 3}}, "fingerprint.user_agent"),
        (
            {"id": "x", "fingerprint": {"user_agent": "u", "viewport": {"width": 0, "height": 1}}},
            "fingerprint.viewport",
        ),
        ({"id": "x", "cookies": [{"name": "a", "value": "b"}]}, "cookies.0.domain"),
        (
            {"id": "x", "cookies": [{"name": "a", "value": "b", "domain": "d", "sameSite": "x"}]},
            "cookies.0.sameSite",
        ),
        ({"id": "x", "account": []}, "account"),
        ({"id": "x", "colour": "red"}, "colour"),
    ]:
        with pytest.raises(ContractValueError) as caught:
            parse_identity(raw)
        assert caught.value.field == field, (raw, caught.value)


def test_request_headers_keep_the_browsers_order() -> None:
    from fleet.core.identities import Fingerprint

    placed = Fingerprint("UA/2", (("Host", "h"), ("User-Agent", "stale"), ("Accept", "*/*")))
    assert placed.request_headers() == [("Host", "h"), ("User-Agent", "UA/2"), ("Accept", "*/*")]
    assert Fingerprint("UA/2", (("Accept", "*/*"),)).request_headers()[0] == ("User-Agent", "UA/2")
