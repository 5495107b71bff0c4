"""The demo site over real HTTP (a uvicorn server on a free loopback port)."""

from __future__ import annotations

import httpx
import pytest

from fleet.dev.demo_state import DemoSettings, pow_ok
from tests.examples.conftest import DemoSite


async def clear(client: httpx.AsyncClient) -> httpx.Response:
    ch = (await client.get("/challenge")).json()
    answer = next(a for a in range(10**7) if pow_ok(ch["nonce"], a, ch["difficulty"]))
    return await client.post(
        "/challenge", json={"challenge_id": ch["challenge_id"], "answer": answer}
    )


async def test_health_and_index(demo_site: DemoSite) -> None:
    async with httpx.AsyncClient(base_url=demo_site.url) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert "Fleet demo site" in (await client.get("/")).text


async def test_protected_pages_need_the_clearance_cookie(demo_site: DemoSite) -> None:
    async with httpx.AsyncClient(base_url=demo_site.url, headers={"User-Agent": "UA"}) as client:
        denied = await client.get("/products/1")
        assert denied.status_code == 403
        solved = await clear(client)
        assert solved.status_code == 200
        assert "cf_clearance" in solved.cookies
        page = await client.get("/products/1")
        assert page.status_code == 200 and "Product 1" in page.text
        assert (await client.get("/products/13")).status_code == 500  # always broken
        assert (await client.get("/products/999")).status_code == 404
        # The cookie is bound to the user agent that solved the challenge.
        other = await client.get("/products/1", headers={"User-Agent": "other"})
        assert other.status_code == 403
    stats = demo_site.state.stats
    assert (stats.challenges_solved, stats.pages_served, stats.pages_failed) == (1, 1, 1)


async def test_bad_answers_are_refused(demo_site: DemoSite) -> None:
    async with httpx.AsyncClient(base_url=demo_site.url) as client:
        ch = (await client.get("/challenge")).json()
        wrong = next(a for a in range(1000) if not pow_ok(ch["nonce"], a, ch["difficulty"]))
        r = await client.post(
            "/challenge", json={"challenge_id": ch["challenge_id"], "answer": wrong}
        )
        assert r.status_code == 403 and "cf_clearance" not in r.cookies
        assert (await client.post("/challenge", content=b"not json")).status_code == 400


@pytest.mark.parametrize("demo_settings", [DemoSettings(failure_rate=0.0, token_ttl_seconds=60)])
async def test_api_token_and_stock(demo_site: DemoSite) -> None:
    async with httpx.AsyncClient(base_url=demo_site.url) as client:
        assert (await client.get("/api/stock/A-1")).status_code == 401
        bad = await client.post("/api/token", json={"client_id": "demo", "client_secret": "x"})
        assert bad.status_code == 401
        token = (
            await client.post(
                "/api/token", json={"client_id": "demo", "client_secret": "demo-secret"}
            )
        ).json()
        assert token["expires_in"] == 60
        stock = await client.get(
            "/api/stock/A-1", headers={"Authorization": f"Bearer {token['access_token']}"}
        )
        assert stock.status_code == 200 and stock.json()["sku"] == "A-1"
        assert (await client.get("/stats")).json()["tokens_issued"] == 1


async def test_the_site_sees_the_socket_peer_not_a_forwarded_header(demo_site: DemoSite) -> None:
    async with httpx.AsyncClient(base_url=demo_site.url, headers={"User-Agent": "UA"}) as client:
        seen = await client.get("/ip", headers={"X-Forwarded-For": "127.0.0.9"})
    # The exit a clearance is bound to cannot be claimed with a header.
    assert seen.json() == {"client": "127.0.0.1", "user_agent": "UA"}
