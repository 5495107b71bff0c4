"""What a config PATCH costs with 1, 100 and 1,000 registered workers.

Usage (from the repository root)::

    .venv/bin/python bench/config_patch.py                 # 1, 100, 1000 workers, 20 PATCHes each
    .venv/bin/python bench/config_patch.py --workers 1,10 --patches 5
    .venv/bin/python bench/config_patch.py --smoke

A master (``create_app``, in this process, over ASGI: no HTTP client in the figure)
on a private redis-server; N workers of the bench type registered the way a worker
registers (``worker_register`` and a first desired config); then ``--patches`` type-wide
``PATCH /api/v1/automations/{type}/config`` calls, one at a time. Reported per PATCH:
latency p50/p99 and the Redis commands it took (``INFO stats``
``total_commands_processed``, the Lua scripts' own commands not counted: a script call
is one), so the cost's growth with N shows directly.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import redis
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, pct, redis_server

from fleet.backends import open_backend
from fleet.core import BaseConfig, BatchAutomation, register
from fleet.core.catalog import catalog_entry
from fleet.master import create_app
from fleet.settings import Settings

TYPE = "bench-config"
TOKEN = "bench-admin-token-0123456789abcdef"


class BenchConfig(BaseConfig):
    depth: int = 1


class Nothing(BaseModel):
    pass


@register(TYPE)
class BenchConfigured(BatchAutomation[BenchConfig]):
    Config = BenchConfig
    TaskPayload = Nothing

    async def run_one(self, task: object, ctx: object) -> None:  # pragma: no cover
        return None


def commands(url: str) -> int:
    return int(redis.Redis.from_url(url).info("stats")["total_commands_processed"])


async def one_size(url: str, workers: int, patches: int) -> tuple[float, float, float]:
    """p50 and p99 latency (ms) and Redis commands per PATCH with ``workers`` workers."""
    async with await open_backend(url) as b:
        await b.purge_type(TYPE)
        for wid in list(await b.workers.ids(TYPE)):
            await b.workers.forget(TYPE, wid)
        await b.catalog.put(TYPE, catalog_entry(BenchConfigured))
        for i in range(workers):
            wid = f"w{i}"
            await b.workers.register(TYPE, wid, {})
            await b.configs.put_desired(TYPE, wid, {}, await b.configs.next_generation(TYPE))
    settings = Settings(backend_url=url, admin_token=TOKEN)
    app = create_app(settings, plugins=False, sweeper=False)
    lat: list[float] = []
    used: list[int] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://m", headers=headers
        ) as c:
            path = f"/api/v1/automations/{TYPE}/config"
            for n in range(patches):
                before = commands(url)
                t0 = time.perf_counter()
                r = await c.patch(path, json={"depth": n + 2})
                lat.append((time.perf_counter() - t0) * 1000)
                used.append(commands(url) - before - 1)  # the INFO call itself
                assert r.status_code == 200, r.text
                assert len(r.json()["workers"]) == workers
    return pct(lat, 50), pct(lat, 99), sum(used) / len(used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,100,1000")
    parser.add_argument("--patches", type=int, default=20)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    sizes = [int(x) for x in args.workers.split(",")]
    if args.smoke:
        sizes, args.patches = [1, 3], 2
    print(f"type-wide PATCH, {args.patches} per size, master in-process over ASGI, Redis")
    print("| workers | p50 ms | p99 ms | Redis commands per PATCH |")
    print("|---|---|---|---|")
    with redis_server(args.redis_url) as url:
        for n in sizes:
            p50, p99, cmds = asyncio.run(one_size(url, n, args.patches))
            print(f"| {n:,} | {p50:.1f} | {p99:.1f} | {cmds:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
