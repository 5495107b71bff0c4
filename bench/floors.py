"""What bounds the targets Fleet does not reach (issue 30): the floors, measured
beside Fleet's own figures in one run (a script, not a test).

* **One round trip**: ``redis-benchmark -c 1 -t ping`` (C, one request awaited at a
  time), Fleet's own RESP client sending ``PING`` one at a time, and
  ``ctx.submit`` one at a time (one round trip each). An awaited one-by-one
  enqueue cannot beat the first two, whatever it does on either side.
* **A Redis function call**: the Redis CPU of ``FCALL`` of a function that does
  nothing, with no key and with the 23 keys of a queue script, then of one push.
* **The bench job**: the worker CPU of the peer harness' job body, one
  ``INCR`` through redis.asyncio, from 1, 10 and 50 concurrent callers (as many
  slots), against Fleet's whole per-task CPU with a job that does nothing
  (``worker_noop.py``'s figure, printed by that script).

    .venv/bin/python bench/floors.py [--url redis://127.0.0.1:6390/0] [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, redis_cpu, redis_server

from fleet.backends import open_backend
from fleet.backends.redis.resp import RespClient, endpoint_from_url
from fleet.core import BaseConfig, Context, Queue

NOOP_LIBRARY = """#!lua name=fleet_bench_floor
redis.register_function('fleet_bench_noop', function(keys, args) return 1 end)
"""
#: As many keys as every queue script gets (``KeySpace.queue_keys``).
QUEUE_KEYS = 23


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _one_by_one(call: Callable[[], Awaitable[Any]], n: int) -> tuple[float, float]:
    """Calls per second and this process' CPU µs per call of ``n`` awaited calls."""
    for _ in range(min(500, n)):
        await call()
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(n):
        await call()
    return n / (time.perf_counter() - t0), (_cpu() - c0) / n * 1e6


async def _concurrent(call: Callable[[], Awaitable[Any]], n: int, callers: int) -> float:
    """This process' CPU µs per call of ``n`` calls made by ``callers`` tasks at once."""

    async def caller(k: int) -> None:
        for _ in range(k):
            await call()

    await asyncio.gather(*(caller(50) for _ in range(callers)))
    c0 = _cpu()
    await asyncio.gather(*(caller(n // callers) for _ in range(callers)))
    return (_cpu() - c0) / (n // callers * callers) * 1e6


def _redis_benchmark_ping(url: str, n: int) -> float | None:
    """``redis-benchmark -c 1 -t ping``: requests/s of a C client, one at a time."""
    exe = shutil.which("redis-benchmark")
    m = re.match(r"redis://([^:/]+):(\d+)", url)
    if exe is None or m is None:
        return None
    out = subprocess.run(
        [exe, "-h", m[1], "-p", m[2], "-c", "1", "-n", str(n), "-t", "ping", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rates = re.findall(r"PING_MBULK: ([\d.]+) requests per second", out.replace("\r", "\n"))
    return float(rates[-1]) if rates else None


#: Commands of this script's own, not of the push script (``_script_split``).
_OWN = {"info", "config|resetstat", "ping", "hello", "client|setname", "client|setinfo", "fcall"}


def _script_split(stats: dict[str, dict[str, Any]]) -> tuple[float, float]:
    """Total µs of ``FCALL`` and of every other command (those a script ran, on a
    server nobody else uses) in redis-py's parsed ``INFO commandstats``."""
    fcall = float(stats.get("cmdstat_fcall", {}).get("usec", 0))
    inside = sum(
        float(s["usec"]) for name, s in stats.items() if name[len("cmdstat_") :] not in _OWN
    )
    return fcall, inside


async def _fcall_cost(r: Any, keys: list[str], n: int) -> float:
    """Redis µs per ``FCALL`` of the no-op function (``INFO commandstats``)."""
    await r.config_resetstat()
    for _ in range(n):
        await r.fcall("fleet_bench_noop", len(keys), *keys, "1796517056.9539669", "[]")
    return float((await r.info("commandstats"))["cmdstat_fcall"]["usec_per_call"])


async def measure(url: str, calls: int) -> None:
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(url)  # the bench job's client, and this script's
    rows: list[tuple[str, str]] = []
    ping = _redis_benchmark_ping(url, calls)
    if ping is not None:
        rows.append(("redis-benchmark -c 1 -t ping (C, one at a time)", f"{ping:,.0f}/s"))
    client = RespClient(
        endpoint_from_url(url, connect_timeout=5.0, command_timeout=10.0, client_name="floors")
    )
    rate, cpu = await _one_by_one(lambda: client.execute("PING"), calls)
    await client.close()
    rows.append(("Fleet's RESP client, PING one at a time", f"{rate:,.0f}/s, {cpu:.1f} µs CPU"))

    backend = await open_backend(url)
    config = BaseConfig()
    ctx: Context[BaseConfig] = Context(backend=backend, automation_type="p", config=lambda: config)
    from noop_plugin import Noop  # bench/: the harness' payload

    queue = Queue("floor-noop", payload=Noop)
    await r.config_resetstat()
    r0 = await redis_cpu(r)
    rate, cpu = await _one_by_one(lambda: ctx.submit(queue, Noop(i=1)), calls)
    pushes = calls + min(500, calls)
    per_push = (await redis_cpu(r) - r0) / pushes * 1e6
    fcall, inside = _script_split(await r.info("commandstats"))
    await backend.close()
    rows.append(
        (
            "ctx.submit one at a time (one round trip each)",
            f"{rate:,.0f}/s, {cpu:.1f} µs CPU, Redis {per_push:.1f} µs",
        )
    )
    rows.append(
        (
            "the push script (Redis, commandstats)",
            f"FCALL {fcall / pushes:.1f} µs, of which its commands {inside / pushes:.1f} µs",
        )
    )

    await r.function_load(NOOP_LIBRARY, replace=True)
    try:
        bare = await _fcall_cost(r, [], calls)
        keyed = await _fcall_cost(
            r, [f"fleet:queue:floor-noop:k{i}" for i in range(QUEUE_KEYS)], calls
        )
    finally:
        await r.function_delete("fleet_bench_floor")
    rows.append(("FCALL of a no-op function, no key (Redis, commandstats)", f"{bare:.1f} µs"))
    rows.append((f"FCALL of a no-op function, {QUEUE_KEYS} keys", f"{keyed:.1f} µs"))

    def incr() -> Awaitable[Any]:
        return r.execute_command("INCR", "floor:done")

    try:
        rate, cpu = await _one_by_one(incr, calls)
        rows.append(
            ("the bench job: redis.asyncio INCR, 1 caller", f"{rate:,.0f}/s, {cpu:.1f} µs CPU")
        )
        for callers in (10, 50):
            cpu = await _concurrent(incr, calls, callers)
            rows.append(
                (f"the bench job: redis.asyncio INCR, {callers} callers", f"{cpu:.1f} µs CPU")
            )
    finally:
        await r.aclose()

    import redis as redis_py

    print(f"redis-py {redis_py.__version__}, {calls:,} calls a row, {url}")
    print("| floor | measured |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a Redis URL (default: a private redis-server)")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    calls = 200 if args.smoke else args.calls
    try:
        import uvloop

        runner: Callable[[Any], Any] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is in the bench venv
        runner = asyncio.run
    with redis_server(args.url) as url:
        runner(measure(url, calls))


if __name__ == "__main__":
    main()
