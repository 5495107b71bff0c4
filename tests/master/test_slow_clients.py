"""Slow clients against a real master process under a 1,024 file limit: 1,000
connections that never finish their headers neither exhaust the master's descriptors
nor stop ``/healthz``; each is cut off after the header deadline."""

from __future__ import annotations

import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.master_proc import MASTER_TOKEN
from tests.support.redis_server import free_port
from tests.support.waits import until_sync
from tests.worker.procs import ROOT, fleet_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ATTACKERS = 1000


def limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def test_half_open_connections_do_not_take_the_master_down(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < ATTACKERS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    port = free_port()
    env = fleet_env(
        FLEET_ADMIN_TOKEN=MASTER_TOKEN,
        FLEET_HEADER_TIMEOUT_SECONDS="3",
        FLEET_BODY_TIMEOUT_SECONDS="2",
    )
    args = [sys.executable, "-m", "fleet", "--log-level", "WARNING", "master", "--port", str(port)]
    args += ["--backend", f"sqlite:///{tmp_path / 'f.db'}", "--no-sweeper"]
    log = (tmp_path / "master.log").open("wb")
    proc = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit_fds
    )
    socks: list[socket.socket] = []
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        until_sync(
            lambda: httpx.get(url, timeout=1).status_code == 200,
            timeout=30,
            interval=0.1,
            what="the master to start",
            ignoring=(httpx.HTTPError,),
        )
        for _ in range(ATTACKERS):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            socks.append(s)
        started = time.monotonic()
        latencies = []
        statuses = []
        while time.monotonic() - started < 2.0:
            t0 = time.perf_counter()
            r = httpx.get(url, timeout=5)
            latencies.append(time.perf_counter() - t0)
            statuses.append(r.status_code)
            time.sleep(0.05)
        fds = psutil.Process(proc.pid).num_fds()
        print(
            f"\n/healthz during {ATTACKERS} slow connections (file limit 1024): "
            f"{len(statuses)} calls, p50 {statistics.median(latencies) * 1000:.1f} ms, "
            f"max {max(latencies) * 1000:.1f} ms; master fds {fds}"
        )
        assert set(statuses) == {200}
        assert fds < 1024
        # Past the header deadline every attacker is cut off.
        time.sleep(3.5)
        closed = 0
        for s in socks:
            s.settimeout(0.01)
            try:
                closed += s.recv(1) == b""
            except (TimeoutError, BlockingIOError):
                pass
            except OSError:
                closed += 1
        print(f"cut off after the header deadline: {closed} of {ATTACKERS}")
        assert closed == ATTACKERS
        assert httpx.get(url, timeout=5).status_code == 200
        # A body that stops coming is cut off after the body deadline.
        slow = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(slow)
        slow.sendall(
            b"POST /api/v1/automations/x/tasks HTTP/1.1\r\nHost: x\r\ncontent-length: 100\r\n"
            b"authorization: Bearer " + MASTER_TOKEN.encode() + b"\r\n\r\n{"
        )
        t0 = time.monotonic()
        data = b""
        while chunk := slow.recv(4096):
            data += chunk
        print(f"slow body cut off after {time.monotonic() - t0:.1f} s")
        assert 1.5 < time.monotonic() - t0 < 6
    finally:
        for s in socks:
            s.close()
        proc.kill()
        proc.wait(10)
        log.close()
