"""Several hosts: Redis, the master and two workers each in a network namespace of its
own, on one LAN of veth links (tests/support/netns.py), talking over real TCP.

- A partition longer than ``visibility_seconds``: worker 1's link goes down mid-drain.
  Its leases run out and the master's sweeper hands its tasks to worker 2; when the
  link comes back, worker 1's late acks are refused (stale), no task is lost, each one
  is acked exactly once, and worker 1 comes back by itself and takes tasks again.
- Latency: 50 ms each way on a worker's link (netem, or a delaying relay on kernels
  without it). A drain is bound by round trips, not by the link, so 8 slots still
  drain several times faster than 1.

Needs root and ``ip netns``: skipped otherwise, except under FLEET_TEST_REQUIRE_REDIS=1
(CI), where it fails instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.chaos.harness import PLUGIN, TYPE, VISIBILITY, Ledger, submit, wait_settled
from tests.support.master_proc import MASTER_TOKEN
from tests.support.netns import Host, Network, NsProcess, netem_available, unavailable_reason
from tests.support.redis_server import REDIS_BIN, free_port, require_redis
from tests.support.waits import until_sync
from tests.worker.procs import ROOT, fleet_env
from tests.worker.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Latency added to each direction of a worker's link in the latency scenario.
DELAY_MS = 50
#: The worker's line when the backend refuses an ack (runner._on_stale_ack).
REFUSED = re.compile(r"ack of task (\S+) was refused: its lease had been lost")
AUTH = {"Authorization": f"Bearer {MASTER_TOKEN}"}


@dataclass
class Site:
    """The deployment: Redis, the master and the worker hosts on one LAN."""

    net: Network
    dir: Path
    redis_host: Host
    redis_port: int
    master_url: str
    workers: dict[str, Host]
    procs: list[NsProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://{self.redis_host.addr}:{self.redis_port}/0"

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.master_url, headers=AUTH, timeout=10)


def _require_hosts() -> None:
    reason = unavailable_reason()
    if reason is None and REDIS_BIN is None:
        reason = "redis-server is not installed"
    if reason is not None:
        if require_redis():
            pytest.fail(f"FLEET_TEST_REQUIRE_REDIS=1 but the multi-host test cannot run: {reason}")
        pytest.skip(reason)


def _wait_pong(addr: str, port: int, proc: NsProcess, timeout: float = 20) -> None:
    def settled() -> str:
        try:
            with socket.create_connection((addr, port), timeout=0.5) as s:
                s.settimeout(2)
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return "up"
        except OSError:
            pass
        return "exited" if proc.proc.poll() is not None else ""

    with contextlib.suppress(AssertionError):
        if until_sync(settled, timeout=timeout, interval=0.05) == "up":
            return
    raise AssertionError(f"redis-server on {addr}:{port} did not answer:\n{proc.log()}")


def _wait_healthz(url: str, proc: NsProcess, timeout: float = 30) -> None:
    with httpx.Client(base_url=url, timeout=2) as http:

        def settled() -> str:
            try:
                if http.get("/healthz").status_code == 200:
                    return "up"
            except httpx.HTTPError:
                pass
            return "exited" if proc.proc.poll() is not None else ""

        with contextlib.suppress(AssertionError):
            if until_sync(settled, timeout=timeout, interval=0.1) == "up":
                return
    raise AssertionError(f"the master at {url} did not come up:\n{proc.log()}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Four hosts (redis, master, w1, w2); redis-server and ``fleet master`` running
    on theirs. Everything is removed afterwards, also when the test failed."""
    _require_hosts()
    directory = tmp_path_factory.mktemp("several-hosts")
    net = Network()
    procs: list[NsProcess] = []
    try:
        net.create()
        redis_host, master_host = net.add_host("redis"), net.add_host("master")
        workers = {name: net.add_host(name) for name in ("w1", "w2")}
        for host in net.hosts.values():
            net.wait_reachable(host)
        redis_port = free_port()
        data = directory / "redis"
        data.mkdir()
        redis_args = [REDIS_BIN or "redis-server", "--bind", redis_host.addr]
        redis_args += ["--port", str(redis_port), "--dir", str(data), "--save", ""]
        redis_args += ["--appendonly", "no", "--protected-mode", "no", "--daemonize", "no"]
        server = NsProcess(redis_host.argv(*redis_args), directory / "redis.log")
        procs.append(server)
        _wait_pong(redis_host.addr, redis_port, server)
        port = free_port()
        site = Site(
            net, directory, redis_host, redis_port, f"http://{master_host.addr}:{port}", workers,
            procs,
        )  # fmt: skip
        env = fleet_env(
            FLEET_ADMIN_TOKEN=MASTER_TOKEN, FLEET_SWEEP_SECONDS="0.5", FLEET_LOG_LEVEL="INFO"
        )
        master_args = [sys.executable, "-m", "fleet", "master", "--host", master_host.addr]
        master_args += ["--port", str(port), "--backend", site.url]
        master = NsProcess(
            master_host.argv(*master_args), directory / "master.log", env=env, cwd=ROOT
        )
        procs.append(master)
        _wait_healthz(site.master_url, master)
        yield site
    finally:
        for p in reversed(procs):
            p.close()
        net.destroy()


class Workers:
    """``fleet worker`` processes (and relays) started inside hosts; all killed at the
    end of the test. Each test has its own ledger (tests/chaos/plugin.py writes it)."""

    def __init__(self, site: Site, directory: Path) -> None:
        self.site = site
        self.dir = directory
        self.ledger = Ledger(directory / "ledger.jsonl")
        self.procs: dict[str, NsProcess] = {}

    def start(self, host: Host, worker_id: str, url: str | None = None) -> NsProcess:
        args = [sys.executable, "-m", "fleet", "worker", "--plugin", PLUGIN, "--type", TYPE]
        args += ["--id", worker_id, "--backend", url or self.site.url, "--grace", "5"]
        env = fleet_env(FLEET_CHAOS_LEDGER=str(self.ledger.path))
        proc = NsProcess(host.argv(*args), self.dir / f"{worker_id}.log", env=env, cwd=ROOT)
        self.procs[worker_id] = proc
        return proc

    def relay(self, host: Host, port: int, delay_ms: int) -> NsProcess:
        """A delaying relay inside ``host`` from ``127.0.0.1:port`` to Redis."""
        upstream = f"{self.site.redis_host.addr}:{self.site.redis_port}"
        args = [sys.executable, "-m", "tests.support.netns", "relay", f"127.0.0.1:{port}"]
        args += [upstream, str(delay_ms)]
        proc = NsProcess(host.argv(*args), self.dir / f"relay-{host.name}.log", cwd=ROOT)
        self.procs[f"relay-{host.name}"] = proc
        return proc

    def close(self) -> None:
        for p in self.procs.values():
            p.close()


@pytest.fixture
def workers(site: Site, tmp_path: Path) -> Iterator[Workers]:
    """A flushed Redis (what an earlier test left is gone), and the test's processes,
    killed afterwards; qdiscs the test added are removed, links brought back up."""
    client = redis.Redis(host=site.redis_host.addr, port=site.redis_port)
    client.flushall()
    client.close()
    w = Workers(site, tmp_path)
    try:
        yield w
    finally:
        w.close()
        for host in site.workers.values():
            host.clear_qdiscs()
            host.heal()


async def configure(url: str, **config: Any) -> None:
    async with await open_backend(url) as b:
        await b.configs.set(TYPE, {"visibility_seconds": VISIBILITY, "max_attempts": 3, **config})


async def views(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """``GET /api/v1/workers`` of the master, by worker id (this type only)."""
    r = await http.get("/api/v1/workers")
    assert r.status_code == 200, r.text
    return {v["worker_id"]: v for v in r.json() if v["type"] == TYPE}


async def wait_state(
    http: httpx.AsyncClient, worker_id: str, states: tuple[str, ...], timeout: float
) -> dict[str, Any]:
    """Until the master shows ``worker_id`` in one of ``states``; its view."""
    seen: dict[str, Any] = {}

    async def there() -> bool:
        nonlocal seen
        seen = (await views(http)).get(worker_id, {})
        return seen.get("state") in states

    try:
        await wait_until(there, timeout=timeout, interval=0.1, what=f"{worker_id} in {states}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last view: {seen}") from None
    return seen


def ends_by(ledger: Ledger) -> dict[str, list[int]]:
    _, ends = ledger.read()
    return ends


async def completed(b: Backend) -> int:
    return int((await b.queues.depths(TYPE)).counters.completed)


async def test_a_partition_longer_than_the_lease(site: Site, workers: Workers) -> None:
    await configure(site.url, slots=4)
    w1 = workers.start(site.workers["w1"], "host-1")
    w2 = workers.start(site.workers["w2"], "host-2")
    async with await open_backend(site.url) as b, site.http() as http:
        for wid in ("host-1", "host-2"):
            await wait_state(http, wid, ("RUNNING",), timeout=60)
        pids = {int(v["pid"]): wid for wid, v in (await views(http)).items()}
        # `ip netns exec` runs the worker in place: the ledger's pids are the workers'.
        assert pids == {w1.pid: "host-1", w2.pid: "host-2"}, pids

        # 600 tasks of 100 ms on 2 x 4 slots: about 7.5 s of work.
        n = 600
        ids = await submit(b, [{"n": i, "ms": 100} for i in range(n)])

        def both_drain() -> bool:
            ended = [p for ps in ends_by(workers.ledger).values() for p in ps]
            return ended.count(w1.pid) >= 20 and ended.count(w2.pid) >= 20

        await wait_until(both_drain, timeout=30, interval=0.05, what="both workers draining")
        before_cut = await completed(b)
        site.workers["w1"].cut()
        cut_at = time.monotonic()
        down = await wait_state(http, "host-1", ("DOWN",), timeout=10)
        down_after = time.monotonic() - cut_at
        assert down["up"] is False
        # Longer than the lease: w1's leases run out and the sweeper re-queues its tasks.
        await asyncio.sleep(max(0.0, cut_at + VISIBILITY + 4 - time.monotonic()))
        cut_for = time.monotonic() - cut_at
        during_cut = await completed(b) - before_cut
        site.workers["w1"].heal()
        healed_at = time.monotonic()

        done, dead, other = await wait_settled(b, ids, timeout=60)
        assert len(done) == n, (len(done), len(dead), len(other))
        await wait_state(http, "host-1", ("RUNNING",), timeout=30)
        rejoined_after = time.monotonic() - healed_at

        def refused() -> set[str]:
            return set(REFUSED.findall(w1.log()))

        await wait_until(lambda: bool(refused()), timeout=30, interval=0.2, what="stale acks")
        stale = refused()

        # Worker 1 takes tasks again: with worker 2 drained, it runs a second batch alone.
        r = await http.post(f"/api/v1/automations/{TYPE}/workers/host-2/drain")
        assert r.status_code == 200, r.text
        await wait_state(http, "host-2", ("DRAINING", "IDLE"), timeout=15)
        await asyncio.sleep(1.0)  # w2's feeder hears the drain
        n2 = 40
        ids2 = await submit(b, [{"n": n + i, "ms": 50} for i in range(n2)])
        done2, dead2, other2 = await wait_settled(b, ids2, timeout=60)
        assert len(done2) == n2, (len(done2), len(dead2), len(other2))
        r = await http.post(f"/api/v1/automations/{TYPE}/workers/host-2/resume")
        assert r.status_code == 200, r.text

        total_completed = await completed(b)
        depths = await b.queues.depths(TYPE)

    ends = ends_by(workers.ledger)
    lost = [t for t in ids + ids2 if not ends.get(t)]
    assert lost == []  # every task ran to its end at least once
    twice = {t for t in ids if len(ends[t]) > 1}
    # Each task was acked exactly once: the late acks of w1 changed nothing.
    assert total_completed == n + n2, (total_completed, n + n2)
    assert depths.pending == 0 and depths.processing == 0 and depths.dead == 0
    # The refused acks were w1's, of tasks that w2 ran again; every task that ran
    # twice ran once on w1 during the cut.
    assert stale <= twice, (sorted(stale - twice), sorted(twice))
    for t in twice:
        assert w1.pid in ends[t] and w2.pid in ends[t], (t, ends[t])
    second = [p for t in ids2 for p in ends[t]]
    by_w1 = second.count(w1.pid)
    assert by_w1 >= n2 - 4, (by_w1, second.count(w2.pid))
    print(
        f"\npartition: host-1 cut for {cut_for:.1f} s (visibility {VISIBILITY:g} s), shown "
        f"DOWN after {down_after:.1f} s; host-2 completed {during_cut} tasks meanwhile; "
        f"{len(twice)} of {n} tasks ran twice, {len(stale)} late acks of host-1 refused; "
        f"host-1 RUNNING again {rejoined_after:.1f} s after the heal and ran {by_w1} of the "
        f"{n2} tasks after it"
    )


def rtt_inside(host: Host, target: str) -> float:
    """Median Redis PING round trip in ms from inside ``host`` to ``target``."""
    argv = host.argv(sys.executable, "-m", "tests.support.netns", "rtt", target)
    last: list[subprocess.CompletedProcess[str]] = []

    def measured() -> str:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=30)
        last[:] = [done]
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        return float(until_sync(measured, timeout=15, interval=0.2))
    except AssertionError:
        raise AssertionError(
            f"no PING through {target} from {host.name}: {last[0].stderr}"
        ) from None


async def drain_rate(b: Backend, n: int) -> float:
    """Tasks per second to drain ``n`` new tasks of 20 ms, from submission to the last ack."""
    start_count = await completed(b)
    started = time.monotonic()
    await submit(b, [{"n": i, "ms": 20} for i in range(n)])
    await wait_until(
        lambda: _reached(b, start_count + n), timeout=60, interval=0.02, what=f"{n} completed"
    )
    return n / (time.monotonic() - started)


async def _reached(b: Backend, count: int) -> bool:
    return await completed(b) >= count


async def test_latency_on_the_links_still_scales_with_slots(site: Site, workers: Workers) -> None:
    host = site.workers["w1"]
    redis_target = f"{site.redis_host.addr}:{site.redis_port}"
    base_rtt = rtt_inside(host, redis_target)
    if netem_available(host.ns, "eth0"):
        how = "tc netem"
        host.netem("delay", f"{DELAY_MS}ms")
        url, target = site.url, redis_target
    else:  # this kernel has no sch_netem: the same latency from a relay in the host
        how = "a delaying relay (no sch_netem in this kernel)"
        port = free_port()
        workers.relay(host, port, DELAY_MS)
        url, target = f"redis://127.0.0.1:{port}/0", f"127.0.0.1:{port}"
    rtt = rtt_inside(host, target)
    assert rtt >= 2 * DELAY_MS * 0.9, (rtt, how)  # the latency is really there

    await configure(site.url, slots=1)
    workers.start(host, "far-1", url=url)
    async with await open_backend(site.url) as b, site.http() as http:
        await wait_state(http, "far-1", ("RUNNING",), timeout=60)
        one = await drain_rate(b, 24)
        r = await http.patch(f"/api/v1/automations/{TYPE}/config", json={"slots": 8})
        assert r.status_code == 200, r.text

        async def eight_slots() -> bool:
            view = (await views(http)).get("far-1", {})
            return bool(view.get("slots", {}).get("running") == 8)

        await wait_until(eight_slots, timeout=30, interval=0.1, what="far-1 on 8 slots")
        eight = await drain_rate(b, 160)
    print(
        f"\nlatency via {how}: PING {base_rtt:.1f} ms -> {rtt:.1f} ms; 20 ms tasks drain at "
        f"{one:.1f}/s on 1 slot, {eight:.1f}/s on 8 slots ({eight / one:.1f}x)"
    )
    assert eight >= 3 * one, (one, eight)
