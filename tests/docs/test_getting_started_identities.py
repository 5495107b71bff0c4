"""docs/getting-started.md, "Why identities: a cookie that moves is refused", run as
written against a real ``fleet dev --demo``: ``exits.py`` saved as the page names it and
run with the demo's proxies (a cookie moved to another exit, or sent by another browser,
is refused; the page's output is the script's, line for line), then the page's
``fleet identities`` and ``fleet tail`` commands, whose answers show the identities the
scrapes went out as. Only the ports differ (free ones instead of 8000 and 8765-8768)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fleet.dev.demo_proxies import SOURCE_ADDRESSES, source_available
from fleet.dev.demo_seed import EXAMPLE_PACKAGES
from tests.dev.test_dev_command import hermetic_env, wait_for
from tests.docs.blocks import fenced_blocks, section
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
HEADING = "### Why identities: a cookie that moves is refused"
VENV_BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(source_available(a) for a in SOURCE_ADDRESSES),
        reason="this system does not route 127.0.0.2-4 to loopback",
    ),
]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, int, Path]]:
    """``fleet dev --demo`` on free ports, in ``tmp_path``."""
    port, demo_port = free_port(), free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "dev", "--demo", "--port", str(port),
             "--demo-port", str(demo_port), "--grace", "3"],
            cwd=tmp_path, env=hermetic_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc, port, demo_port, log
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def user_shell(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A line of the page, run as the reader would from the clone (``.venv/bin/...``)."""
    line = line.replace(".venv/bin/", f"{VENV_BIN}/")
    return subprocess.run(
        line, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.timeout(180)
def test_a_moved_cookie_is_refused_and_the_demo_identities_show_it(
    demo: tuple[subprocess.Popen[bytes], int, int, Path], tmp_path: Path
) -> None:
    blocks = fenced_blocks(section(PAGE, HEADING))
    script, run, expected, commands = blocks
    assert script.lang == "python" and script.file_name == "exits.py"
    assert run.lines() == [".venv/bin/python exits.py"] and expected.lang == "text"

    proc, port, demo_port, log = demo
    token_file = tmp_path / ".fleet" / "admin-token"
    wait_for("the admin token file", token_file.exists, 30, proc)
    headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
        wait_for("the master", lambda: client.get("/readyz").status_code == 200, 60, proc)
        wait_for(
            "scraper outputs",
            lambda: client.get("/api/v1/automations/cf-scraper/output", params={"n": 5}).json(),
            60,
            proc,
        )
    # The banner names the exits the page writes as 8766 and 8767: the demo port's next.
    exits = re.findall(r"demo exit    (http://127\.0\.0\.1:\d+)", log.read_text())
    assert exits == [f"http://127.0.0.1:{demo_port + n}" for n in (1, 2, 3)], log.read_text()
    text = script.text
    for written, actual in (("8765", demo_port), ("8766", demo_port + 1), ("8767", demo_port + 2)):
        assert f"127.0.0.1:{written}" in text
        text = text.replace(f"127.0.0.1:{written}", f"127.0.0.1:{actual}")
    (tmp_path / "exits.py").write_text(text)

    env = {**hermetic_env(), "FLEET_MASTER_URL": f"http://127.0.0.1:{port}"}
    # what `make dev` installs (this process may have them on sys.path only)
    paths = [str(ROOT / "examples" / name) for name in EXAMPLE_PACKAGES]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    ran = user_shell(run.lines()[0], tmp_path, env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == expected.text

    pool, one, tail = (user_shell(line, tmp_path, env) for line in commands.lines())
    for answer in (pool, one, tail):
        assert answer.returncode == 0, answer.stdout + answer.stderr
    for n in (1, 2, 3):
        assert f"demo-{n}" in pool.stdout and exits[n - 1] in pool.stdout, pool.stdout
    assert "user agent: Mozilla/5.0" in one.stdout, one.stdout
    assert re.search(r'"identity": "demo-\d"', tail.stdout), tail.stdout
    assert proc.poll() is None
