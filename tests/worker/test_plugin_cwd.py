"""``--plugin`` / ``FLEET_PLUGINS`` find modules of the current directory, also
from the ``fleet`` console script (whose ``sys.path[0]`` is its own directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.plugins import cwd_on_path
from tests.worker.procs import fleet_env

FLEET_SCRIPT = Path(sys.executable).parent / "fleet"

LOCALMOD = """
from typing import Any

from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, Context, Task, register


class Item(BaseModel):
    n: int


@register("wt-localmod")
class Doubler(BatchAutomation[BaseConfig]):
    Config = BaseConfig
    TaskPayload = Item
    Output = Item

    async def run_one(self, task: Task[Any], ctx: Context[BaseConfig]) -> None:
        await ctx.emit(Item(n=task.payload.n * 2))
"""


def run_script(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLEET_SCRIPT), "--log-level", "ERROR", *args],
        cwd=cwd,
        env=fleet_env(**env),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("how", ["--plugin", "FLEET_PLUGINS"])
def test_console_script_imports_a_module_of_the_current_directory(tmp_path: Path, how: str) -> None:
    assert FLEET_SCRIPT.is_file()
    (tmp_path / "localmod.py").write_text(LOCALMOD)
    args = ["run", "wt-localmod", "--payload", '{"n": 21}']
    if how == "--plugin":
        result = run_script(tmp_path, *args, "--plugin", "localmod")
    else:
        result = run_script(tmp_path, *args, FLEET_PLUGINS="localmod")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [{"n": 42}]


def test_cwd_goes_last_and_only_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    before = list(sys.path)
    cwd_on_path()
    cwd_on_path()
    # Appended, so the standard library and installed packages keep precedence.
    assert sys.path == [*before, str(tmp_path)]
    monkeypatch.setattr(sys, "path", ["", *before])
    cwd_on_path()
    assert sys.path == ["", *before]  # "" already stands for the current directory
