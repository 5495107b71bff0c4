"""REST submit throughput against ONE ``fleet master`` process (a script, not a test).

Starts a private redis-server (or uses ``--url``) and ``fleet master`` on a free
port with the bench's ``noop`` type loaded as a plugin, then posts with a minimal
keep-alive HTTP/1.1 client (see RawClient) and ``--concurrency`` requests in flight:

* single: ``POST /api/v1/automations/noop/tasks``, one task per request;
* batch: ``POST /api/v1/automations/noop/tasks/batch`` with ``--batch`` tasks each.

Every request is checked (202, and every task queued). Prints req/s and tasks/s,
with the master's CPU per request. Usage::

    .venv/bin/python bench/rest_submit.py [--requests 3000] [--concurrency 16] [--batch 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import PYTHON, SMOKE_HELP, free_port, loadavg, pct, redis_server, spawn, stop

TOKEN = "bench-admin-token-0123456789abcdef"
TYPE = "noop"


async def wait_ready(client: httpx.AsyncClient, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            r = await client.get("/readyz")
            if r.status_code == 200:
                r = await client.get(f"/api/v1/catalog/{TYPE}")
                if r.status_code == 200:
                    return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the master did not become ready")


class RawClient:
    """A minimal HTTP/1.1 keep-alive client (one connection, one request at a
    time). httpx costs ~3 ms of CPU per request on this machine, more than the
    master itself, so the client would measure itself; this one costs ~0.1 ms."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: object) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        self.writer.write(head + data)
        status_line = await self.reader.readuntil(b"\r\n")
        length = 0
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def run_phase(
    port: int,
    path: str,
    make_body: Callable[[int], object],
    requests: int,
    concurrency: int,
    per_request: int,
) -> tuple[float, list[float]]:
    """Post ``requests`` bodies over ``concurrency`` connections; (seconds, latencies)."""
    counter = iter(range(requests))
    latencies: list[float] = []

    async def one_client() -> None:
        client = RawClient(port)
        try:
            for i in counter:
                body = make_body(i)
                t0 = time.perf_counter()
                status, raw = await client.post(path, body)
                latencies.append(time.perf_counter() - t0)
                if status != 202:
                    raise RuntimeError(f"{path}: {status} {raw[:200]!r}")
                data = json.loads(raw)
                results = data["results"] if "results" in data else [data]
                if len(results) != per_request or not all(x.get("queued") for x in results):
                    raise RuntimeError(f"{path}: not every task was queued: {raw[:200]!r}")
        finally:
            client.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    return time.perf_counter() - t0, latencies


async def main(args: argparse.Namespace) -> None:
    with redis_server(args.url) as url:
        port = free_port()
        master = spawn(
            [
                PYTHON,
                "-m",
                "fleet",
                "--log-level",
                "WARNING",
                "master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--backend",
                url,
                "--plugin",
                "noop_plugin",
                "--no-sweeper",
            ],
            env={"FLEET_ADMIN_TOKEN": TOKEN, "REDIS_URL": url},
            log="/tmp/fleet-bench-master.log",
        )
        proc = psutil.Process(master.pid)
        limits = httpx.Limits(
            max_connections=args.concurrency, max_keepalive_connections=args.concurrency
        )
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {TOKEN}"},
                limits=limits,
                timeout=60,
            ) as client:
                await wait_ready(client, time.monotonic() + 60)
                # warm up: imports, connections, the catalog cache
                await run_phase(
                    port,
                    f"/api/v1/automations/{TYPE}/tasks",
                    lambda i: {"payload": {"i": i}},
                    200,
                    4,
                    1,
                )
                print(f"load average at start: {loadavg()}")
                phases = [
                    (
                        "single",
                        f"/api/v1/automations/{TYPE}/tasks",
                        lambda i: {"payload": {"i": i}},
                        args.requests,
                        1,
                    ),
                    (
                        f"batch of {args.batch}",
                        f"/api/v1/automations/{TYPE}/tasks/batch",
                        lambda i: {
                            "tasks": [
                                {"payload": {"i": i * args.batch + j}} for j in range(args.batch)
                            ]
                        },
                        args.batch_requests,
                        args.batch,
                    ),
                ]
                for label, path, make, n, per in phases:
                    cpu0 = sum(proc.cpu_times()[:2])
                    mine0 = time.process_time()
                    secs, lat = await run_phase(port, path, make, n, args.concurrency, per)
                    cpu = sum(proc.cpu_times()[:2]) - cpu0
                    mine = time.process_time() - mine0
                    ms = 1000 / n
                    print(
                        f"REST submit {label}: {n / secs:,.0f} req/s, "
                        f"{n * per / secs:,.0f} tasks/s ({n} requests, {args.concurrency} in "
                        f"flight; latency p50 {pct(lat, 50) * 1000:.1f} ms, "
                        f"p99 {pct(lat, 99) * 1000:.1f} ms; master CPU {cpu * ms:.2f} ms/request, "
                        f"{cpu * ms / per:.3f} ms/task; client CPU {mine * ms:.2f} ms/request)"
                    )
                print(f"load average at end: {loadavg()}")
        finally:
            stop(master)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None, help="use this Redis instead of a private one")
    parser.add_argument("--requests", type=int, default=3000, help="single-task requests")
    parser.add_argument("--batch", type=int, default=1000, help="tasks per batch request")
    parser.add_argument("--batch-requests", type=int, default=30, help="batch requests")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.batch, args.batch_requests, args.concurrency = 40, 10, 4, 4
    asyncio.run(main(args))
