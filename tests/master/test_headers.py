"""Security headers on every answer, OPTIONS from the routes, no Server header."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.master.conftest import ADMIN, InProcess, auth
from tests.master.plugins import SCRAPE
from tests.support.master_proc import MasterProcess
from tests.support.waits import until


def assert_secure(headers: httpx.Headers) -> None:
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"


async def test_every_answer_carries_the_headers(master: InProcess) -> None:
    for path, headers in [
        ("/", {}),
        ("/js/app.js", {}),
        ("/healthz", {}),
        (f"/api/v1/automations/{SCRAPE}/queue", auth(ADMIN)),
        (f"/api/v1/automations/{SCRAPE}/queue", {}),  # a 401
        ("/api/v1/nothing-here", auth(ADMIN)),  # a 404
    ]:
        r = await master.client.get(path, headers=headers)
        assert_secure(r.headers)


async def test_options_answers_from_the_routes(master: InProcess) -> None:
    r = await master.client.options(f"/api/v1/automations/{SCRAPE}/tasks")
    assert r.status_code == 204
    assert r.headers["allow"] == "GET, HEAD, POST, OPTIONS"  # submit, and the task pages
    assert "access-control-allow-origin" not in r.headers  # no cross-origin access
    r = await master.client.options(f"/api/v1/automations/{SCRAPE}/groups/g")
    assert r.headers["allow"] == "GET, HEAD, PUT, DELETE, OPTIONS"
    assert_secure(r.headers)
    r = await master.client.options("/api/v1/automations/x/tasks/batch/nope/deeper")
    assert r.status_code == 404


async def test_a_real_master_does_not_advertise_its_server(tmp_path: Path) -> None:
    master = MasterProcess(f"sqlite:///{tmp_path / 'f.db'}", tmp_path)
    try:
        async with master.client() as c:

            async def answer() -> list[httpx.Response]:
                return [await c.get("/healthz")]

            (r,) = await until(
                answer, interval=0.1, what="the master to answer", ignoring=(httpx.HTTPError,)
            )
            assert r.status_code == 200
            assert "server" not in r.headers
            assert_secure(r.headers)
    finally:
        master.close()
