"""A proxy tier of identities (issue 44, item 3: "identities belong to a tier when the
pool is split by tier"): a domain that refuses the direct exit climbs to the tier
``resi``, whose requests go out as identities of the pool ``resi`` — each its own exit,
User-Agent and cookies, leased for the task and released at its end with the cookies
the site set — and a block met there cools that identity, not the task's attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core.identities import parse_identity
from fleet.core.submission import make_push_request
from fleet.dev.demo_proxies import DemoProxy, source_available
from tests.blocks.block_plugin import BlockFetch
from tests.support.sites import QuietHandler, serving
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

TYPE = "blk-fetch"
EXIT = "127.0.0.3"
REFUSED_UA = {"Resi/2"}  # the site refuses this identity once the test says so


class Site(QuietHandler):
    """Refuses the direct exit; through the proxy, serves and counts visits by cookie,
    unless the User-Agent is in ``REFUSED_UA`` (a captcha page)."""

    refuse = False

    def do_GET(self) -> None:
        ua = self.headers.get("User-Agent", "")
        exit_ = self.client_address[0]
        cookie = self.headers.get("Cookie", "")
        visits = int(cookie.split("visits=", 1)[1].split(";")[0]) if "visits=" in cookie else 0
        headers = {"x-seen-ua": ua, "x-seen-exit": exit_, "content-type": "text/html"}
        if exit_ != EXIT:
            status, body = 403, b"<h1>Forbidden</h1>"
        elif Site.refuse and ua in REFUSED_UA:
            status = 403
            body = b"<html><div class='g-recaptcha' data-sitekey='k-1'></div>" + (
                b"<script src='https://www.google.com/recaptcha/api.js'></script></html>"
            )
        else:
            status, body = 200, b"<html><h1>fine</h1></html>"
            headers["set-cookie"] = f"visits={visits + 1}; Path=/"
        self.answer(status, body, headers)


@pytest.fixture
def site() -> Iterator[str]:
    with serving(Site) as url:
        yield url.rstrip("/")


@pytest.fixture
async def exit_proxy() -> AsyncIterator[str]:
    if not source_available(EXIT):
        pytest.fail("this machine cannot open connections from 127.0.0.3")
    proxy = DemoProxy(EXIT)
    await proxy.start()
    yield proxy.url
    await proxy.stop()


async def outputs(b: Backend, n: int) -> list[Any]:
    async def got() -> list[Any] | None:
        found = await b.streams.read(TYPE, n=100)
        return [e.payload for e in found] if len(found) >= n else None

    result: list[Any] = await until(got, timeout=30, what=f"{n} outputs")
    return result


async def test_a_tier_of_identities(site: str, exit_proxy: str, backend: Backend) -> None:
    pool = [
        parse_identity({"id": f"resi-{i}", "proxy": exit_proxy,
                        "fingerprint": {"user_agent": f"Resi/{i}"}})
        for i in (1, 2)
    ]  # fmt: skip
    await backend.identities.put("resi", pool)
    config = {
        "slots": 1,
        "proxy_tiers": [
            {"name": "direct", "direct": True},
            {"name": "resi", "identity_pool": "resi"},
        ],
        "tier_escalate_after": 2,
    }
    await push_config(backend, TYPE, config, [])
    host = site.split("//")[1].split(":")[0]
    push = [make_push_request({"url": f"{site}/p/{n}"}, max_attempts=1) for n in range(6)]
    async with running_worker(backend, [BlockFetch]):
        await backend.queues.push(TYPE, push)
        done = await outputs(backend, 6)
        assert {(o["status"], o["exit"]) for o in done} == {(200, EXIT)}
        assert {o["user_agent"] for o in done} == {"Resi/1", "Resi/2"}  # as each identity
        state = await backend.domains.get(TYPE, host)
        assert state is not None and state.tier == 1
        # Each identity kept the cookie the site set for it, visit after visit.
        for ident in pool:
            stored = await backend.identities.get("resi", ident.id)
            assert stored is not None and stored.stats.ok >= 1 and stored.state == "ready"
            (visits,) = [c["value"] for c in stored.cookies if c["name"] == "visits"]
            assert int(visits) == stored.stats.ok

        Site.refuse = True  # the site now shows resi-2 a captcha
        more = [make_push_request({"url": f"{site}/q/{n}"}, max_attempts=1) for n in range(4)]
        await backend.queues.push(TYPE, more)
        later = await outputs(backend, 10)
    assert all(o["user_agent"] == "Resi/1" for o in later[6:])
    refused = await backend.identities.get("resi", "resi-2")
    assert refused is not None and refused.state == "cooling"
    assert refused.stats.last_reason == "captcha by recaptcha"
    assert (await backend.queues.depths(TYPE)).dead == 0  # no attempt charged
    # What went out as the pool's identities is metered to the pool (docs/costs.md).
    pool_meters = (await backend.meters.get(["pool:resi"]))["pool:resi"]
    assert pool_meters["requests:resi"] >= 10 and pool_meters["attempts"] >= 10
