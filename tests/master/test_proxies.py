"""``GET /api/v1/proxies`` and the proxy part of ``/metrics``: what slots report shows
up, never with a credential; scopes; a bounded number of per-proxy series."""

from __future__ import annotations

from fleet.core.proxy import ProxyHandle, ProxyPolicy, proxy_key, proxy_key_salt
from tests.master.conftest import ADMIN, READ, SCOPED, InProcess, auth

URLS = ["http://alice:s3cret@p1.test:8001", "http://alice:s3cret@p2.test:8002"]


async def test_proxies_are_listed_without_credentials(master: InProcess) -> None:
    r = await master.client.get("/api/v1/proxies", headers=auth(READ))
    assert r.status_code == 200
    assert r.json() == {"proxies": [], "cooling": 0, "in_use": 0}
    slot = ProxyHandle(
        urls=URLS, health=master.backend.proxies, policy=ProxyPolicy(cooldown_seconds=60)
    )
    await slot.ensure()
    await slot.report_bad("captcha via http://alice:s3cret@p1.test:8001")
    r = await master.client.get("/api/v1/proxies", headers=auth(ADMIN))
    assert r.status_code == 200
    body = r.json()
    assert "s3cret" not in r.text and "alice" not in r.text
    assert (body["cooling"], body["in_use"]) == (1, 1)
    first, second = body["proxies"]
    salt = await proxy_key_salt(master.backend.kv)
    assert first["proxy"] == proxy_key(URLS[0], salt)
    assert (first["cooling"], first["failures"], first["uses"], first["in_use"]) == (
        True,
        1,
        1,
        0,
    )
    assert first["cooling_until"] > first["last_bad_at"]
    assert first["last_reason"] == "captcha via http://********@p1.test:8001"
    assert (second["proxy"], second["cooling"], second["in_use"]) == (
        proxy_key(URLS[1], salt),
        False,
        1,
    )
    r = await master.client.get("/api/v1/proxies?limit=1", headers=auth(ADMIN))
    assert len(r.json()["proxies"]) == 1
    await slot.close()


async def test_scopes(master: InProcess) -> None:
    assert (await master.client.get("/api/v1/proxies")).status_code == 401
    assert (await master.client.get("/api/v1/proxies", headers=auth(SCOPED))).status_code == 403
    r = await master.client.get("/api/v1/proxies?limit=0", headers=auth(ADMIN))
    assert r.status_code == 422


async def test_metrics_count_cooling_proxies_and_bound_the_series(master: InProcess) -> None:
    backend = master.backend
    for i in range(30):
        key = f"http://p{i:02d}.test:80"
        for _ in range(i + 1):
            await backend.proxies.take([key], f"t{i}")
    await backend.proxies.report("http://p00.test:80", ok=False, cooldown_seconds=60)
    text = (await master.client.get("/metrics", headers=auth(READ))).text
    assert "fleet_proxies 30.0" in text
    assert "fleet_proxy_cooling 1.0" in text
    assert "fleet_proxy_in_use 30.0" in text
    uses = [line for line in text.splitlines() if line.startswith("fleet_proxy_uses_total{")]
    assert len(uses) == 20  # bounded
    assert 'fleet_proxy_uses_total{proxy="http://p29.test:80"} 30.0' in text  # the most used
    assert 'fleet_proxy_failures_total{proxy="http://p00.test:80"} 1.0' in text  # cooling
    assert 'fleet_proxy_uses_total{proxy="http://p05.test:80"}' not in text
