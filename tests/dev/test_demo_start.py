"""The first seconds of ``fleet dev --demo`` (a real process): quiet, and pointed at the
demo site from the start.

The scraper used to start before the harvester had filled the cookie pool, and wrote one
``NoCookie`` warning per task (about 32 in the first second); the worker used to start
with the pinger's default URL (port 8765) and ping it once before the demo's config
arrived, whatever ``--demo-port`` said.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.dev.test_dev_command import hermetic_env, wait_for
from tests.support.redis_server import free_port

pytestmark = pytest.mark.slow


@pytest.mark.timeout(150)  # three Python processes starting on a busy CI machine
def test_demo_starts_quietly_and_pings_the_demo_port_first(tmp_path: Path) -> None:
    port, demo_port = free_port(), free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "dev", "--demo", "--port", str(port),
             "--demo-port", str(demo_port), "--grace", "3"],
            cwd=tmp_path, env=hermetic_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            token_file = tmp_path / ".fleet" / "admin-token"
            wait_for("the admin token file", token_file.exists, 30, proc)
            headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
                wait_for("the master", lambda: client.get("/readyz").status_code == 200, 60, proc)
                first_pings = wait_for(
                    "the first ping",
                    lambda: client.get("/api/v1/automations/pinger/output?n=1").json(),
                    40,
                    proc,
                )
                wait_for(
                    "ten scraper outputs",
                    lambda: (
                        len(client.get("/api/v1/automations/cf-scraper/output?n=10").json()) >= 10
                    ),
                    60,
                    proc,
                )
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log.read_text()
    # The oldest entry of the pinger's stream is its very first ping.
    assert first_pings[0]["payload"]["url"] == f"http://127.0.0.1:{demo_port}/health"
    assert first_pings[0]["payload"]["ok"] is True
    assert ":8765" not in text, text
    # The scrapes waited for the first harvest instead of failing attempts meanwhile.
    assert "NoCookie" not in text, text
