"""Proxy health with real processes: two ``fleet worker`` processes of ``proxy-fetch``
on Redis, three local forward proxies (with credentials) and a local target.

One run of about 20 s checks, measured at the proxies themselves and in the plugin's
ledger:

* ``proxy_max_concurrency=2``: no proxy ever serves more than 2 requests at once, over
  6 slots on 2 workers (and the cap is reached);
* sticky keys keep their proxy across slots and both workers;
* a proxy that starts answering 403 is reported bad by whichever worker meets it first,
  then neither worker sends it a request during its 6 s cool-down, and it serves again
  once the cool-down is over;
* every place is given back when the workers stop; no listing holds a password.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.proxy import proxy_key, proxy_key_salt
from fleet.core.submission import make_push_request
from tests.proxies.http_proxy import ForwardProxy, Target
from tests.worker.procs import ROOT, fleet_env
from tests.worker.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TYPE = "proxy-fetch"
PLUGIN = "tests.proxies.plugin"
COOLDOWN = 6.0  # long enough that a loaded machine still reads it while it holds
CAP = 2


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def start_worker(wid: str, url: str, env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "fleet", "worker", "--plugin", PLUGIN]
    args += ["--type", TYPE, "--id", wid, "--backend", url, "--grace", "5"]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture
async def net() -> AsyncIterator[tuple[Target, list[ForwardProxy]]]:
    target = Target(delay=0.25)
    proxies = [ForwardProxy(n, user=f"user-{n}", password=f"secret-{n}") for n in "abc"]
    for server in (target, *proxies):
        await server.start()
    yield target, proxies
    for server in (target, *proxies):
        await server.close()


async def completed(backend: Backend) -> int:
    return (await backend.queues.depths(TYPE)).counters.completed


async def run_tasks(backend: Backend, payloads: list[dict[str, Any]], timeout: float) -> None:
    goal = await completed(backend) + len(payloads)
    await backend.queues.push(TYPE, [make_push_request(p) for p in payloads])

    async def done() -> bool:
        return await completed(backend) >= goal

    await wait_until(done, timeout=timeout, interval=0.1, what=f"{len(payloads)} tasks done")


async def test_two_workers_share_proxy_health(
    redis_url: str, net: tuple[Target, list[ForwardProxy]], tmp_path: Path
) -> None:
    target, proxies = net
    b = proxies[1]
    ledger = tmp_path / "ledger.jsonl"
    backend = await open_backend(redis_url)
    try:
        salt = await proxy_key_salt(backend.kv)  # the workers key proxies with it too
        keys = {p.name: proxy_key(p.url(), salt) for p in proxies}
        await _scenario(backend, redis_url, target, proxies, b, keys, ledger, tmp_path)
    finally:
        await backend.close()  # also when an assertion failed: no socket left behind


async def _scenario(
    backend: Any,
    redis_url: str,
    target: Target,
    proxies: list[ForwardProxy],
    b: ForwardProxy,
    keys: dict[str, str],
    ledger: Path,
    tmp_path: Path,
) -> None:
    await backend.configs.set(
        TYPE,
        {
            "slots": 3,
            "max_attempts": 20,
            "visibility_seconds": 30,
            "proxy_url": ",".join(p.url() for p in proxies),
            "proxy_max_concurrency": CAP,
            "proxy_cooldown_seconds": COOLDOWN,
        },
    )
    env = fleet_env(FLEET_PROXY_LEDGER=str(ledger), FLEET_ENTRY_POINTS="0")
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for wid in ("w1", "w2"):
            log = (tmp_path / f"{wid}.log").open("wb")
            logs.append(log)
            procs.append(start_worker(wid, redis_url, env, log))

        # Warm-up: both workers running and fetching.
        await run_tasks(backend, [{"target": f"{target.url}/w{i}"} for i in range(12)], 40)

        # Sticky keys: every attempt of one key on one proxy, whichever slot or worker.
        sticky = [{"target": f"{target.url}/s{i}", "sticky": f"acct-{i % 6}"} for i in range(36)]
        await run_tasks(backend, sticky, 30)
        by_key: dict[str, set[str]] = defaultdict(set)
        pids: set[int] = set()
        for line in read_ledger(ledger):
            if line["sticky"] is not None:
                by_key[line["sticky"]].add(line["proxy"])
                pids.add(line["pid"])
        assert len(by_key) == 6 and all(len(v) == 1 for v in by_key.values()), by_key
        assert len(pids) == 2  # both workers served sticky keys
        assert max(p.max_in_flight for p in proxies) == CAP  # the cap was reached ...
        assert all(p.max_in_flight <= CAP for p in proxies)  # ... and held

        # Proxy b turns bad: one report cools it down for every slot of both workers.
        for p in proxies:
            p.reset()
        b.bad = True
        start = time.time()
        batch = [{"target": f"{target.url}/c{i}"} for i in range(300)]
        runner = asyncio.create_task(run_tasks(backend, batch, 60))

        async def reported() -> bool:
            return any(line["status"] == 403 for line in read_ledger(ledger))

        await wait_until(reported, timeout=20, interval=0.05, what="a 403 reported")
        await asyncio.sleep(0.3)
        b.bad = False  # it would serve again; only the cool-down keeps it idle
        info = {p.key: p for p in await backend.proxies.listing()}[keys["b"]]
        assert info.cooling_until is not None and info.last_bad_at is not None
        until = info.cooling_until
        # The cool-down started with the first bad report; a second one (the other
        # worker, before it learned) counts but does not extend it.
        cooled_at = until - COOLDOWN
        assert cooled_at <= info.last_bad_at + 0.05, (cooled_at, info.last_bad_at)
        await runner
        lines = [line for line in read_ledger(ledger) if line["t0"] >= start]
        during = [t for t in b.requests if cooled_at + 0.3 < t < until - 0.05]
        assert during == [], f"{len(during)} requests reached b while it cooled down"
        assert len({line["pid"] for line in lines if cooled_at < line["t0"] < until}) == 2
        after = [x for x in lines if x["proxy"] == keys["b"] and x["t0"] > until]
        assert after and all(x["status"] == 200 for x in after), "b never came back"
        # A task the other worker started in the moment before it learned of the report
        # may still go through b: the same allowance as at the proxy above.
        assert {x["proxy"] for x in lines if cooled_at + 0.3 < x["t0"] < until} == {
            keys["a"],
            keys["c"],
        }
        assert all(p.max_in_flight <= CAP for p in proxies)

        listed = await backend.proxies.listing()
        text = json.dumps([p.to_dict() for p in listed])
        assert "secret-" not in text and "user-" not in text
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:  # waited for in a thread: the proxies keep serving meanwhile
            try:
                await asyncio.to_thread(proc.wait, 20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
    assert [p.in_use for p in await backend.proxies.listing()] == [0, 0, 0]  # places given back
    out = "".join((tmp_path / f"{w}.log").read_text(errors="replace") for w in ("w1", "w2"))
    assert f"proxy {keys['b']} cools down for" in out, out[-3000:]
    assert "secret-" not in out and "user-" not in out
