"""``ctx.identity.browser_context()`` in Chromium (issue 43, item 3): the page's context
wears the identity (User-Agent, locale, timezone, viewport, cookies) and the cookies the
site sets are saved to the identity when the lease ends."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.browser import BrowserPool
from fleet.core import BaseConfig
from fleet.core.access.router import Access
from fleet.core.blocks import Blocked
from fleet.core.browser import BrowserNeeds
from fleet.core.identities import parse_identity
from fleet.core.identity import IdentityHandle, IdentityPolicy
from fleet.core.metering import TaskMeter
from tests.browser.stack import CHROMIUM
from tests.support.redis_server import require_redis
from tests.support.sites import serving

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def chromium_present() -> None:
    if not os.path.exists(CHROMIUM):
        if require_redis():  # strict (CI) mode: .ci/run installs Chromium
            pytest.fail("Debian's chromium is required but not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/cf":  # a Cloudflare challenge
            page = b"<html><title>Just a moment...</title><body>checking</body></html>"
            self.send_response(403)
            self.send_header("Content-Type", "text/html")
            self.send_header("cf-mitigated", "challenge")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        seen = {"ua": self.headers.get("User-Agent"), "cookie": self.headers.get("Cookie", "")}
        body = f"<html><body><pre id=seen>{json.dumps(seen)}</pre></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", "clearance=granted; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def site() -> Iterator[str]:
    with serving(_Site) as url:
        yield url


async def test_the_context_wears_the_identity_and_keeps_its_cookies(
    site: str, tmp_path: Path
) -> None:
    b = await open_backend(f"sqlite:///{tmp_path / 'f.db'}")
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=10))
    try:
        fp = {
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64) FleetIdentity/1.0",
            "locale": "de-DE",
            "timezone": "Europe/Berlin",
            "viewport": {"width": 1111, "height": 777},
        }
        cookie = {"name": "old", "value": "1", "domain": "127.0.0.1", "path": "/"}
        await b.identities.put(
            "br", [parse_identity({"id": "b1", "fingerprint": fp, "cookies": [cookie]})]
        )
        policy = IdentityPolicy(pool="br")
        lease = await b.identities.lease("br")
        assert lease is not None
        handle = IdentityHandle(b.identities, policy, lease)
        handle.browser = pool
        async with handle.browser_context() as page:
            await page.goto(site)
            seen = json.loads(await page.inner_text("#seen"))
            probe = await page.evaluate(
                "() => [navigator.language, Intl.DateTimeFormat().resolvedOptions().timeZone,"
                " window.innerWidth, window.innerHeight]"
            )
        assert seen == {"ua": fp["user_agent"], "cookie": "old=1"}
        assert probe == ["de-DE", "Europe/Berlin", 1111, 777]
        await handle.finish(True)
        stored = await b.identities.get("br", "b1")
        assert stored is not None
        assert {c["name"]: c["value"] for c in stored.cookies} == {
            "old": "1",
            "clearance": "granted",
        }
        assert stored.stats.ok == 1 and stored.leases == 0
    finally:
        await pool.close()
        await b.close()


async def test_a_navigation_that_meets_a_block_raises_blocked(site: str, tmp_path: Path) -> None:
    b = await open_backend(f"sqlite:///{tmp_path / 'f.db'}")
    pool = BrowserPool(BrowserNeeds(size=1, max_uses=10))
    try:
        await b.identities.put("br", [parse_identity({"id": "b1"})])
        lease = await b.identities.lease("br")
        assert lease is not None
        handle = IdentityHandle(b.identities, IdentityPolicy(pool="br"), lease)
        handle.browser = pool
        handle.access = Access(b, "br-type", lambda: BaseConfig())
        handle.metering = TaskMeter(handle.access.book)
        async with handle.browser_context() as page:
            with pytest.raises(Blocked) as met:
                await page.goto(f"{site}cf")
            verdict = met.value.verdict
            assert (verdict.kind, verdict.vendor) == ("challenge", "cloudflare")
            assert met.value.challenge is not None and met.value.challenge.page is page
            ok = await page.goto(site)  # an ordinary page passes
            assert ok is not None and ok.status == 200
            answered = await page.goto(f"{site}cf", fleet_classify=False)  # opted out
            assert answered is not None and answered.status == 403
        await handle.finish(True)
        await handle.access.flush()
        # Its navigations were metered as the tier "browser", its seconds too.
        held = handle.access.book.held()["type:br-type"]
        assert held["requests:browser"] >= 3 and held["bytes:browser"] > 3 * 60
        assert held["browser_seconds"] > 0
        state = await b.domains.get("br-type", "127.0.0.1")
        assert state is not None and state.count("challenge") == 1 and state.count("ok") == 2
    finally:
        await pool.close()
        await b.close()
