"""The "Function tasks" section of docs/automations.md runs as written: its module saved
as the prose names it, ``fleet run`` of the type, the output the prose says."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import fenced_blocks, section

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "automations.md"


def test_the_function_task_block_runs(tmp_path: Path) -> None:
    text = section(PAGE.read_text(encoding="utf-8"), "## Function tasks")
    blocks = fenced_blocks(text)
    (code,) = [b for b in blocks if b.lang == "python"]
    assert code.file_name == "prices.py"
    (tmp_path / "prices.py").write_text(code.text, encoding="utf-8")
    (run,) = [line for b in blocks if b.lang == "bash" for line in b.lines()]
    args = shlex.split(run)
    assert args[:3] == ["python", "-m", "fleet"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env["FLEET_ENTRY_POINTS"] = "0"
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, *args[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip()
    assert json.loads(printed) == {"sku": "A-1", "cents": 300, "currency": "EUR"}
    assert f"It prints `{printed}`" in text
