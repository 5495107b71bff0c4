"""``fleet dev --demo`` as a new user runs it: a real process in an empty directory,
work flowing within seconds (scraper outputs, cookies in the pool, dead letters),
and Ctrl-C (SIGINT) stopping master, worker and demo site with exit status 0."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.dev.runner import has_plugins
from tests.support.redis_server import free_port
from tests.support.waits import until_sync

pytestmark = pytest.mark.slow


def hermetic_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.pop("XDG_STATE_HOME", None)  # the token file goes to ./.fleet of the temp dir
    env["FLEET_ENTRY_POINTS"] = "0"  # the demo's plugins come by --plugin, installed or not
    return env


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen[bytes]
) -> Any:
    def alive_check() -> Any:
        assert proc.poll() is None, f"fleet dev exited early ({proc.returncode}) waiting for {what}"
        return check()

    return until_sync(
        alive_check, timeout=timeout, interval=0.25, what=what, ignoring=(httpx.HTTPError,)
    )


def port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def dev_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "dev", "--demo", "--port", str(port),
             "--demo-port", "0", "--grace", "3"],
            cwd=tmp_path, env=hermetic_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            yield proc, port, log
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.mark.timeout(150)  # three Python processes starting on a busy CI machine
def test_fleet_dev_demo_runs_work_and_stops_cleanly_on_sigint(
    dev_process: tuple[subprocess.Popen[bytes], int, Path], tmp_path: Path
) -> None:
    proc, port, log = dev_process
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    token_file = tmp_path / ".fleet" / "admin-token"
    wait_for("the admin token file", token_file.exists, 30, proc)
    token = token_file.read_text().strip()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as client:
        wait_for("the master", lambda: client.get("/readyz").status_code == 200, 60, proc)
        outputs = wait_for(
            "scraper outputs",
            lambda: client.get("/api/v1/automations/cf-scraper/output", params={"n": 50}).json(),
            40,
            proc,
        )
        first_output = time.monotonic() - started
        assert all(o["payload"]["status"] == 200 and o["payload"]["body_len"] > 0 for o in outputs)
        # The scrapes went out as the demo's identities, one per local proxy (exit), and
        # the clearances they earned stayed in the identities' jars (values masked).
        assert {o["payload"]["identity"] for o in outputs} <= {"demo-1", "demo-2", "demo-3"}
        identities = client.get("/api/v1/identities/demo").json()["items"]
        assert [i["id"] for i in identities] == ["demo-1", "demo-2", "demo-3"]
        assert len({i["proxy"] for i in identities}) == 3
        assert len({i["fingerprint"]["user_agent"] for i in identities}) == 3
        assert any(
            c["name"] == "cf_clearance" and c["value"] == "********"
            for i in identities
            for c in i["cookies"]
        )
        dead = wait_for(
            "dead letters",
            lambda: client.get("/api/v1/automations/cf-scraper/dead").json(),
            40,
            proc,
        )
        assert any(d["payload"]["url"].endswith(("/13", "/42", "/77")) for d in dead)
        # The demo's config (the demo site's port) reaches the pinger as a live push.
        wait_for(
            "a successful ping",
            lambda: any(
                p["payload"]["ok"]
                for p in client.get("/api/v1/automations/pinger/output", params={"n": 50}).json()
            ),
            20,
            proc,
        )
        assert client.get("/api/v1/automations/inventory-sync/output").json()

    proc.send_signal(signal.SIGINT)
    stopping = time.monotonic()
    assert proc.wait(15) == 0
    stop_seconds = time.monotonic() - stopping
    text = log.read_text()
    assert "Fleet is running." in text and f"dashboard    {base}/" in text
    # The demo's exits: three local proxies, each seen by the site from its own address.
    exits = re.findall(r"demo exit    (http://127\.0\.0\.1:\d+)   \(the site sees (\S+)\)", text)
    assert len({url for url, _ in exits}) == 3, text
    assert [seen for _, seen in exits] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"], text
    # The default sqlite:///./fleet.db is shown resolved wherever the backend is named
    # (banner, master start, worker start): a worker started elsewhere would show another.
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    assert f"backend      {db}" in text and f"(backend {db})" in text, text
    assert re.search(rf"worker \| .*worker \S+ on {re.escape(db)} runs", text), text
    assert "sqlite:///./" not in text
    assert token in text  # printed next to the dashboard URL
    # Not on :8000, so the banner says where the client commands must look.
    assert f"export FLEET_MASTER_URL={base}" in text
    assert "worker |" in text and "master |" in text and "dev    | stopped" in text
    assert "httpx: HTTP Request" not in text  # request chatter stays out without --verbose
    assert port_closed(port)
    assert stop_seconds < 10, stop_seconds
    print(f"first scraper output after {first_output:.1f}s; stopped in {stop_seconds:.1f}s")


def test_fleet_dev_refuses_the_memory_backend(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "fleet", "dev", "--backend", "memory://", "--port", "0"],
        cwd=tmp_path, env=hermetic_env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode == 1
    assert "memory:// lives inside one process" in run.stdout + run.stderr


@pytest.mark.timeout(120)
def test_master_dies_with_fleet_dev_and_runs_alone_without_plugins(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "dev", "--port", str(port)],
            cwd=tmp_path, env=hermetic_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for(
                "the master",
                lambda: httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200,
                60,
                proc,
            )
            # (After `make dev` the examples are installed and a worker runs too.)
            assert ("only the master runs" in log.read_text()) != has_plugins(())
            # Even killed outright, fleet dev leaves no master behind holding the port.
            proc.kill()
            proc.wait(5)
            until_sync(lambda: port_closed(port), interval=0.1, what=f"port {port} to close")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
