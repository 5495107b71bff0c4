"""Done means (issue 48): one real worker process runs three types with
``slots: "auto"`` against local sites.

* ``as-cpu`` blocks the event loop with CPU work: it stays at a few slots (loop lag
  and CPU name the limit: more slots buy it no throughput);
* ``as-io`` waits on a slow endpoint: it grows toward ``max_slots`` and drains far
  faster than at its minimum, measured beside it at fixed slots first;
* ``as-429`` grows while its site answers, and shrinks once the site answers 429.

Redis only: the same worker code runs on SQLite, and the test's run time (about
40 s) stays within the suite's budget. The numbers are printed (``-s``) for the
closing note.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, push_config, state_of, wait_until

pytestmark = pytest.mark.slow

PLUGIN = "tests.autoscale.plugin"
CPU, IO, T429 = "as-cpu", "as-io", "as-429"
WID = "auto-1"
IO_SECONDS = 0.3
#: Quick windows so the loop closes within the test's time.
FAST = {"interval_seconds": 0.5, "min_finished": 2}


class _Site(BaseHTTPRequestHandler):
    throttling = False
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(IO_SECONDS)
            status = 200
        else:
            time.sleep(0.1)
            status = 429 if _Site.throttling else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    server.daemon_threads = True
    server.request_queue_size = 256
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Site.throttling = False
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@dataclass
class Seen:
    """The slots each type's stats frames reported, in order."""

    slots: dict[str, list[int]] = field(default_factory=dict)
    limits: dict[str, list[str]] = field(default_factory=dict)


async def autoslots(backend: Backend, t: str) -> dict[str, Any] | None:
    (record,) = await backend.workers.get_many([(t, WID)])
    stats = record.stats if record is not None else None
    got = (stats or {}).get("autoslots")
    return got if isinstance(got, dict) else None


async def watch(backend: Backend, seen: Seen, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for t in (CPU, IO, T429):
            got = await autoslots(backend, t)
            if got is not None:
                seen.slots.setdefault(t, []).append(int(got["slots"]))
                seen.limits.setdefault(t, []).append(str(got["limit"]))
        await asyncio.sleep(0.3)


async def drained(backend: Backend, t: str) -> bool:
    d = await backend.queues.depths(t)
    return d.pending + d.processing == 0


async def drain_time(backend: Backend, t: str, payloads: list[dict[str, Any]]) -> float:
    started = time.monotonic()
    await push(backend, t, *payloads)
    await wait_until(lambda: drained(backend, t), timeout=60, interval=0.05, what=f"{t} drained")
    return time.monotonic() - started


async def test_slots_size_themselves(redis_url: str, site: str, tmp_path: Path) -> None:
    backend = await open_backend(redis_url)
    cpu_cfg = {"slots": "auto", "min_slots": 1, "max_slots": 16, "auto_slots": FAST}
    await push_config(backend, CPU, cpu_cfg, [WID])
    await push_config(backend, IO, {"slots": 2}, [WID])  # its minimum, fixed: the baseline
    t429_cfg = {"slots": "auto", "min_slots": 1, "max_slots": 16, "auto_slots": FAST}
    await push_config(backend, T429, {**t429_cfg, "auto_slots": {**FAST, "increase": 2}}, [WID])
    more = ["--type", IO, "--type", T429]
    w = WorkerProcess(redis_url, PLUGIN, CPU, WID, tmp_path, more_args=more, grace=2)
    seen, stop = Seen(), asyncio.Event()
    watcher: asyncio.Task[None] | None = None
    try:

        async def running() -> bool:
            assert w.proc.poll() is None, w.log()
            states = [await state_of(backend, t, WID) for t in (CPU, IO, T429)]
            return all(s.get("state") == "RUNNING" for s in states)

        await wait_until(running, timeout=30, what="three types RUNNING")
        watcher = asyncio.create_task(watch(backend, seen, stop))
        # CPU work for longer than the test: the loop is busy all along.
        await push(backend, CPU, *[{"burn": 0.02} for _ in range(4000)])
        await push(backend, T429, *[{"url": f"{site}/ok/{i}"} for i in range(4000)])

        # The I/O type at its minimum (2 fixed slots), beside the CPU work.
        slow = [{"url": f"{site}/slow/{i}"} for i in range(20)]
        at_min = await drain_time(backend, IO, slow)
        min_rate = len(slow) / at_min

        # Then sizing itself.
        io_cfg = {"slots": "auto", "min_slots": 2, "max_slots": 32}
        await push_config(backend, IO, {**io_cfg, "auto_slots": {**FAST, "increase": 3}}, [WID])
        many = [{"url": f"{site}/slow/{i}"} for i in range(400)]
        at_auto = await drain_time(backend, IO, many)
        auto_rate = len(many) / at_auto

        # The throttling site: it grew meanwhile; now it answers 429.
        before_429 = seen.slots[T429][-1]
        top_429 = max(seen.slots[T429])
        _Site.throttling = True
        turned = time.monotonic()

        async def shrunk() -> bool:
            return seen.slots[T429][-1] <= 2

        await wait_until(shrunk, timeout=15, interval=0.1, what="as-429 down to 2 slots")
        shrink_seconds = time.monotonic() - turned
        after_429 = seen.slots[T429][-1]
    finally:
        stop.set()
        if watcher is not None:
            await watcher
        w.close()
        await backend.close()

    cpu_slots, io_slots = seen.slots[CPU], seen.slots[IO]
    cpu_limits = {x for x in seen.limits[CPU] if x not in ("growing", "warming", "idle")}
    print(
        f"\nas-cpu slots: median {statistics.median(cpu_slots)}, max {max(cpu_slots)}, "
        f"limits {sorted(cpu_limits)}"
        f"\nas-io: {min_rate:.1f} tasks/s at 2 fixed slots, {auto_rate:.1f} tasks/s auto "
        f"(max {max(io_slots)} slots of 32; {len(many)} tasks in {at_auto:.1f}s)"
        f"\nas-429: {before_429} slots when the site turned to 429 (top {top_429}), "
        f"{after_429} {shrink_seconds:.1f}s later; slots seen {seen.slots[T429]}"
    )
    assert statistics.median(cpu_slots) <= 4 and max(cpu_slots) <= 8, cpu_slots
    assert cpu_limits & {"loop_lag", "cpu", "efficiency"}, seen.limits[CPU]
    assert max(io_slots) >= 16, io_slots  # half way to max_slots at least
    assert auto_rate >= 3 * min_rate, (min_rate, auto_rate)
    assert top_429 >= 4, seen.slots[T429]
    assert after_429 <= 2 and after_429 < before_429, seen.slots[T429]
    assert "throttled" in seen.limits[T429]
