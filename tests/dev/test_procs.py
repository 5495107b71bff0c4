"""``Child``: real processes, prefixed output, graceful stop and the SIGKILL fallback."""

from __future__ import annotations

import os
import sys
import time

from fleet.dev.procs import Child
from tests.support.waits import until

IGNORES_SIGINT = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN);"
    "print('ready', flush=True); time.sleep(60)"
)
STOPS_ON_SIGINT = (
    "import time\n"
    "print('ready', flush=True)\n"
    "try:\n    time.sleep(60)\n"
    "except KeyboardInterrupt:\n    print('bye', flush=True)\n"
)


async def wait_for_line(lines: list[tuple[str, str]], text: str, timeout: float = 10) -> None:
    try:
        await until(lambda: any(text == line for _, line in lines), timeout=timeout)
    except AssertionError:
        raise AssertionError(f"no {text!r} in {lines}") from None


async def test_stop_sends_sigint_and_keeps_the_last_output() -> None:
    lines: list[tuple[str, str]] = []
    child = Child(
        "worker", [sys.executable, "-c", STOPS_ON_SIGINT], dict(os.environ),
        lambda name, line: lines.append((name, line)),
    )  # fmt: skip
    await child.start()
    await wait_for_line(lines, "ready")
    assert await child.stop(timeout=10) is True
    assert child.returncode == 0
    assert lines == [("worker", "ready"), ("worker", "bye")]


async def test_a_child_ignoring_sigint_is_killed_after_the_timeout() -> None:
    lines: list[tuple[str, str]] = []
    child = Child(
        "master", [sys.executable, "-c", IGNORES_SIGINT], dict(os.environ),
        lambda name, line: lines.append((name, line)),
    )  # fmt: skip
    await child.start()
    await wait_for_line(lines, "ready")
    started = time.monotonic()
    assert await child.stop(timeout=0.5) is False
    assert time.monotonic() - started < 5
    assert child.returncode == -9
    assert ("dev", "master did not stop within 0s; killing it") in lines


async def test_request_chatter_is_dropped_when_quiet() -> None:
    script = (
        "print('12:00:00 INFO    httpx: HTTP Request: GET http://x/ \"HTTP/1.1 200 OK\"');"
        "print('INFO:     127.0.0.1:5000 - \"GET /x HTTP/1.1\" 200 OK'); print('kept')"
    )
    lines: list[tuple[str, str]] = []
    child = Child(
        "worker", [sys.executable, "-c", script], dict(os.environ),
        lambda name, line: lines.append((name, line)), quiet=True,
    )  # fmt: skip
    await child.start()
    assert await child.wait() == 0
    assert lines == [("worker", "kept")]
