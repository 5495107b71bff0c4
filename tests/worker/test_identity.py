"""Worker ids: two processes on one host never share one, a restart keeps its id,
an explicit ``--id`` held by a live worker is refused (fleet.worker.identity)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.protocol import CONTROL_NS, worker_id_key
from fleet.worker.hardware import host_name
from fleet.worker.identity import Holder, WorkerIdInUse, claim_worker_id, default_ids
from tests.conformance.helpers import elapse
from tests.support.waits import until_sync
from tests.worker.procs import ROOT, fleet_env

HOST = host_name()


def test_default_ids_are_the_host_then_numbered() -> None:
    assert default_ids("h", 4) == ["h", "h-2", "h-3", "h-4"]


def _gone_process() -> Holder:
    """A holder record of a process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return Holder(HOST, child.pid, started, "old")


async def test_second_claim_on_a_host_gets_the_next_id_and_release_frees_it(
    backend: Backend,
) -> None:
    first = await claim_worker_id(backend.kv, None, hold_seconds=30)
    second = await claim_worker_id(backend.kv, None, hold_seconds=30)
    assert (first.worker_id, second.worker_id) == (HOST, f"{HOST}-2")
    await first.release(backend.kv)
    again = await claim_worker_id(backend.kv, None, hold_seconds=30)
    assert again.worker_id == HOST  # a gracefully stopped worker's id comes back at once
    await second.renew(backend.kv)
    assert await backend.kv.get(CONTROL_NS, worker_id_key(f"{HOST}-2")) == second.holder.encode()


async def test_an_explicit_id_held_by_a_live_process_is_refused(backend: Backend) -> None:
    await claim_worker_id(backend.kv, "w-a", hold_seconds=30)
    with pytest.raises(WorkerIdInUse, match=r"'w-a' is held by a live worker .*--id"):
        await claim_worker_id(backend.kv, "w-a", hold_seconds=30)


async def test_a_claim_of_a_gone_process_of_this_host_is_taken_over(backend: Backend) -> None:
    dead = _gone_process()
    await backend.kv.set(CONTROL_NS, worker_id_key("w-b"), dead.encode(), ttl_seconds=30)
    claim = await claim_worker_id(backend.kv, "w-b", hold_seconds=30)  # a kill -9, then restart
    assert claim.worker_id == "w-b"
    assert await backend.kv.get(CONTROL_NS, worker_id_key("w-b")) == claim.holder.encode()


async def test_another_hosts_claim_holds_until_its_ttl_expires(
    backend: Backend, frozen: ManualClock
) -> None:
    other = Holder("some-other-host", 1, 0.0, "x")
    await backend.kv.set(CONTROL_NS, worker_id_key("w-c"), other.encode(), ttl_seconds=0.5)
    with pytest.raises(WorkerIdInUse, match="some-other-host"):
        await claim_worker_id(backend.kv, "w-c", hold_seconds=30)
    await elapse(backend, frozen, 0.6)  # on Redis the key's own TTL (PX)
    assert (await claim_worker_id(backend.kv, "w-c", hold_seconds=30)).worker_id == "w-c"


async def test_renew_does_not_steal_an_id_taken_by_another_process(backend: Backend) -> None:
    claim = await claim_worker_id(backend.kv, "w-d", hold_seconds=30)
    other = Holder("some-other-host", 7, 0.0, "y")
    await backend.kv.set(CONTROL_NS, worker_id_key("w-d"), other.encode(), ttl_seconds=30)
    await claim.renew(backend.kv)
    assert await backend.kv.get(CONTROL_NS, worker_id_key("w-d")) == other.encode()
    await claim.release(backend.kv)  # not ours any more: left alone
    assert await backend.kv.get(CONTROL_NS, worker_id_key("w-d")) == other.encode()


def _worker(url: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "fleet", "worker", "--plugin", "tests.plugins_fixture.noop"]
    args += ["--type", "wt-noop", "--backend", url, "--grace", "1", *extra]
    with log.open("wb") as out:
        return subprocess.Popen(args, cwd=ROOT, env=fleet_env(), stdout=out, stderr=out)


async def _read_ids(url: str) -> list[str]:
    async with await open_backend(url) as b:
        return sorted(await b.workers.ids("wt-noop"))


def _ids(url: str, n: int, timeout: float = 30) -> list[str]:
    def registered() -> list[str]:
        ids = asyncio.run(_read_ids(url))
        return ids if len(ids) >= n else []

    return until_sync(registered, timeout=timeout, interval=0.2, what=f"{n} workers registered")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_two_worker_processes_on_one_host_get_two_ids(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    procs = [_worker(url, tmp_path / f"w{i}.log") for i in range(2)]
    try:
        assert _ids(url, 2) == sorted([HOST, f"{HOST}-2"])
        logs = "".join((tmp_path / f"w{i}.log").read_text() for i in range(2))
        # The first line says what runs and where it came from.
        assert "runs wt-noop (from --plugin tests.plugins_fixture.noop)" in logs
        # A third process asking for a live worker's id explicitly is refused.
        refused = subprocess.run(
            [sys.executable, "-m", "fleet", "worker", "--plugin", "tests.plugins_fixture.noop",
             "--type", "wt-noop", "--backend", url, "--id", HOST],
            cwd=ROOT, env=fleet_env(), capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert refused.returncode == 1
        assert f"worker id {HOST!r} is held by a live worker" in refused.stderr
        assert "--id" in refused.stderr and "Traceback" not in refused.stderr
        # kill -9 the first one: a restart of it takes its id back at once.
        (first_id,) = re.findall(r"worker (\S+) on \S+ runs", (tmp_path / "w0.log").read_text())
        procs[0].kill()
        procs[0].wait(10)
        procs[0] = _worker(url, tmp_path / "w0-again.log")
        until_sync(
            lambda: "runs wt-noop" in (tmp_path / "w0-again.log").read_text(),
            timeout=30,
            interval=0.2,
            what="the restarted worker to run",
        )
        assert f"worker {first_id} on" in (tmp_path / "w0-again.log").read_text()
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
