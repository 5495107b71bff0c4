"""The small CLI fixes of issue 13, against a live master over real HTTP: ``tail``
shows the newest entries (``-n 0 -f`` only new ones), a missing and a refused token
read differently, an unknown task id exits non-zero, a delayed task is "scheduled",
and tables and progress bars behave on a pipe (real subprocesses, stdout piped)."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from tests.master.conftest import ADMIN, auth
from tests.master.plugins import LOOP, SCRAPE


@pytest.fixture
def live(live_factory: Any, sqlite_url: str) -> Any:
    return live_factory(sqlite_url, sweeper=False)


def fleet(live: Any, *args: str, token: str | None = ADMIN) -> Any:
    argv = [*args, "--url", live.url, *(["--token", token] if token else [])]
    return CliRunner().invoke(main, argv, catch_exceptions=False)


def emit(backend_url: str, *texts: str) -> list[str]:
    """Push entries to LOOP's stream as a worker would; their ids."""

    async def push() -> list[str]:
        b = await open_backend(backend_url)
        try:
            return [(await b.streams.push(LOOP, {"text": t}, worker_id="w")).id for t in texts]
        finally:
            await b.close()

    return asyncio.run(push())


def subprocess_env(live: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(FLEET_MASTER_URL=live.url, FLEET_ADMIN_TOKEN=ADMIN)
    return env


def run_piped(live: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """``fleet ARGS`` in a child process whose stdout is a pipe (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "fleet", *args],
        env=subprocess_env(live), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


# ---------------------------------------------------------------- tail


def lines(output: str) -> list[Any]:
    return [json.loads(line) for line in output.splitlines()]


def test_tail_prints_the_newest_entries_and_the_rest_api_keeps_oldest_first(
    live: Any, sqlite_url: str
) -> None:
    emit(sqlite_url, *(f"line{i}" for i in range(5)))
    r = fleet(live, "tail", LOOP, "-n", "3")
    assert r.exit_code == 0, r.output
    assert lines(r.output) == [{"text": "line2"}, {"text": "line3"}, {"text": "line4"}]
    r = fleet(live, "tail", LOOP, "-n", "9", "--json")
    assert [e["payload"]["text"] for e in lines(r.output)] == [f"line{i}" for i in range(5)]

    api = f"{live.url}/api/v1/automations/{LOOP}/output"
    peek = httpx.get(api, params={"n": 2}, headers=auth(ADMIN)).json()
    assert [e["payload"]["text"] for e in peek] == ["line0", "line1"]  # the spec's order
    newest = httpx.get(api, params={"n": 2, "newest": "true"}, headers=auth(ADMIN)).json()
    assert [e["payload"]["text"] for e in newest] == ["line3", "line4"]


def test_tail_n_0_prints_nothing_but_still_checks_the_type(live: Any, sqlite_url: str) -> None:
    emit(sqlite_url, "old")
    r = fleet(live, "tail", LOOP, "-n", "0")
    assert (r.exit_code, r.output) == (0, "")
    r = fleet(live, "tail", "no-such-type", "-n", "0")
    assert r.exit_code == 1 and "unknown automation type" in r.output
    r = fleet(live, "tail", LOOP, "-n", "-1")
    assert r.exit_code == 2


class Follower:
    """``fleet tail ... -f`` in a child process; its stdout lines in a queue."""

    def __init__(self, live: Any, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fleet", "tail", LOOP, "-f", *args],
            env=subprocess_env(live), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        threading.Thread(target=lambda: [self.lines.put(x) for x in stdout], daemon=True).start()

    def next_line(self, timeout: float) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def stop(self) -> str:
        self.proc.kill()
        _, err = self.proc.communicate(timeout=10)
        return err


def emit_until_printed(follower: Follower, backend_url: str) -> Any:
    """Emit ``new<i>`` every 0.2 s until the follower prints a line (it subscribes a
    moment after it starts); the first line it printed."""
    deadline = time.monotonic() + 30
    i = 0
    while time.monotonic() < deadline:
        assert follower.proc.poll() is None, follower.stop()
        emit(backend_url, f"new{i}")
        i += 1
        try:
            return follower.next_line(timeout=0.2)
        except queue.Empty:
            continue
    raise AssertionError(f"fleet tail -f printed nothing: {follower.stop()}")


@pytest.mark.timeout(90)
def test_tail_n_0_follow_prints_only_new_entries(live: Any, sqlite_url: str) -> None:
    emit(sqlite_url, "old0", "old1")
    follower = Follower(live, "-n", "0")
    try:
        first = emit_until_printed(follower, sqlite_url)
        assert first["text"].startswith("new"), first
    finally:
        err = follower.stop()
    assert "422" not in err


@pytest.mark.timeout(90)
def test_tail_follow_prints_the_newest_then_each_new_entry_once(live: Any, sqlite_url: str) -> None:
    emit(sqlite_url, *(f"old{i}" for i in range(4)))
    follower = Follower(live, "-n", "2")
    try:
        assert follower.next_line(timeout=30) == {"text": "old2"}
        assert follower.next_line(timeout=5) == {"text": "old3"}
        first_new = emit_until_printed(follower, sqlite_url)
        emit(sqlite_url, "last")
        seen = [first_new["text"]]
        while seen[-1] != "last":
            seen.append(follower.next_line(timeout=10)["text"])
    finally:
        follower.stop()
    assert len(seen) == len(set(seen)), seen  # nothing printed twice
    assert not any(t.startswith("old") for t in seen)


# ---------------------------------------------------------------- tokens


@pytest.fixture
def no_ambient_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No FLEET_ADMIN_TOKEN and an empty state directory; the token file's path."""
    monkeypatch.delenv("FLEET_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "fleet" / "admin-token"


def test_no_token_and_refused_token_read_differently(
    live: Any, no_ambient_token: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = fleet(live, "catalog", token=None)
    assert r.exit_code == 1
    assert "no admin token (401)" in r.output and "refused the token" not in r.output
    assert "--token" in r.output and "FLEET_ADMIN_TOKEN" in r.output
    assert str(no_ambient_token) in r.output  # where a local master would have put one

    r = fleet(live, "catalog", token="wrong")
    assert r.exit_code == 1
    assert "refused the token (401), from --token" in r.output
    assert "no admin token" not in r.output

    no_ambient_token.parent.mkdir(parents=True)
    no_ambient_token.write_text("stale-token\n")
    r = fleet(live, "catalog", token=None)
    assert "may be read or written by others" in r.output  # mode 644: refused, not used
    no_ambient_token.chmod(0o600)
    r = fleet(live, "catalog", token=None)
    assert f"refused the token (401), from {no_ambient_token}" in r.output

    monkeypatch.setenv("FLEET_ADMIN_TOKEN", "also-wrong")
    r = fleet(live, "catalog", token=None)
    assert "refused the token (401), from FLEET_ADMIN_TOKEN" in r.output
    monkeypatch.setenv("FLEET_ADMIN_TOKEN", ADMIN)
    assert fleet(live, "catalog", token=None).exit_code == 0


def test_follow_without_a_token_says_so(live: Any, no_ambient_token: Path) -> None:
    r = fleet(live, "tail", LOOP, "-n", "0", token=None)
    assert r.exit_code == 1 and "no admin token (401)" in r.output


# ---------------------------------------------------------------- tasks and submit


def test_unknown_task_id_exits_non_zero(live: Any) -> None:
    r = fleet(live, "task", SCRAPE, "no-such-task")
    assert r.exit_code == 1
    assert "no task 'no-such-task'" in r.output and "never submitted" in r.output
    r = fleet(live, "task", SCRAPE, "no-such-task", "--json")
    assert r.exit_code == 1
    assert json.loads(r.output[: r.output.rindex("}") + 1])["state"] == "unknown"
    r = fleet(live, "submit", SCRAPE, '{"url": "u"}', "--task-id", "known")
    assert fleet(live, "task", SCRAPE, "known").exit_code == 0


def test_submit_with_delay_says_scheduled_and_when(live: Any, tmp_path: Path) -> None:
    r = fleet(live, "submit", SCRAPE, '{"url": "now"}')
    assert r.exit_code == 0 and r.output.strip().endswith(" queued")
    before = time.time()
    r = fleet(live, "submit", SCRAPE, '{"url": "later"}', "--delay", "90")
    assert r.exit_code == 0
    task_id, rest = r.output.strip().split(" ", 1)
    assert rest.startswith("scheduled for ") and rest.endswith("(in 2m)"), rest
    when = time.strptime(rest[len("scheduled for ") :][:19], "%Y-%m-%d %H:%M:%S")
    assert abs(time.mktime(when) - (before + 90)) < 5
    state = json.loads(fleet(live, "task", SCRAPE, task_id, "--json").output)
    assert state["state"] == "scheduled"

    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"url": "1"}\n{"url": "2"}\n')
    r = fleet(live, "submit", SCRAPE, "--from-jsonl", str(jsonl), "--delay", "30")
    assert "2 scheduled for " in r.output and "(in 30s), 0 duplicates, 0 refused" in r.output


# ---------------------------------------------------------------- pipes


def test_piped_tables_are_not_cut_at_80_columns(live: Any) -> None:
    agent = "Mozilla/5.0 " + "x" * 150 + " end-of-agent"
    assert fleet(live, "config", "set", SCRAPE, f"user_agent={agent}").exit_code == 0
    run = run_piped(live, "config", "get", SCRAPE)
    assert run.returncode == 0, run.stderr
    assert json.dumps(agent) in run.stdout
    assert "…" not in run.stdout
    assert "\x1b[" not in run.stdout  # no colours into a pipe


def test_piped_progress_bar_goes_to_stderr(live: Any, tmp_path: Path) -> None:
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"url": "1"}\n{"url": "2"}\n')
    run = run_piped(live, "submit", SCRAPE, "--from-jsonl", str(jsonl))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "2 queued, 0 duplicates, 0 refused\n"
