"""Proxy health inside one worker (memory backend, local proxies and target): slots take
a healthy proxy before each task, respect the cap, leave a blocked proxy alone during
its cool-down, give their places back when they stop or the proxies change."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.proxy import proxy_key, proxy_key_salt
from tests.proxies.http_proxy import ForwardProxy, Target
from tests.proxies.plugin import ProxyFetch
from tests.worker.support import push, push_config, running_worker, wait_until

T = "proxy-fetch"


@pytest.fixture
async def mem() -> AsyncIterator[Backend]:
    backend = await open_backend(f"memory://proxy-worker-{uuid.uuid4().hex}")
    yield backend
    await backend.close()


@pytest.fixture
async def net() -> AsyncIterator[tuple[Target, list[ForwardProxy]]]:
    target = Target(delay=0.1)
    proxies = [ForwardProxy(f"p{i}", user=f"user{i}", password=f"pw-{i}") for i in range(2)]
    for server in (target, *proxies):
        await server.start()
    yield target, proxies
    for server in (target, *proxies):
        await server.close()


def ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_cap_cool_down_and_places(
    mem: Backend,
    net: tuple[Target, list[ForwardProxy]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target, (good, blocked) = net
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("FLEET_PROXY_LEDGER", str(path))
    config = {
        "slots": 3,
        "proxy_url": f"{good.url()},{blocked.url()}",
        "proxy_max_concurrency": 1,
        "proxy_cooldown_seconds": 60,
        "max_attempts": 5,
    }
    await mem.configs.set(T, config)
    blocked.bad = True
    async with running_worker(mem, [ProxyFetch]):
        ids = await push(mem, T, *[{"target": f"{target.url}/{i}"} for i in range(8)])

        async def all_done() -> bool:
            states = [(await mem.queues.state(T, i)).state for i in ids]
            return all(s == "done" for s in states)

        await wait_until(all_done, timeout=30, what="every task done")
        lines = ledger(path)
        salt = await proxy_key_salt(mem.kv)  # what the worker's slots key proxies with
        # The blocked proxy answered one 403, was reported and never used again.
        blocked_key = proxy_key(blocked.url(), salt)
        assert [line["status"] for line in lines if line["proxy"] == blocked_key] == [403]
        assert len(blocked.requests) == 1
        assert good.max_in_flight == 1  # three slots, a cap of one
        listed = {p.key: p for p in await mem.proxies.listing()}
        assert listed[blocked_key].cooling_until is not None
        assert "pw-" not in json.dumps([p.to_dict() for p in listed.values()])
        # New proxies: the places on the old ones are given back at once.
        fresh = ForwardProxy("p2")
        await fresh.start()
        try:
            gen = await push_config(mem, T, {"proxy_url": fresh.url()}, ["w1"])

            async def moved() -> bool:
                # The worker applied the new config (its slots have the new proxy) and
                # the places on the old one are given back: in use 0 alone is also the
                # instant between two tasks of a slot still on the old proxy.
                worker = await mem.workers.get(T, "w1")
                applied = 0 if worker is None else int(worker.state.get("applied_gen") or 0)
                if applied < gen:
                    return False
                found = {p.key: p.in_use for p in await mem.proxies.listing()}
                return found.get(proxy_key(good.url(), salt)) == 0

            await wait_until(moved, timeout=10, what="the old places given back")
            (tid,) = await push(mem, T, {"target": f"{target.url}/after"})

            async def done() -> bool:
                return (await mem.queues.state(T, tid)).state == "done"

            await wait_until(done, timeout=10, what="a task through the new proxy")
            assert len(fresh.requests) == 1
        finally:
            await fresh.close()
    assert all(p.in_use == 0 for p in await mem.proxies.listing())  # slots ended: places freed
