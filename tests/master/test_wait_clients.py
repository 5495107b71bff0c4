"""``?wait=`` ends with its client and is served by shared pollers (issue 40, finding
5), against a real ``fleet master`` process on a real redis-server: waits whose
clients closed their sockets stop reading the store at once, and many waits on one
type cost one read a tick, not one each."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from fleet.backends import open_backend
from tests.support.master_proc import MASTER_TOKEN, MasterProcess, bare_entry

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TYPE = "wait-clients"
TASKS = f"/api/v1/automations/{TYPE}/tasks"
H = {"Authorization": f"Bearer {MASTER_TOKEN}"}
WAITS = 200


@pytest.fixture
async def master(redis_url: str, tmp_path: Path) -> Any:
    async with await open_backend(redis_url) as b:
        await b.catalog.put(TYPE, bare_entry(TYPE))
    # no sweeper: the store's own traffic is what the waits make
    proc = MasterProcess(redis_url, tmp_path, sweep_seconds=3600)
    try:
        await proc.wait_ready()
        yield proc
    finally:
        proc.close()


async def _submit(http: httpx.AsyncClient, n: int) -> list[str]:
    r = await http.post(f"{TASKS}/batch", json={"tasks": [{"payload": {}}] * n}, headers=H)
    assert r.status_code == 202, r.text
    return [item["task_id"] for item in r.json()["results"]]


async def _per_second(r: aioredis.Redis, *stats: str) -> float:
    """How many commands (``stats``: ``total``, or commands' names, summed) Redis ran in
    one second."""

    async def count() -> int:
        if stats == ("total",):
            return int((await r.info("stats"))["total_commands_processed"])
        info = await r.info("commandstats")
        return sum(int(info.get(f"cmdstat_{s}", {}).get("calls", 0)) for s in stats)

    before = await count()
    await asyncio.sleep(1.0)
    return await count() - before - (1 if stats == ("total",) else 0)  # the INFO itself


def _open_wait(port: int, task_id: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(
        f"GET {TASKS}/{task_id}?wait=60 HTTP/1.1\r\nhost: x\r\n"
        f"authorization: Bearer {MASTER_TOKEN}\r\n\r\n".encode()
    )
    return s


async def test_waits_stop_when_their_clients_leave(master: MasterProcess, redis_url: str) -> None:
    r = aioredis.Redis.from_url(redis_url)
    try:
        async with master.client() as http:
            ids = await _submit(http, WAITS)
        quiet = await _per_second(r, "total")
        socks = [await asyncio.to_thread(_open_wait, master.port, t) for t in ids]
        await asyncio.sleep(1.0)
        waiting = await _per_second(r, "total")
        for s in socks:
            s.close()  # send-and-close: nobody reads the answers
        await asyncio.sleep(0.5)
        after = await _per_second(r, "total")
    finally:
        await r.aclose()
    print(
        f"\n{WAITS} waits: {quiet:.0f} commands/s before, {waiting:.0f} while held, "
        f"{after:.0f} after their clients left"
    )
    assert after <= quiet + 20, (quiet, waiting, after)


async def test_many_waits_on_one_type_cost_one_read_a_tick(
    master: MasterProcess, redis_url: str
) -> None:
    r = aioredis.Redis.from_url(redis_url)
    limits = httpx.Limits(max_connections=WAITS + 10)
    try:
        async with master.client() as http:
            one, *_ = await _submit(http, 1)
            twenty = await _submit(http, 20)
        # What the master's own periodic jobs (sweeper, history) call with nobody waiting.
        idle = await _per_second(r, "fcall", "evalsha")
        for targets in ([one] * WAITS, twenty * (WAITS // 20)):
            # a client of its own each round: no connection kept alive in between
            async with httpx.AsyncClient(base_url=master.url, limits=limits, timeout=30) as http:
                calls = [
                    asyncio.create_task(http.get(f"{TASKS}/{t}?wait=4", headers=H)) for t in targets
                ]
                distinct = len(set(targets))
                await asyncio.sleep(1.0)
                # The steady cost while they wait (answered at 4 s): a loaded machine may
                # still be taking the waits' first reads (one each) in the first second.
                reads = await _per_second(r, "fcall", "evalsha") - idle
                if reads > distinct * 5 + 5:
                    reads = await _per_second(r, "fcall", "evalsha") - idle
                answers = await asyncio.gather(*calls)
            assert {a.status_code for a in answers} == {200}
            assert {a.json()["state"] for a in answers} == {"queued"}
            print(f"\n{WAITS} waits on {distinct} task(s): {reads:.0f} state reads in 1 s")
            # one read of each distinct task a tick (4 a second), not one per wait
            assert reads <= distinct * 5 + 5, reads
    finally:
        await r.aclose()
