"""``fleet run`` end to end, as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from fleet.cli import main
from tests.worker.procs import ROOT, fleet_env

ECHO = ["--plugin", "tests.plugins_fixture.echo"]


def fleet(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", "--log-level", "ERROR", *args],
        cwd=ROOT,
        env=fleet_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )


def emitted(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_payloads_run_with_retries_and_print_emits() -> None:
    result = fleet(
        "run", "wt-echo", *ECHO, "--slots", "2",
        "--payload", '{"n": 1}',
        "--payload", '{"n": 2, "fail_times": 1}',
        "--config", '{"label": "cli"}',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = sorted(emitted(result.stdout), key=lambda p: int(str(p["n"])))
    assert [(p["n"], p["attempt"], p["label"]) for p in lines] == [(1, 1, "cli"), (2, 2, "cli")]


def test_stdin_tasks_and_a_dead_letter_exit_1() -> None:
    stdin = "\n".join(json.dumps({"n": i, "fail_times": 99 if i == 3 else 0}) for i in range(5))
    result = fleet("run", "wt-echo", *ECHO, "--config", '{"max_attempts": 2}', stdin=stdin + "\n")
    assert result.returncode == 1
    assert sorted(p["n"] for p in emitted(result.stdout)) == [0, 1, 2, 4]
    assert "1 task(s) dead-lettered" in result.stderr


def test_file_tasks_and_invalid_payload_in_process(tmp_path: Path) -> None:
    f = tmp_path / "tasks.jsonl"
    f.write_text('{"n": 7}\n\n{"n": "seven"}\n')
    result = CliRunner().invoke(main, ["run", "wt-echo", *ECHO, "--file", str(f)])
    # An exception inside the run also gives exit code 1: say what happened.
    why = f"exception {result.exception!r}; stdout {result.stdout!r}; stderr {result.stderr!r}"
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), why
    assert [p["n"] for p in emitted(result.stdout)] == [7], why


def test_missing_required_config_is_reported() -> None:
    plugin = ["--plugin", "tests.plugins_fixture.required"]
    result = fleet("run", "wt-required", *plugin, "--payload", "{}")
    assert result.returncode == 1
    assert "missing required config field(s): api_key" in result.stderr
    result = fleet("run", "wt-required", *plugin, "--payload", "{}", "--config", '{"api_key": "k"}')
    assert result.returncode == 0, result.stderr
    assert emitted(result.stdout) == [{"api_key": "k"}]


def test_bad_input_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["run", "wt-echo", *ECHO, "--payload", "{not json"])
    assert result.exit_code == 2 and "Expecting property name" in result.output
    result = CliRunner().invoke(main, ["run", "nope", *ECHO, "--payload", "{}"])
    assert result.exit_code == 2 and "unknown type(s) nope" in result.output
