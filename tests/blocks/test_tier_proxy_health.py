"""A tier of several proxies passes over the ones cooling fleet-wide (issue 44): a
proxy reported bad past its threshold is not picked by the clients of ``ctx.http()``
while it cools, the tier's others carry the requests; with every one cooling, one is
still used."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from fleet.backends.base import Backend
from fleet.core import BaseConfig, Context
from fleet.core.proxy import proxy_key, proxy_key_salt
from fleet.dev.demo_proxies import DemoProxy, source_available
from tests.support.sites import QuietHandler, serving
from tests.support.sqlite_file import backend

__all__ = ["backend"]  # the fixture this module reuses

EXITS = ("127.0.0.2", "127.0.0.3")


class Echo(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, self.client_address[0].encode(), {"content-type": "text/plain"})


@pytest.fixture
def site() -> Iterator[str]:
    with serving(Echo) as url:
        yield url


@pytest.fixture
async def proxies() -> AsyncIterator[list[DemoProxy]]:
    if not all(source_available(a) for a in EXITS):
        pytest.fail("this machine cannot open connections from 127.0.0.2-3")
    started = [DemoProxy(a) for a in EXITS]
    for p in started:
        await p.start()
    yield started
    for p in started:
        await p.stop()


async def exits_seen(ctx: Context[BaseConfig], url: str, clients: int) -> set[str]:
    seen = set()
    for _ in range(clients):
        async with ctx.http(timeout=10) as http:
            seen.add((await http.get(url)).text)
    return seen


async def test_a_cooling_proxy_of_a_tier_is_passed_over(
    site: str, proxies: list[DemoProxy], backend: Backend
) -> None:
    config = BaseConfig(proxy_tiers=[{"name": "dc", "proxy_url": ",".join(p.url for p in proxies)}])
    ctx: Context[BaseConfig] = Context(
        backend=backend, automation_type="tph", config=lambda: config
    )
    assert await exits_seen(ctx, site, 30) == set(EXITS)  # both, at random
    salt = await proxy_key_salt(backend.kv)
    await backend.proxies.report(
        proxy_key(proxies[0].url, salt), ok=False, threshold=1, cooldown_seconds=300
    )
    assert await exits_seen(ctx, site, 20) == {EXITS[1]}  # the cooling one passed over
    await backend.proxies.report(
        proxy_key(proxies[1].url, salt), ok=False, threshold=1, cooldown_seconds=600
    )
    # Every one cooling: the one whose cool-down ends first still carries them.
    assert await exits_seen(ctx, site, 10) == {EXITS[0]}
    await ctx.access.close()
