"""What ``ctx.http()`` costs a request, against a plain ``httpx.AsyncClient`` (a script,
not a test).

A local HTTP server answers a 20 KB HTML page; one client sends N requests one after
the other, in rounds, through:

- ``httpx``: a plain ``httpx.AsyncClient`` (what a task used before blocks);
- ``ctx.http()``: Fleet's client: every response classified, its verdict counted for
  the domain (summed in the process, sent once a second);
- ``ctx.http(), 3 tiers``: the same with ``proxy_tiers`` (all direct here, so the exit
  is the same): each request also asks the domain's tier (read at most every 2 s);
- ``classify=False``: Fleet's client without the classifier.

The backend is a SQLite file (the counts' writes land there). Printed: the median µs
per request of each, and the difference to plain httpx.

    .venv/bin/python bench/http_client.py [--requests 500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg

from fleet.backends import open_backend
from fleet.core import BaseConfig, Context

PAGE = (
    b"<!doctype html><html><head><title>A product</title></head><body>"
    + b"<p>Plain words about a product, its price and its reviews.</p>\n" * 330
    + b"</body></html>"
)


class Page(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a header and a body write, no 40 ms ACK wait

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def timed(client: httpx.AsyncClient, url: str, n: int) -> float:
    """µs per request of ``n`` requests in a row."""
    start = time.perf_counter()
    for _ in range(n):
        (await client.get(url)).raise_for_status()
    return (time.perf_counter() - start) / n * 1e6


async def main(requests: int, rounds: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/p"
    tiers = BaseConfig(proxy_tiers=[{"name": n, "direct": True} for n in ("direct", "dc", "resi")])
    plain_config = BaseConfig()
    with tempfile.TemporaryDirectory() as tmp:
        backend = await open_backend(f"sqlite:///{tmp}/fleet.db")
        ctxs: dict[str, Context[Any]] = {
            name: Context(backend=backend, automation_type=f"bench-{i}", config=lambda c=c: c)
            for i, (name, c) in enumerate((("plain", plain_config), ("tiers", tiers)))
        }
        makers = {
            "httpx": lambda: httpx.AsyncClient(),
            "ctx.http()": lambda: ctxs["plain"].http(),
            "ctx.http(), 3 tiers": lambda: ctxs["tiers"].http(),
            "ctx.http(classify=False)": lambda: ctxs["plain"].http(classify=False),
        }
        results: dict[str, list[float]] = {name: [] for name in makers}
        for _ in range(rounds):
            for name, make in makers.items():
                async with make() as client:
                    await timed(client, url, 10)  # the connection made
                    results[name].append(await timed(client, url, requests))
        for ctx in ctxs.values():
            await ctx.access.close()
        await backend.close()
    server.shutdown()
    base = statistics.median(results["httpx"])
    print(f"load average: {loadavg()}; {requests} requests x {rounds} rounds, a 20 KB page")
    print("| client | µs per request | vs httpx |")
    print("|---|---|---|")
    for name, got in results.items():
        med = statistics.median(got)
        print(f"| {name} | {med:.0f} | {med - base:+.0f} µs |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.rounds = 20, 1
    asyncio.run(main(args.requests, args.rounds))
