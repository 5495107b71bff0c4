"""Schedules at scale: how many ticks the firer fires per second, what a day's
catch-up costs, and what the tick records cost in Redis.

Usage (from the repository root)::

    .venv/bin/python bench/schedules.py                    # 1,000 one-second schedules, 60 s
    .venv/bin/python bench/schedules.py --schedules 1000 --seconds 20 --backends redis
    .venv/bin/python bench/schedules.py --smoke

``fire``: N schedules of ``every_seconds=1`` on one type, one ``ScheduleFirer`` (the
one a master or worker runs) in this process for S seconds; reported: ticks enqueued
per second against the N per second asked, the misfires the firer logged, and on Redis
the bytes the ticks' idempotency keys hold at the end (what one schedule costs per
day follows: keys live max(300 s, 2 periods)).

``catch-up``: a ``* * * * * *`` cron whose next tick is a day old: the CPU of the
firer's plan for it (the catch-up run and the next tick).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time

import redis
from benchlib import SMOKE_HELP, redis_server

from fleet.backends import open_backend
from fleet.core.schedule import new_record, plan
from fleet.scheduler import ScheduleFirer

TYPE = "bench-ticks"


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1


async def fire(url: str, schedules: int, seconds: float) -> tuple[float, int, int]:
    """Ticks per second fired, scheduler log lines, and the tasks enqueued."""
    count = _Count()
    logging.getLogger("fleet.scheduler").addHandler(count)
    async with await open_backend(url) as b:
        await b.purge_type(TYPE)
        t0 = time.time()
        for i in range(schedules):
            definition = {"every_seconds": 1, "payload": {"i": i}}
            await b.schedules.put(new_record(TYPE, f"s{i}", definition, now=t0))
        firer = ScheduleFirer(b, "bench")
        start = time.time()
        firer.start()
        await asyncio.sleep(seconds)
        await firer.stop()
        elapsed = time.time() - start
        depths = await b.queues.depths(TYPE)
        enqueued = depths.high + depths.normal + depths.low
    logging.getLogger("fleet.scheduler").removeHandler(count)
    return enqueued / elapsed, count.lines, enqueued


def catch_up_cpu() -> float:
    definition = {"cron": "* * * * * *", "payload": {}, "misfire": "once"}
    record = new_record("t", "every-second", definition, now=1_700_000_000.0)
    t0 = time.process_time()
    step = plan(record, record.next_run + 86_400.5)
    assert step is not None and step.fire is not None
    return time.process_time() - t0


def tick_key_bytes(url: str) -> tuple[int, int]:
    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=f"*{TYPE}*idem*", count=1000))
    return len(keys), sum(int(r.memory_usage(k) or 0) for k in keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--backends", default="redis,sqlite")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.schedules, args.seconds = 20, 2.0
    print(f"catch-up of a day of '* * * * * *': {catch_up_cpu() * 1000:.2f} ms CPU")
    print(f"\n{args.schedules:,} schedules every 1 s, one firer, {args.seconds:g} s")
    print("| backend | ticks/s fired | asked/s | share | scheduler log lines | tick keys | bytes |")
    print("|---|---|---|---|---|---|---|")
    with redis_server(args.redis_url) as rurl, tempfile.TemporaryDirectory() as tmp:
        for kind in args.backends.split(","):
            url = rurl if kind == "redis" else f"sqlite:///{tmp}/ticks.db"
            rate, lines, _ = asyncio.run(fire(url, args.schedules, args.seconds))
            nkeys, nbytes = tick_key_bytes(url) if kind == "redis" else (0, 0)
            share = rate / args.schedules
            keys = f"{nkeys:,}" if kind == "redis" else "n/a"
            size = f"{nbytes:,}" if kind == "redis" else "n/a"
            print(
                f"| {kind} | {rate:,.0f} | {args.schedules:,} | {share:.0%} | {lines} | "
                f"{keys} | {size} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
