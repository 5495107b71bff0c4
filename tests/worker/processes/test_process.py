"""Real worker processes (``python -m fleet worker``) on SQLite and Redis."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.worker.procs import WorkerProcess
from tests.worker.support import push, push_config, state_of, wait_until

E = "wt-echo"
ECHO = "tests.plugins_fixture.echo"


pytestmark = pytest.mark.slow


def start(
    workers: list[WorkerProcess], url: str, tmp_path: Path, wid: str, **kw: object
) -> WorkerProcess:
    plugin = str(kw.pop("plugin", ECHO))
    t = str(kw.pop("automation_type", E))
    w = WorkerProcess(url, plugin, t, wid, tmp_path, **kw)  # type: ignore[arg-type]
    workers.append(w)
    return w


async def running(backend: Backend, t: str, wid: str, w: WorkerProcess) -> None:
    async def up() -> bool:
        assert w.proc.poll() is None, w.log()
        return (await state_of(backend, t, wid)).get("state") == "RUNNING"

    await wait_until(up, timeout=30, what=f"{wid} RUNNING")


async def runs(backend: Backend, task_id: str) -> int:
    return await backend.counters.get(f"wt-echo:runs:{task_id}")


async def state(backend: Backend, task_id: str, t: str = E) -> str:
    return (await backend.queues.state(t, task_id)).state


# ---------------------------------------------------------------- the spec's scraper
class _Site(BaseHTTPRequestHandler):
    keys: list[str | None] = []

    def do_GET(self) -> None:
        _Site.keys.append(self.headers.get("X-Api-Key"))
        if self.path.startswith("/missing"):
            self.send_error(404)
            return
        body = f"<html>{self.path}</html>".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Site.keys = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_scraper_skeleton_against_a_local_site(
    backend: Backend, url: str, site: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    t = "scraper"
    w = start(
        workers, url, tmp_path, "s1", plugin="tests.plugins_fixture.scraper", automation_type=t
    )

    async def error_state() -> bool:
        s = await state_of(backend, t, "s1")
        return s.get("state") == "ERROR"

    await wait_until(error_state, timeout=30, what="ERROR without api_key")
    assert (await state_of(backend, t, "s1"))["last_error"] == (
        "missing required config field(s): api_key"
    )
    await push_config(backend, t, {"api_key": "secret-1", "slots": 2, "max_attempts": 2}, ["s1"])
    await running(backend, t, "s1", w)

    async def two_slots() -> bool:
        return (await state_of(backend, t, "s1")).get("slots") == "2"

    await wait_until(two_slots, timeout=30, what="2 slots after the config push")
    ok = await push(backend, t, *[{"url": f"{site}/page/{i}"} for i in range(3)])
    (bad,) = await push(backend, t, {"url": f"{site}/missing"})
    for tid in ok:
        await wait_until(lambda tid=tid: _is(backend, t, tid, "done"), timeout=30, what="done")
    await wait_until(lambda: _is(backend, t, bad, "dead"), timeout=30, what="404 dead")
    entries = sorted((e.payload for e in await backend.streams.peek(t, 10)), key=lambda p: p["url"])
    assert entries == [
        {"url": f"{site}/page/{i}", "status": 200, "body_len": len(f"<html>/page/{i}</html>")}
        for i in range(3)
    ]
    assert set(_Site.keys) == {"secret-1"}
    (dead,) = await backend.queues.dead_peek(t)
    assert dead.attempt == 2 and "404" in (dead.last_error or "")


async def _is(backend: Backend, t: str, task_id: str, want: str) -> bool:
    return await state(backend, task_id, t) == want


# ---------------------------------------------------------------- shutdown
async def test_sigterm_drains_without_losing_a_task(
    backend: Backend, url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    await backend.configs.set(E, {"slots": 2})
    w = start(workers, url, tmp_path, "d1", grace=1.5)
    await running(backend, E, "d1", w)
    short, long_ = await push(backend, E, {"n": 1, "sleep": 0.8}, {"n": 2, "sleep": 60})

    async def both_started() -> bool:
        return await runs(backend, short) == 1 and await runs(backend, long_) == 1

    await wait_until(both_started, timeout=30, what="both tasks running")
    queued = await push(backend, E, *[{"n": 10 + i} for i in range(3)])
    w.signal(signal.SIGTERM)
    assert await asyncio.to_thread(w.wait, 20) == 0, w.log()
    assert await state(backend, short) == "done"  # finished within the grace period
    info = await backend.queues.state(E, long_)
    assert info.state == "queued" and info.attempt == 0  # given back, attempt refunded
    for tid in queued:
        assert await state(backend, tid) == "queued"
    assert (await state_of(backend, E, "d1"))["state"] == "STOPPED"
    assert await backend.counters.get("wt-echo:cleanups") == 2
    # a new worker finishes the queued ones (the minute-long one is cancelled)
    assert await backend.queues.cancel(E, long_) == "cancelled"
    start(workers, url, tmp_path, "d2")
    for tid in queued:
        await wait_until(lambda tid=tid: _is(backend, E, tid, "done"), timeout=30, what="done")


async def test_second_signal_exits_at_once(tmp_path: Path, workers: list[WorkerProcess]) -> None:
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    b = await open_backend(url)
    try:
        w = start(workers, url, tmp_path, "t1", grace=60)
        await running(b, E, "t1", w)
        (tid,) = await push(b, E, {"n": 1, "sleep": 60})

        async def started() -> bool:
            return await runs(b, tid) == 1

        await wait_until(started, timeout=30, what="task running")
        w.signal(signal.SIGTERM)
        await asyncio.sleep(0.5)
        assert w.proc.poll() is None  # still within its 60 s grace period
        w.signal(signal.SIGINT)
        assert await asyncio.to_thread(w.wait, 10) == 130
        assert "exiting now" in w.log()
        # the task was not acked: it is still leased and comes back after its deadline
        assert (await b.queues.state(E, tid)).state == "processing"
    finally:
        await b.close()
