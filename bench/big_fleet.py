"""A big fleet on one master (issue 29, 5): ``--workers`` simulated workers, spread over
``--procs`` processes, against one Redis and one master; reports how the API and the
master hold up. A script, not a test.

Each simulated worker does what a real one does through the same backend calls: it
registers (``worker_register``), writes its state and publishes it, then every
``--heartbeat`` seconds registers again, writes its state and its stats frame, and
asks for work with ``reserve`` once a second (a trickle of tasks is pushed so some
reserves get one, which it acks). Meanwhile the driver measures, over ``--seconds``:

* the latency of ``GET /api/v1/workers`` (every worker, as the workers view reads it)
  and of ``GET /api/v1/automations`` (what the overview loads), p50 / p99 / max;
* the event stream: the delay from a worker's state change to its frame on
  ``GET /api/v1/events``;
* the master's CPU (percent of one core) and RSS, and Redis' CPU.

Each simulated worker also publishes its type's catalog entry when it starts, as a real
one does: without it the master would neither subscribe to the types' event topics nor
read their queue depths, and the event delay would only measure the ``workers`` frames.

    .venv/bin/python bench/big_fleet.py [--workers 1000] [--procs 4] [--seconds 60]
        [--profile master.prof]   # run the master under cProfile (slower; to find hot spots)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import PYTHON, ROOT, SMOKE_HELP, free_port, loadavg, pct, redis_server, spawn, stop

TYPES = [f"big-{i}" for i in range(10)]
TOKEN = "big-fleet-admin-token-0123456789"


#: ``python -c PROFILED <path> master ...``: ``fleet`` under cProfile. uvicorn re-raises
#: the SIGTERM it stopped on once it has shut down (which would kill the process before
#: ``-m cProfile`` writes anything), so the stats are written by a SIGTERM handler.
PROFILED = """
import cProfile, runpy, signal, sys
path = sys.argv[1]
sys.argv = ["fleet", *sys.argv[2:]]
prof = cProfile.Profile()
def dump(*_):
    prof.disable()
    prof.dump_stats(path)
    sys.exit(0)
signal.signal(signal.SIGTERM, dump)
prof.enable()
try:
    runpy.run_module("fleet", run_name="__main__")
finally:
    dump()
"""


def catalog_entry(automation_type: str) -> dict[str, object]:
    """A batch type's catalog entry, as a worker of a plugin without settings writes it."""
    schema = {"type": "object", "properties": {}, "title": "Payload"}
    return {
        "type": automation_type,
        "kind": "BatchAutomation",
        "config": {"type": "object", "properties": {}, "title": "BaseConfig"},
        "queue": {"name": automation_type, "payload": schema},
        "stream": None,
        "pools": {},
        "browser": None,
    }


async def simulate(url: str, first: int, count: int, heartbeat: float, seconds: float) -> None:
    """``count`` simulated workers (ids ``sim-<first>``...) in this process."""
    from fleet.backends import open_backend
    from fleet.protocol import worker_topic

    backend = await open_backend(url)
    hardware = {"host": "sim", "cpus": 2, "memory_bytes": 1 << 30, "python": "3.11"}
    deadline = time.monotonic() + seconds

    def fields(state: str) -> dict[str, str]:
        return {
            "state": state,
            "last_seen": f"{time.time():.3f}",
            "last_error": "",
            "applied_gen": "1",
            "slots": "4",
            "host": "sim",
            "pid": str(os.getpid()),
            "started_at": f"{time.time():.3f}",
            "version": "bench",
        }

    async def one(n: int) -> None:
        t = TYPES[n % len(TYPES)]
        wid = f"sim-{n}"
        await asyncio.sleep(random.random() * heartbeat)  # spread them out
        await backend.workers.register(t, wid, hardware)
        await backend.catalog.put(t, catalog_entry(t))
        await backend.workers.set_state(t, wid, fields("RUNNING"))
        await backend.events.publish(worker_topic(t), {"worker_id": wid, "state": "RUNNING"})
        next_beat = time.monotonic() + heartbeat
        while time.monotonic() < deadline:
            got = await backend.queues.reserve(t, k=1, visibility_seconds=30)
            if got:
                await backend.queues.ack(t, [(r.body.id, r.token) for r in got])
            if time.monotonic() >= next_beat:
                next_beat += heartbeat
                await backend.workers.register(t, wid, hardware)
                await backend.workers.set_state(t, wid, fields("RUNNING"))
                stats = {"ts": time.time(), "slots": [], "per_second": 0.0, "cpu_percent": 1.0}
                await backend.workers.put_stats(t, wid, stats)
            await asyncio.sleep(1.0)

    try:
        await asyncio.gather(*(one(n) for n in range(first, first + count)))
    finally:
        await backend.close()


async def feed(url: str, seconds: float, rate: float) -> None:
    from fleet.backends import open_backend
    from fleet.core.submission import make_push_request

    backend = await open_backend(url)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for t in TYPES:
                await backend.queues.push(t, [make_push_request({"n": 1})])
            await asyncio.sleep(len(TYPES) / rate)
    finally:
        await backend.close()


async def probe(base: str, path: str, seconds: float, every: float) -> list[float]:
    out: list[float] = []
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            r = await http.get(path)
            r.raise_for_status()
            out.append(time.perf_counter() - started)
            await asyncio.sleep(every)
    return out


async def event_delays(base: str, url: str, seconds: float) -> list[float]:
    """Change one worker's state every 2 s; how long until its frame arrives."""
    from fleet.backends import open_backend
    from fleet.protocol import worker_topic

    sent: dict[str, float] = {}
    delays: list[float] = []
    backend = await open_backend(url)
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def listen() -> None:
        async with (
            httpx.AsyncClient(base_url=base, headers=headers, timeout=None) as http,
            http.stream("GET", "/api/v1/events") as resp,
        ):
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                for key, at in list(sent.items()):
                    if key in line:
                        delays.append(time.monotonic() - at)
                        del sent[key]

    task = asyncio.create_task(listen())
    try:
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            await asyncio.sleep(2.0)
            n += 1
            marker = f"probe-state-{n}"
            sent[marker] = time.monotonic()
            await backend.workers.set_state(TYPES[0], "sim-0", {"last_error": marker})
            await backend.events.publish(
                worker_topic(TYPES[0]), {"worker_id": "sim-0", "state": marker}
            )
    finally:
        task.cancel()
        await backend.close()
    return delays


def line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name}: no sample"
    ms = [v * 1000 for v in values]
    return (
        f"  {name}: {len(ms)} samples, p50 {pct(ms, 50):.0f} ms, p99 {pct(ms, 99):.0f} ms, "
        f"max {max(ms):.0f} ms"
    )


async def redis_cpu(url: str) -> float:
    """Seconds of CPU the Redis server has used (user + system)."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    try:
        info = await client.info("cpu")
    finally:
        await client.aclose()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def drive(opts: argparse.Namespace, url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        "FLEET_ADMIN_TOKEN": TOKEN,
        "FLEET_HEARTBEAT_SECONDS": str(opts.heartbeat),
        "FLEET_LOG_LEVEL": "WARNING",
        "FLEET_ENTRY_POINTS": "0",
    }
    args = [PYTHON, "-m", "fleet", "master", "--port", str(port), "--backend", url]
    if opts.profile:
        args[1:3] = ["-c", PROFILED, opts.profile]
    master = spawn(args, env)
    sims = []
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        per = -(-opts.workers // opts.procs)
        run_for = opts.seconds + opts.heartbeat * 2
        for i in range(opts.procs):
            count = min(per, opts.workers - i * per)
            args = [PYTHON, __file__, "--simulate", url, str(i * per), str(count)]
            args += [str(opts.heartbeat), str(run_for)]
            sims.append(spawn(args))
        # Let every simulated worker register and beat once.
        await asyncio.sleep(opts.heartbeat * 1.5)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            r = await http.get("/api/v1/workers", headers={"Authorization": f"Bearer {TOKEN}"})
            up = sum(1 for w in r.json() if w.get("up"))
        proc = psutil.Process(master.pid)
        cpu0 = sum(proc.cpu_times()[:2])
        redis0 = await redis_cpu(url)
        started = time.monotonic()
        workers, automations, delays, _ = await asyncio.gather(
            probe(base, "/api/v1/workers", opts.seconds, 0.5),
            probe(base, "/api/v1/automations", opts.seconds, 0.5),
            event_delays(base, url, opts.seconds),
            feed(url, opts.seconds, rate=50.0),
        )
        elapsed = time.monotonic() - started
        cpu = (sum(proc.cpu_times()[:2]) - cpu0) / elapsed * 100
        redis_pct = (await redis_cpu(url) - redis0) / elapsed * 100
        rss = proc.memory_info().rss
        print(f"load average: {loadavg()}")
        print(
            f"{opts.workers} simulated workers in {opts.procs} processes, heartbeat "
            f"{opts.heartbeat:g} s, {len(TYPES)} types; {up} listed up by the master"
        )
        print(line("GET /api/v1/workers", workers))
        print(line("GET /api/v1/automations (the overview's load)", automations))
        print(line("event stream, state change -> frame", delays))
        print(f"  master: {cpu:.0f} % of one core, RSS {rss / 2**20:.0f} MiB")
        print(f"  redis: {redis_pct:.0f} % of one core")
    finally:
        for p in sims:
            stop(p)
        stop(master)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--simulate":
        url, first, count, heartbeat, seconds = sys.argv[2:7]
        sys.path.insert(0, str(ROOT))
        asyncio.run(simulate(url, int(first), int(count), float(heartbeat), float(seconds)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--url", default=None, help="a Redis URL (default: a private server)")
    parser.add_argument("--profile", default=None, help="run the master under cProfile, to PATH")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    opts = parser.parse_args()
    if opts.smoke:
        opts.workers, opts.procs, opts.seconds, opts.heartbeat = 20, 2, 4.0, 1.0
    with redis_server(opts.url) as url:
        asyncio.run(drive(opts, url))


if __name__ == "__main__":
    main()
