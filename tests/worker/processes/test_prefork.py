"""``fleet worker --processes N``: N real worker processes forked by one command."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import psutil
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from tests.worker.procs import ROOT, WorkerProcess, fleet_env
from tests.worker.support import push, state_of, wait_until

E = "wt-echo"
ECHO = "tests.plugins_fixture.echo"

pytestmark = pytest.mark.slow


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        for child in _children(w):
            child.kill()
        w.close()


def _children(w: WorkerProcess) -> list[psutil.Process]:
    try:
        return psutil.Process(w.proc.pid).children()
    except psutil.NoSuchProcess:
        return []


async def _running(backend: Backend, w: WorkerProcess, *ids: str) -> None:
    async def up() -> bool:
        assert w.proc.poll() is None, w.log()
        states = [(await state_of(backend, E, i)).get("state") for i in ids]
        return all(s == "RUNNING" for s in states)

    await wait_until(up, timeout=30, what=f"{ids} RUNNING")


async def test_processes_share_the_work_and_stop_together(
    backend: Backend, url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    w = WorkerProcess(url, ECHO, E, "pf", tmp_path, more_args=["--processes", "2"])
    workers.append(w)
    await _running(backend, w, "pf-1", "pf-2")
    kids = _children(w)
    assert len(kids) == 2, w.log()
    ids = await push(backend, E, *({"n": i, "sleep": 0.05} for i in range(40)))

    async def all_done() -> bool:
        states = [(await backend.queues.state(E, i)).state for i in ids]
        return all(s == "done" for s in states)

    await wait_until(all_done, timeout=60, what="40 tasks done")
    by = {e.worker_id for e in await backend.streams.pop(E, 100)}
    assert by == {"pf-1", "pf-2"}, by  # both processes took tasks

    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0, w.log()
    assert not any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kids)
    for wid in ("pf-1", "pf-2"):
        assert (await state_of(backend, E, wid)).get("state") == "STOPPED", w.log()


async def test_a_stop_sent_to_every_process_drains_them_once(
    backend: Backend, url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """Ctrl-C and systemd signal the children too: each gets the stop twice at once
    (theirs and the one the parent passes on), and still drains instead of exiting."""
    w = WorkerProcess(url, ECHO, E, "pd", tmp_path, more_args=["--processes", "2"])
    workers.append(w)
    await _running(backend, w, "pd-1", "pd-2")
    (task_id,) = await push(backend, E, {"n": 1, "sleep": 1.5})

    async def running() -> bool:
        return (await backend.queues.state(E, task_id)).state == "processing"

    await wait_until(running, timeout=20, what="the task running")
    for proc in [psutil.Process(w.proc.pid), *_children(w)]:
        proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(w.wait, 30) == 0, w.log()
    assert (await backend.queues.state(E, task_id)).state == "done", w.log()
    assert "exiting now" not in w.log()


async def test_a_killed_process_is_started_again(
    backend: Backend, url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    w = WorkerProcess(url, ECHO, E, "pk", tmp_path, more_args=["--processes", "2"])
    workers.append(w)
    await _running(backend, w, "pk-1", "pk-2")
    victim = _children(w)[0]
    victim.kill()

    async def replaced() -> bool:
        pids = {k.pid for k in _children(w)}
        return len(pids) == 2 and victim.pid not in pids

    await wait_until(replaced, timeout=20, what="a new child")
    assert "exited with status 137; starting it again" in w.log()
    # its id is taken back (the stored state may still be the dead one's RUNNING)
    started = re.compile(r"worker pk-[12] on ")
    await wait_until(lambda: len(started.findall(w.log())) == 3, timeout=20, what="its worker")
    # the new process took the id back and works
    ids = await push(backend, E, *({"n": i} for i in range(10)))

    async def all_done() -> bool:
        states = [(await backend.queues.state(E, i)).state for i in ids]
        return all(s == "done" for s in states)

    await wait_until(all_done, timeout=30, what="10 tasks done")
    await _running(backend, w, "pk-1", "pk-2")
    w.signal(signal.SIGTERM)
    assert w.wait(30) == 0, w.log()


async def test_children_stop_when_the_parent_is_killed(
    backend: Backend, url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    w = WorkerProcess(url, ECHO, E, "po", tmp_path, more_args=["--processes", "2"])
    workers.append(w)
    await _running(backend, w, "po-1", "po-2")
    kids = _children(w)
    w.kill9()
    _, alive = psutil.wait_procs(kids, timeout=30)
    assert not alive, w.log()
    for wid in ("po-1", "po-2"):  # they drained and said so
        assert (await state_of(backend, E, wid)).get("state") == "STOPPED", w.log()


async def test_an_id_held_elsewhere_stops_them_all(
    backend: Backend, url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    holder = WorkerProcess(url, ECHO, E, "ph-2", tmp_path)
    workers.append(holder)
    await _running(backend, holder, "ph-2")
    w = WorkerProcess(url, ECHO, E, "ph", tmp_path, more_args=["--processes", "2"])
    workers.append(w)
    status = await asyncio.to_thread(w.wait, 60)
    assert status == 3, w.log()
    assert "ph-2" in w.log() and "cannot run: stopping all" in w.log()
    assert holder.proc.poll() is None  # the other worker is untouched


def _popen(
    args: list[str], cwd: Path, env: dict[str, str], log: BinaryIO
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", "worker", "--plugin", ECHO, *args],
        cwd=ROOT,
        env=fleet_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bad_process_counts_and_backends_are_refused() -> None:
    out = _cli("--processes", "0", "--backend", "sqlite:///unused.db")
    assert out.returncode == 2 and "--processes" in out.stderr, out.stderr
    out = _cli("--processes", "2", "--backend", "memory://")
    assert out.returncode == 2 and "shared backend" in out.stderr, out.stderr
    assert not os.path.exists(ROOT / "unused.db")


async def test_the_docs_command_runs_four_workers(tmp_path: Path) -> None:
    """The block of docs/cli.md, as written, in a folder of its own (default backend
    ``sqlite:///./fleet.db``); the types come from ``FLEET_PLUGINS``, not from
    whatever is installed."""
    text = (ROOT / "docs" / "cli.md").read_text()
    (line,) = re.findall(r"```bash\n(fleet worker --processes \d+)\n```", text)
    args = [sys.executable, "-m", *line.split()]
    env = fleet_env(FLEET_PLUGINS=ECHO, FLEET_ENTRY_POINTS="0")
    env.pop("FLEET_BACKEND_URL", None)  # the default backend, as the reader's would be
    log = (tmp_path / "w.log").open("wb")
    proc = _popen(args, tmp_path, env, log)
    b = None
    try:
        db = tmp_path / "fleet.db"
        await wait_until(db.exists, timeout=30, what="./fleet.db")
        b = await open_backend(f"sqlite:///{db}")

        async def four() -> bool:
            assert proc.poll() is None, (tmp_path / "w.log").read_text()
            ids = await b.workers.ids(E)
            states = [(await state_of(b, E, i)).get("state") for i in ids]
            return states.count("RUNNING") == 4

        await wait_until(four, timeout=60, what="4 workers RUNNING")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        states = [(await state_of(b, E, i)).get("state") for i in await b.workers.ids(E)]
        assert states == ["STOPPED"] * 4, states
    finally:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children():
                child.kill()
            proc.kill()
            proc.wait(10)
        log.close()
        if b is not None:
            await b.close()
