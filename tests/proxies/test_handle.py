"""``ctx.proxy`` over the backend's proxy health: keys without credentials, cool-downs
seen by every slot, the fallback when every proxy cools (one warning), the cap, places
given back and renewed, sticky keys, providers, and a backend outage."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.config import BaseConfig
from fleet.core.errors import BackendUnavailable, Throttled
from fleet.core.proxy import (
    ProxyHandle,
    ProxyPolicy,
    TemplateProvider,
    mask_url,
    proxy_key,
    proxy_key_salt,
)
from fleet.core.redact import mask_credentials
from fleet.worker.proxies import build_proxy

P1 = "http://alice:s3cret@p1.test:8001"
P2 = "http://alice:s3cret@p2.test:8002"
P3 = "http://bob:hunter2@p3.test:8003"
URLS = [P1, P2, P3]
_names = itertools.count()


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    b = await open_backend(f"memory://proxy-handle-{next(_names)}")
    yield b
    await b.close()


async def skey(backend: Backend, url: str) -> str:
    """``url``'s key as the backend knows it (salted with the backend's salt)."""
    return proxy_key(url, await proxy_key_salt(backend.kv))


def handle(backend: Backend, index: int = 0, **policy: Any) -> ProxyHandle:
    return ProxyHandle(
        urls=URLS, index=index, health=backend.proxies, policy=ProxyPolicy(**policy), owner="shop"
    )


# ------------------------------------------------------------ keys and masking


def test_keys_hold_no_credentials() -> None:
    salt = "0123456789abcdef"
    key = proxy_key(P1, salt)
    assert key.startswith("http://p1.test:8001#") and len(key) == len("http://p1.test:8001#") + 10
    assert "alice" not in key and "s3cret" not in key
    # Same host and port, another user: another proxy; same user, another password: the same.
    assert proxy_key("http://carol:x@p1.test:8001", salt) != key
    assert proxy_key("http://alice:changed@p1.test:8001", salt) == key
    assert proxy_key("alice:s3cret@p1.test:8001", salt) == key  # no scheme: http
    assert proxy_key("http://p1.test:8001") == "http://p1.test:8001"
    assert proxy_key("p1.test:8001") == "http://p1.test:8001"
    assert proxy_key("HTTP://P1.Test") == "http://p1.test:80"
    assert proxy_key("socks5://[::1]:1080") == "socks5://[::1]:1080"
    assert proxy_key("https://h.test") == "https://h.test:443"


def test_a_key_cannot_be_checked_against_guessed_user_names() -> None:
    # The digest used to be a bare SHA-256 of the user name: anyone reading keys (a read
    # token, /metrics) could confirm a guess offline. Now it is keyed with a salt.
    import hashlib

    for url, user in ((P1, "alice"), ("http://apikey-abc@gate.test:7000", "apikey-abc")):
        key = proxy_key(url, "salt-one")
        assert hashlib.sha256(user.encode()).hexdigest()[:10] not in key
        assert proxy_key(url, "salt-two") != key  # the salt decides, not the user name
        assert proxy_key(url) != key  # no salt given: this process's own


def test_masking() -> None:
    assert mask_url(P1) == "http://********@p1.test:8001"
    assert mask_url("bob:hunter2@p3.test:8003") == "********@p3.test:8003"
    assert mask_url("apikey-abc@gate.test") == "********@gate.test"
    assert mask_url("http://p1.test:8001") == "http://p1.test:8001"
    assert mask_url(None) == "None"
    text = "blocked via http://alice:s3cret@p1.test:8001/x and socks5://u:p@h:1"
    assert mask_credentials(text) == (
        "blocked via http://********@p1.test:8001/x and socks5://********@h:1"
    )


# ------------------------------------------------------------ cool-downs


async def test_a_bad_report_is_seen_by_every_slot(backend: Backend) -> None:
    a, b = handle(backend, 0), handle(backend, 3)  # both start on P1
    assert await a.ensure() == P1
    await a.release()  # one after the other: nothing to spread
    assert await b.ensure() == P1
    await b.release()
    assert await a.report_bad("captcha at http://alice:s3cret@p1.test:8001") == P2
    # The other slot leaves P1 at its next task (for the least-used healthy proxy: a
    # holds P2), and rotate/set_country skip it too.
    assert await b.ensure() == P3
    assert await b.rotate() == P2  # P1 is skipped
    assert await b.rotate() == P3
    assert await b.set_country("de") == P3
    listed = {p.key: p for p in await backend.proxies.listing()}
    bad = listed[await skey(backend, P1)]
    assert bad.cooling_until is not None and bad.failures == 1
    assert bad.last_reason == "captcha at http://********@p1.test:8001"  # never the password
    await a.close()
    await b.close()


async def test_the_threshold_and_the_end_of_a_cool_down(
    backend: Backend, frozen: ManualClock
) -> None:
    a = handle(backend, bad_threshold=2, cooldown_seconds=0.3)
    assert await a.ensure() == P1
    assert await a.report_bad() == P2
    assert await a.rotate() == P3
    assert await a.rotate() == P1  # one bad report is below the threshold
    assert await a.report_bad() == P2  # the second in a row: P1 cools
    assert await a.rotate() == P3
    assert await a.rotate() == P2  # P1 is skipped
    frozen.advance(0.35)
    assert await a.rotate() == P3
    assert await a.rotate() == P1  # back after its cool-down
    await a.report_ok()
    listed = {p.key: p for p in await backend.proxies.listing()}
    p1 = listed[await skey(backend, P1)]
    assert (p1.score, p1.oks) == (0, 1)
    await a.close()


async def test_every_proxy_cooling_falls_back_with_one_warning(
    backend: Backend, caplog: pytest.LogCaptureFixture, frozen: ManualClock
) -> None:
    slots = [handle(backend, i, cooldown_seconds=60) for i in range(3)]
    for slot in slots:
        await slot.ensure()
    await slots[0].report_bad()  # P1 (ends first)
    frozen.advance(0.01)
    await slots[1].report_bad()  # P2
    frozen.advance(0.01)
    caplog.set_level(logging.INFO, "fleet.proxy")
    await slots[2].report_bad()  # P3: now everything cools
    got = [await s.ensure() for s in slots]
    assert got == [P1, P1, P1]  # the one that recovers first
    warnings = [r for r in caplog.records if "every proxy is cooling" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "shop" in warnings[0].getMessage()
    for r in caplog.records:
        assert "s3cret" not in r.getMessage() and "alice" not in r.getMessage()
    for s in slots:
        await s.close()


# ------------------------------------------------------------ places


async def test_the_cap_makes_a_slot_wait_then_throttles(backend: Backend) -> None:
    one = ["http://solo.test:1"]
    a = ProxyHandle(urls=one, health=backend.proxies, policy=ProxyPolicy(max_concurrency=1))
    b = ProxyHandle(urls=one, health=backend.proxies, policy=ProxyPolicy(max_concurrency=1))
    b.wait_seconds = 0.3
    assert await a.ensure() == one[0]
    assert await a.ensure() == one[0]  # keeps its own place
    with pytest.raises(Throttled, match="proxy_max_concurrency=1"):
        await b.ensure()
    waiting = asyncio.create_task(b.ensure())
    await asyncio.sleep(0.05)
    await a.close()  # gives the place back: the waiter takes it within ~0.1 s
    assert await asyncio.wait_for(waiting, 1) == one[0]
    assert [p.in_use for p in await backend.proxies.listing()] == [1]
    await b.close()
    assert [p.in_use for p in await backend.proxies.listing()] == [0]


async def test_places_are_renewed_while_held(backend: Backend) -> None:
    a = handle(backend)
    a.hold_seconds = 0.3  # renewed every 0.1 s
    await a.ensure()
    await asyncio.sleep(0.7)
    assert {p.key: p.in_use for p in await backend.proxies.listing()}[await skey(backend, P1)] == 1
    await a.close()
    assert {p.key: p.in_use for p in await backend.proxies.listing()}[await skey(backend, P1)] == 0


async def test_a_rotation_moves_the_place(backend: Backend) -> None:
    a = handle(backend, max_concurrency=1)
    b = handle(backend, 1, max_concurrency=1)
    assert await a.ensure() == P1 and await b.ensure() == P2
    assert await a.rotate() == P3  # P2 is full
    assert await b.rotate() == P1  # freed by a
    in_use = {p.key: p.in_use for p in await backend.proxies.listing()}
    keys = [await skey(backend, url) for url in (P1, P2, P3)]
    assert in_use == dict(zip(keys, [1, 0, 1], strict=True))
    await a.close()
    await b.close()


# ------------------------------------------------------------ sticky keys


async def test_sticky_keys_keep_their_proxy_across_slots(backend: Backend) -> None:
    a, b = handle(backend, 0), handle(backend, 2)
    first = await a.sticky("account-7")
    assert await b.sticky("account-7") == first
    assert await b.sticky("account-7") == first
    assert await backend.proxies.sticky("account-7") == await skey(backend, first or "")
    # Its proxy cools down: the key moves, and stays on its new proxy.
    await a.report_bad("banned")
    moved = await b.sticky("account-7")
    assert moved not in (first, None)
    assert await a.sticky("account-7") == moved
    with pytest.raises(ValueError):
        await a.sticky("")
    await a.close()
    await b.close()


async def test_provider_urls_get_health_per_session(backend: Backend) -> None:
    provider = TemplateProvider({"template": "http://u-{session}-{country}:pw@gate.test:7000"})
    a = ProxyHandle(provider=provider, health=backend.proxies, policy=ProxyPolicy())
    first = await a.ensure()
    assert first is not None and first == a.url
    assert await a.ensure() == first  # sticky session while healthy
    second = await a.report_bad("403")
    assert second != first
    listed = {p.key: p for p in await backend.proxies.listing()}
    assert listed[await skey(backend, first)].cooling_until is not None
    assert all(k.startswith("http://gate.test:7000#") for k in listed)
    assert (await a.set_country("de") or "").endswith("-de:pw@gate.test:7000")
    # A sticky key gets the same session on every slot (in the same country).
    b = ProxyHandle(provider=provider, health=backend.proxies, policy=ProxyPolicy())
    c = ProxyHandle(provider=provider, health=backend.proxies, policy=ProxyPolicy())
    acct = await b.sticky("acct")
    assert acct is not None and await c.sticky("acct") == acct
    await c.report_bad("captcha")  # that session cools: the key gets another one
    moved = await b.sticky("acct")
    assert moved not in (acct, None) and await c.sticky("acct") == moved
    for h in (a, b, c):
        await h.close()


# ------------------------------------------------------------ no backend, broken backend


async def test_without_health_the_handle_works_alone() -> None:
    a = ProxyHandle(urls=URLS)
    assert await a.ensure() == P1
    assert await a.report_bad() == P2
    assert await a.rotate() == P3
    assert await a.sticky("k") in URLS
    assert await ProxyHandle().ensure() is None
    assert ProxyHandle().key is None


class _Down:
    """A ProxyHealth whose backend is unreachable."""

    salts = None

    async def take(self, candidates: Sequence[str], token: str, **kw: Any) -> Any:
        raise BackendUnavailable("redis at localhost:1 is unavailable")

    async def report(self, key: str, **kw: Any) -> Any:
        raise BackendUnavailable("redis at localhost:1 is unavailable")

    async def release(self, key: str, token: str) -> bool:
        raise BackendUnavailable("down")


async def test_a_backend_outage_keeps_the_slot_going(caplog: pytest.LogCaptureFixture) -> None:
    a = ProxyHandle(urls=URLS, health=_Down(), owner="shop")  # type: ignore[arg-type]
    assert await a.ensure() == P1
    assert await a.report_bad("x") == P2
    await a.report_ok()
    await a.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "fleet.proxy"]
    assert any("shop: proxy health: backend down" in line for line in lines)


def test_build_proxy_carries_the_policy(backend: Backend) -> None:
    cfg = BaseConfig(
        proxy_url=",".join(URLS),
        proxy_bad_threshold=3,
        proxy_cooldown_seconds=5,
        proxy_max_concurrency=2,
    )
    h = build_proxy(cfg, 1, backend, owner="shop")
    assert h.policy == ProxyPolicy(3, 5.0, 2)
    assert h.url == P2 and h.owner == "shop"
    with pytest.raises(ValueError):
        BaseConfig(proxy_max_concurrency=0)
    with pytest.raises(ValueError):
        BaseConfig(proxy_bad_threshold=0)
