"""The master under hostile clients, end to end: a real ``fleet master`` process (uvicorn
with Fleet's protocol) on Redis and on SQLite."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from fleet.backends import open_backend
from tests.support.master_proc import MASTER_TOKEN, MasterProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

GHOST = "hostile-ghost"
H = {"Authorization": f"Bearer {MASTER_TOKEN}"}


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


def announce_big_body(port: int) -> bytes:
    """Headers announcing 30 MiB, no body: the answer must come without it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(
            f"POST /api/v1/automations/{GHOST}/tasks/batch HTTP/1.1\r\nhost: x\r\n"
            f"content-type: application/json\r\ncontent-length: {30 << 20}\r\n\r\n".encode()
        )
        return s.recv(100)


async def test_hostile_requests_against_a_real_master(url: str, tmp_path: Path) -> None:
    async with await open_backend(url) as b:
        entry = {"type": GHOST, "kind": "BatchAutomation",
                 "config": {"type": "object", "properties": {"proxy_url": {"type": "string"}}},
                 "queue": {"name": GHOST, "payload": {"type": "object"}}, "stream": None,
                 "pools": {}}  # fmt: skip
        await b.catalog.put(GHOST, entry)
        await b.configs.set(GHOST, {"proxy_url": "http://user:pr0xy-secret@10.1.1.1:3128"})
    master = MasterProcess(url, tmp_path)
    try:
        await master.wait_ready(timeout=15)
        async with httpx.AsyncClient(base_url=master.url, headers=H, timeout=10) as c:
            # 1: no token, no body read.
            answer = await asyncio.to_thread(announce_big_body, master.port)
            assert answer.startswith(b"HTTP/1.1 401")
            # 3: depth and surrogates refused before anything is stored; reads still work.
            deep = b'{"tasks": [{"payload": ' + b"[" * 300 + b"]" * 300 + b"}]}"
            r = await c.post(f"/api/v1/automations/{GHOST}/tasks/batch", content=deep)
            assert r.status_code == 422
            r = await c.post(f"/api/v1/automations/{GHOST}/tasks",
                             content=b'{"payload": {"a": "\\ud800"}}')  # fmt: skip
            assert r.status_code == 422
            for path in ("dead", "config", "queue"):
                assert (await c.get(f"/api/v1/automations/{GHOST}/{path}")).status_code == 200
            # 5: secrets masked unless the admin asks.
            r = await c.get(f"/api/v1/automations/{GHOST}/config")
            assert "pr0xy-secret" not in r.text
            r = await c.get(f"/api/v1/automations/{GHOST}/config", params={"reveal": "true"})
            assert "pr0xy-secret" in r.text
            # 6: headers, OPTIONS, no server.
            r = await c.options(f"/api/v1/automations/{GHOST}/tasks")
            assert r.status_code == 204 and "POST" in r.headers["allow"]
            assert "server" not in r.headers
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
            # 10: unknown things are 404.
            assert (await c.delete("/api/v1/automations/no-such-type")).status_code == 404
            assert (await c.delete("/api/v1/pools/no-such-pool")).status_code == 404
            # 7: guessing is throttled for this address.
            codes = []
            for i in range(22):
                r = await c.get("/api/v1/automations", headers={"Authorization": f"Bearer x{i}"})
                codes.append(r.status_code)
            # The unauthenticated upload above was the first failure of this address.
            assert codes[:19] == [401] * 19 and set(codes[19:]) == {429}
    finally:
        master.close()
