"""A browser page through ``ctx.proxy`` (Debian's Chromium): the page goes through the
slot's proxy with its credentials, a blocked page reports the proxy bad, and the retry
goes through another one (the pattern of docs/primitives.md#proxies)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.browser import BrowserNeeds
from fleet.core.proxy import ProxyHandle, ProxyPolicy, proxy_key, proxy_key_salt
from tests.browser.stack import CHROMIUM
from tests.proxies.http_proxy import ForwardProxy, Target

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason="chromium not installed (apt-get install chromium)"
    ),
]


@pytest.fixture
async def mem() -> AsyncIterator[Backend]:
    backend = await open_backend(f"memory://proxy-browser-{uuid.uuid4().hex}")
    yield backend
    await backend.close()


async def test_a_blocked_page_cools_its_proxy_and_the_retry_moves(mem: Backend) -> None:
    pool_module = pytest.importorskip("fleet.browser")
    target = Target()
    blocked = ForwardProxy("blocked", user="u1", password="pw-one")
    good = ForwardProxy("good", user="u2", password="pw-two")
    for server in (target, blocked, good):
        await server.start()
    blocked.bad = True
    # Chromium never sends loopback addresses through a proxy unless told to.
    needs = BrowserNeeds(size=1, max_uses=10, launch_args=("--proxy-bypass-list=<-loopback>",))
    pool = pool_module.BrowserPool(needs)
    proxy = ProxyHandle(urls=[blocked.url(), good.url()], health=mem.proxies, policy=ProxyPolicy())
    statuses = []
    reported = float("inf")
    try:
        for _attempt in range(2):
            await proxy.ensure()
            async with pool.acquire(proxy=proxy.url) as page:
                response = await page.goto(f"{target.url}/page")
                status = response.status if response is not None else 0
            statuses.append(status)
            if status == 403:
                await proxy.report_bad("captcha")
                reported = time.time()
                continue
            await proxy.report_ok()
            break
    finally:
        await pool.close()
        await proxy.close()
        for server in (target, blocked, good):
            await server.close()
    assert statuses == [403, 200]
    # The page, and at times the favicon Chromium asks for after it, met the blocked
    # proxy; once it was reported, at most that favicon, already on its way (Chromium
    # sends it on its own, after the page answered), can still reach it.
    assert 1 <= len(blocked.forbidden) <= 2 and len(good.requests) >= 1
    assert sum(t >= reported for t in blocked.forbidden) <= 1
    assert target.hits >= 1  # the page (and its favicon) came through the good proxy
    listed = {p.key: p for p in await mem.proxies.listing()}
    salt = await proxy_key_salt(mem.kv)
    assert listed[proxy_key(blocked.url(), salt)].cooling_until is not None
    assert listed[proxy_key(good.url(), salt)].oks == 1
