"""The demo's local forward proxies (fleet/dev/demo_proxies.py): distinct exits on one
machine, seen by the real demo site over real HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from fleet.dev.demo_proxies import (
    SOURCE_ADDRESSES,
    DemoProxy,
    is_loopback,
    source_available,
    start_demo_proxies,
    stop_demo_proxies,
)
from fleet.dev.demo_site import create_demo_app
from fleet.dev.serve import RunningServer, start_server
from tests.support.redis_server import free_port

pytestmark = pytest.mark.skipif(
    not all(source_available(a) for a in SOURCE_ADDRESSES),
    reason="this system does not route 127.0.0.2-4 to loopback",
)


@pytest.fixture
async def site() -> AsyncIterator[RunningServer]:
    server = await start_server(create_demo_app(), "127.0.0.1", 0)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def proxies() -> AsyncIterator[list[DemoProxy]]:
    started = await start_demo_proxies()
    try:
        yield started
    finally:
        await stop_demo_proxies(started)


async def test_each_proxy_is_a_distinct_exit(site: RunningServer, proxies: list[DemoProxy]) -> None:
    seen = []
    for proxy in proxies:
        async with httpx.AsyncClient(proxy=proxy.url, headers={"User-Agent": "UA/1"}) as http:
            answer = (await http.get(f"{site.url}/ip?x=1")).json()
        seen.append(answer["client"])
        assert answer["user_agent"] == "UA/1"
        assert proxy.requests == 1
    assert seen == [p.exit for p in proxies] == list(SOURCE_ADDRESSES)
    async with httpx.AsyncClient() as direct:
        assert (await direct.get(f"{site.url}/ip")).json()["client"] == "127.0.0.1"


async def test_a_post_body_goes_through(site: RunningServer, proxies: list[DemoProxy]) -> None:
    async with httpx.AsyncClient(proxy=proxies[0].url) as http:
        refused = await http.post(f"{site.url}/api/token", json={"client_id": "demo"})
        token = await http.post(
            f"{site.url}/api/token", json={"client_id": "demo", "client_secret": "demo-secret"}
        )
    assert refused.status_code == 401
    assert token.status_code == 200 and token.json()["access_token"]


async def test_connect_tunnels_from_the_exit(site: RunningServer, proxies: list[DemoProxy]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxies[1].port)
    try:
        writer.write(f"CONNECT 127.0.0.1:{site.port} HTTP/1.1\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /ip HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
        response = await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(body)["client"] == "127.0.0.3"


async def test_targets_beyond_loopback_and_bad_requests_are_refused(
    proxies: list[DemoProxy],
) -> None:
    async with httpx.AsyncClient(proxy=proxies[0].url) as http:
        outside = await http.get("http://example.com/")
    assert outside.status_code == 403 and "loopback only" in outside.text
    closed = free_port()
    async with httpx.AsyncClient(proxy=proxies[0].url) as http:
        assert (await http.get(f"http://127.0.0.1:{closed}/")).status_code == 502
    reader, writer = await asyncio.open_connection("127.0.0.1", proxies[0].port)
    writer.write(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
    assert (await reader.read()).startswith(b"HTTP/1.1 403")
    writer.close()
    assert is_loopback("localhost") and is_loopback("[::1]") and not is_loopback("10.0.0.1")


async def test_ports_follow_the_first_and_a_busy_one_is_replaced() -> None:
    first = free_port()
    busy = await asyncio.start_server(lambda r, w: None, "127.0.0.1", first + 1)
    try:
        started = await start_demo_proxies(first_port=first)
    finally:
        busy.close()
    try:
        ports = [p.port for p in started]
        assert ports[0] == first and ports[1] != first + 1 and len(set(ports)) == 3
    finally:
        await stop_demo_proxies(started)
