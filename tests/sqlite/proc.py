"""Child processes of the SQLite multi-process tests: ``python -m tests.sqlite.proc MODE ...``.

Modes (every one opens its own backend on the file it is given):

* ``drain URL TYPE OUT [VISIBILITY [WORK [HANG_AFTER]]]``: reserve batches and ack them until
  nothing is pending for a while; appends every executed ``id attempt`` to OUT
  before acking it. With ``--sweep`` it also sweeps, so tasks of dead workers
  come back, and runs until nothing is pending, scheduled or processing. With
  ``--go=PATH`` it first creates ``OUT.ready`` and waits until PATH exists, so a
  test can start several drains at the same moment.
* ``latency URL TYPE N``: N times, block in reserve and print how long after
  the push (payload ``t``) the task arrived.
* ``prims URL POOL OUT N``: claim pool items until none is left (logging each
  id to OUT), then add 1 to the counter ``hits`` N times.
* ``open URL``: open the backend (creating the schema if needed) and close it.
* ``listen URL TOPICS N``: subscribe to the comma-separated TOPICS, print
  ``ready``, then print N messages as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import TextIO

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.support.waits import until_sync


def _append(path: str) -> TextIO:
    return open(path, "a", encoding="utf-8")


def _wait_for_go(out: str, go: str) -> None:
    with open(f"{out}.ready", "w", encoding="utf-8"):
        pass
    until_sync(lambda: os.path.exists(go), timeout=300, interval=0.005, what=go)


async def _drain(backend: Backend, automation_type: str, out: str, *rest: str) -> None:
    sweep = "--sweep" in rest
    go = next((a.removeprefix("--go=") for a in rest if a.startswith("--go=")), None)
    if go is not None:
        await asyncio.to_thread(_wait_for_go, out, go)
    numbers = [float(a) for a in rest if not a.startswith("--")]
    visibility = numbers[0] if numbers else 30.0
    # Seconds of "work" per batch, between logging and acking it.
    work = numbers[1] if len(numbers) > 1 else 0.0
    # After logging this many executions, hold the current batch forever (un-acked),
    # so a test can SIGKILL a process that certainly holds reservations.
    hang_after = int(numbers[2]) if len(numbers) > 2 else 0
    logged = 0
    idle_since: float | None = None
    last_sweep = 0.0
    with _append(out) as log:
        while True:
            if sweep and time.monotonic() - last_sweep > 0.2:
                await backend.queues.sweep(automation_type)
                last_sweep = time.monotonic()
            got = await backend.queues.reserve(
                automation_type, k=20, visibility_seconds=visibility, timeout=0.2
            )
            if got:
                idle_since = None
                # They run now: marked started like a worker's slot does, so a kill
                # charges their attempt (unstarted ones would be refunded).
                await backend.queues.mark_started(
                    automation_type, [(r.body.id, r.token) for r in got]
                )
                log.write("".join(f"{r.body.id} {r.body.attempt}\n" for r in got))
                log.flush()
                logged += len(got)
                if hang_after and logged >= hang_after:
                    await asyncio.Event().wait()
                if work:
                    await asyncio.sleep(work)
                acked = await backend.queues.ack(
                    automation_type, [(r.body.id, r.token) for r in got]
                )
                assert all(acked), acked
                continue
            depths = await backend.queues.depths(automation_type)
            left = depths.pending + (depths.processing + depths.scheduled if sweep else 0)
            if left == 0:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 0.5:
                    return


async def _prims(backend: Backend, pool: str, out: str, n: str) -> None:
    with _append(out) as log:
        while (claim := await backend.pools.claim(pool, hold_seconds=60)) is not None:
            log.write(claim.item.id + "\n")
    for _ in range(int(n)):
        await backend.counters.incr("hits")


async def _latency(backend: Backend, automation_type: str, n: str) -> None:
    for _ in range(int(n)):
        print("waiting", flush=True)
        got = await backend.queues.reserve(automation_type, timeout=20.0)
        arrived = time.time()
        assert len(got) == 1, got
        await backend.queues.ack(automation_type, [(got[0].body.id, got[0].token)])
        print(f"latency {arrived - float(got[0].body.payload['t']):.6f}", flush=True)


async def _listen(backend: Backend, topics: str, n: str) -> None:
    async with await backend.events.subscribe(*topics.split(",")) as sub:
        print("ready", flush=True)
        seen = 0
        async for got_topic, message in sub:
            print(json.dumps([got_topic, message]), flush=True)
            seen += 1
            if seen >= int(n):
                return


async def main(argv: list[str]) -> None:
    mode, url, *args = argv
    backend = await open_backend(url)
    try:
        if mode == "drain":
            await _drain(backend, *args)
        elif mode == "open":
            pass
        elif mode == "prims":
            await _prims(backend, *args)
        elif mode == "latency":
            await _latency(backend, *args)
        elif mode == "listen":
            await _listen(backend, *args)
        else:
            raise SystemExit(f"unknown mode {mode}")
    finally:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
