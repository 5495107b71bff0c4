"""Crawls: Redis bytes per URL at ``--urls`` URLs (the run's unique-key filter, and
what a recrawl keeps), and a worker's memory over as many pages' URL work.

Usage (from the repository root)::

    .venv/bin/python bench/crawl_bytes.py                  # 1,000,000 URLs, ~5 minutes
    .venv/bin/python bench/crawl_bytes.py --urls 100000 --links 20
    .venv/bin/python bench/crawl_bytes.py --url redis://127.0.0.1:6390/0   # that Redis (flushed!)

Through the real paths, without fetching a page:

1. **The filter.** ``--urls`` distinct raw URLs (50 hosts, upper-case host names,
   unsorted queries, fragments), each put through ``canonical()``, are pushed into one
   run with ``queues.push`` (batches of 1,000, ``run=<id>``, ``unique_key=<canonical
   URL>``, each in its host's group), as a crawl's pages submit their links. Reported:
   ``MEMORY USAGE`` of the filter's levels (``fleet:run:<id>:keys:<n>``) per URL, and
   ``used_memory`` after minus before once the pushed tasks are purged; the false
   positives (distinct URLs the filter took for duplicates).
2. **Recrawl.** For the same URLs, what a worker does per page besides the fetch:
   ``canonical()``, the crawl's ``Scope.verdict`` (its hosts, two ``exclude`` patterns)
   and ``Recrawl.keep`` (``fleet.crawl.recrawl``) with an ``ETag`` (a quoted MD5), a
   ``Last-Modified`` and ``--links`` canonical links of about 60 characters on the
   page's host, 200 keeps in flight (the slots of a busy worker). Reported: Redis'
   ``used_memory`` after minus before per URL, ``MEMORY USAGE`` of 1,000 records, where
   a record's bytes go, and this process' RSS from start to end (it stays flat, or
   the worker leaks).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SMOKE_HELP, loadavg, redis_server

from fleet.backends import open_backend
from fleet.backends.redis.keys import KeySpace
from fleet.core.handles import KV
from fleet.core.submission import make_push_request
from fleet.crawl import CrawlConfig
from fleet.crawl.recrawl import NAMESPACE, Recrawl, key_of, pack
from fleet.crawl.scope import Scope
from fleet.crawl.urls import canonical, host_of

TYPE = "bench-crawler"
HOSTS = [f"www.shop-{h}.example.com" for h in range(50)]
WORDS = (
    "shoes boots sandals jackets coats shirts dresses skirts bags belts hats scarves "
    "gloves socks watches rings lamps chairs tables sofas rugs mugs plates knives"
).split()
#: The crawl's scope: its hosts, and two patterns crawlers commonly exclude.
SCOPE = Scope(hosts=frozenset(f"{h}:443" for h in HOSTS), exclude=(r"/cart/", r"[?&]sessionid="))
LAST_MODIFIED = "Mon, 07 Dec 2026 10:00:00 GMT"
BATCH = 1000
IN_FLIGHT = 200


def raw_url(i: int) -> str:
    """Page ``i``'s URL as a link writes it: canonical() has work to do (host case,
    query order, fragment)."""
    host = HOSTS[i % len(HOSTS)].upper()
    a, b = WORDS[i % len(WORDS)], WORDS[(i // len(WORDS)) % len(WORDS)]
    return f"https://{host}/{a}/{b}-{i}.html?page={i % 7}&color=red#top"


def links_of(i: int, n: int) -> list[str]:
    """The ``n`` canonical links of page ``i`` (~60 characters each, its host's)."""
    rnd = random.Random(i)
    host = HOSTS[i % len(HOSTS)]
    out = []
    for _ in range(n):
        a, b = rnd.choice(WORDS), rnd.choice(WORDS)
        out.append(f"https://{host}/c/{a}/{b}-{rnd.randrange(10**6):06d}.html")
    return out


def etag_of(i: int) -> str:
    return '"' + hashlib.md5(str(i).encode()).hexdigest() + '"'


def batches(n: int) -> Iterator[range]:
    for start in range(0, n, BATCH):
        yield range(start, min(n, start + BATCH))


async def used_memory(r: aioredis.Redis) -> int:
    """``used_memory`` once Redis has freed what was unlinked (``lazyfree``)."""
    for _ in range(600):
        info = await r.info("memory")
        if not int(info.get("lazyfree_pending_objects", 0)):
            return int(info["used_memory"])
        await asyncio.sleep(0.05)
    raise SystemExit("Redis did not free the unlinked keys within 30 s")


async def the_filter(url: str, r: aioredis.Redis, n: int) -> float:
    """Push ``n`` tasks' unique keys into one run; the filter's bytes per URL."""
    keys = KeySpace()
    backend = await open_backend(url)
    try:
        # The scripts loaded (a push into a run with a unique key) and the connections
        # open before the first reading; that run's keys dropped.
        warm = await backend.runs.create(name="warm-up")
        await backend.queues.push(
            TYPE, [make_push_request({}, group="warm", run=warm, unique_key="warm")]
        )
        await backend.purge_type(TYPE)
        await r.delete(*[k async for k in r.scan_iter(match=f"{keys.run(warm)}*")])
        await r.zrem(keys.RUN_INDEX, warm)
        before = await used_memory(r)
        run_id = await backend.runs.create(name="crawl-bytes")
        queued = duplicates = 0
        started = time.perf_counter()
        for rng in batches(n):
            requests = []
            for i in rng:
                c = canonical(raw_url(i))
                requests.append(make_push_request({}, group=host_of(c), run=run_id, unique_key=c))
            for res in await backend.queues.push(TYPE, requests):
                queued += res.queued
                duplicates += res.duplicate
        took = time.perf_counter() - started
        levels = int(await r.hget(keys.run(run_id), "kl") or 0)
        usage = 0
        for level in range(levels):
            usage += int(await r.memory_usage(f"{keys.run(run_id)}:keys:{level}") or 0)
        # The run's live set names each queued task until it ends (a crawl's pages
        # leave it as they are fetched): measured, then dropped with the tasks.
        live_key = f"{keys.run(run_id)}:live"
        live = int(await r.memory_usage(live_key) or 0)
        await backend.purge_type(TYPE)  # the pushed tasks: only the filter stays
        await r.delete(live_key)
        after = await used_memory(r)
    finally:
        await backend.close()
    print(f"1. the run's unique-key filter, {n:,} URLs pushed into one run ({took:.0f} s):")
    print(f"   queued {queued:,}, taken for duplicates (false positives) {duplicates:,}")
    print(f"   MEMORY USAGE of its {levels} levels: {usage:,} B = {usage / n:.2f} B/URL")
    print(
        f"   used_memory after - before (tasks purged): {after - before:,} B = "
        f"{(after - before) / n:.2f} B/URL"
    )
    print(
        f"   while the tasks were queued, the run's live set: {live:,} B = "
        f"{live / n:.1f} B/task (each leaves it when its task ends)"
    )
    return usage / n


async def the_recrawl(url: str, r: aioredis.Redis, n: int, links: int) -> float:
    """``n`` pages' canonical() + scope + Recrawl.keep; Redis bytes per URL."""
    keys = KeySpace()
    namespace = f"{NAMESPACE}:{TYPE}"
    backend = await open_backend(url)
    me = psutil.Process()
    try:
        recrawl = Recrawl(KV(backend.kv, namespace), CrawlConfig().recrawl_ttl_seconds)
        before = await used_memory(r)
        rss = [(0, me.memory_info().rss)]
        marks = {max(1, n // 100), *(n * k // 10 for k in range(1, 11))}
        started = time.perf_counter()
        for rng in batches(n):
            calls = []
            for i in rng:
                c = canonical(raw_url(i))
                if SCOPE.verdict(c, 3, page_host=host_of(c)) != "follow":
                    raise SystemExit(f"{c}: out of the crawl's scope")
                calls.append(recrawl.keep(c, etag_of(i), LAST_MODIFIED, links_of(i, links)))
            for at in range(0, len(calls), IN_FLIGHT):
                await asyncio.gather(*calls[at : at + IN_FLIGHT])
            if any(rng.start < m <= rng.stop for m in marks):
                rss.append((rng.stop, me.memory_info().rss))
        took = time.perf_counter() - started
        after = await used_memory(r)
        sample = random.Random(7).sample(range(n), min(n, 1000))
        usages = [
            int(await r.memory_usage(keys.kv(namespace, key_of(canonical(raw_url(i))))) or 0)
            for i in sample
        ]
        values = [
            int(await r.strlen(keys.kv(namespace, key_of(canonical(raw_url(i)))))) for i in sample
        ]
        ttl = await r.pttl(keys.kv(namespace, key_of(canonical(raw_url(0)))))
    finally:
        await backend.close()
    per_url = (after - before) / n
    usage = statistics.mean(usages)
    value = statistics.mean(values)
    name = len(keys.kv(namespace, key_of(canonical(raw_url(0)))))
    raw_links = statistics.mean(len("\n".join(links_of(i, links))) for i in sample[:200])
    packed = statistics.mean(len(pack(links_of(i, links))) for i in sample[:200])
    zbytes = statistics.mean(
        len(zlib.compress("\n".join(links_of(i, links)).encode(), 6)) for i in sample[:200]
    )
    paths = statistics.mean(
        len(zlib.compress("\n".join(u[u.index("/", 8) :] for u in links_of(i, links)).encode(), 6))
        for i in sample[:200]
    )
    print(
        f"2. recrawl, {n:,} pages kept ({links} links each, ETag + Last-Modified, TTL "
        f"{ttl / 86400000:.0f} days), {n / took:,.0f} pages/s of canonical() + scope + keep:"
    )
    print(f"   used_memory after - before: {after - before:,} B = {per_url:,.1f} B/URL")
    print(f"   MEMORY USAGE of {len(usages):,} records: mean {usage:,.1f} B")
    print(
        f"   a record: key name {name} B, value {value:,.0f} B (JSON: ETag "
        f"{len(etag_of(0))} B, Last-Modified {len(LAST_MODIFIED)} B, links {raw_links:,.0f} B "
        f"of text -> zlib {zbytes:,.0f} B -> base64 {packed:,.0f} B), Redis' objects and "
        f"allocator rounding {usage - name - value:,.0f} B; outside MEMORY USAGE (the TTL's "
        f"entry, the keyspace's tables) {per_url - usage:,.0f} B"
    )
    print(
        f"   the same links as zlib'd paths without base64 would be {paths:,.0f} B "
        f"({packed / paths:.1f}x less than now)"
    )
    print(f"3. this process (a worker's per-page URL work), RSS over {n:,} pages:")
    print("| pages done | RSS MB |")
    print("|---|---|")
    for at, value_rss in rss:
        print(f"| {at:,} | {value_rss / 2**20:,.1f} |")
    warm = rss[1][1]
    print(
        f"   after the first {rss[1][0]:,} pages -> the end: "
        f"{(rss[-1][1] - warm) / 2**20:+.1f} MB ({(rss[-1][1] - warm) / n:+.2f} B/page)"
    )
    return per_url


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    with redis_server(args.url) as url:
        r = aioredis.from_url(url, decode_responses=True)
        try:
            await r.flushdb()
            version = (await r.info("server"))["redis_version"]
            print(f"redis-server {version}, {args.urls:,} URLs")
            filter_bytes = await the_filter(url, r, args.urls)
            recrawl_bytes = await the_recrawl(url, r, args.urls, args.links)
        finally:
            await r.aclose()
    total = filter_bytes + recrawl_bytes
    print()
    print("| per URL, Redis | bytes | share |")
    print("|---|---|---|")
    print(f"| the run's unique-key filter | {filter_bytes:,.1f} | {filter_bytes / total:.1%} |")
    print(
        f"| recrawl record ({args.links} links) | {recrawl_bytes:,.1f} | "
        f"{recrawl_bytes / total:.1%} |"
    )
    print(f"| total | {total:,.1f} | |")
    if recrawl_bytes > 10 * filter_bytes:
        print(
            f"\nrecrawl costs {recrawl_bytes / filter_bytes:,.0f}x the filter: "
            f"{recrawl_bytes * 1e6 / 2**30:,.2f} GiB of Redis per million pages kept"
        )
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--links", type=int, default=20, help="links kept per page")
    parser.add_argument("--url", default=None, help="use this Redis (it is flushed!)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    ns = parser.parse_args()
    if ns.smoke:
        ns.urls = 2000
    asyncio.run(main(ns))
