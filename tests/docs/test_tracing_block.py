"""The Python block of docs/tracing.md runs as written (issue 42, 6): with only the
variables every other page sets (``FLEET_MASTER_URL``, ``FLEET_ADMIN_TOKEN``), it
submits to a real master under the application's span, and the task's record (and
``fleet task``) carries that span's trace id."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.docs.blocks import fenced_blocks, section
from tests.support.master_proc import MASTER_TOKEN, MasterProcess
from tests.worker.procs import ROOT, fleet_env

PAGE = ROOT / "docs" / "tracing.md"

#: The type the block submits to, declared by a plugin of the master.
PLUGIN = """
from pydantic import BaseModel

from fleet.core import BaseConfig, BatchAutomation, register


class Page(BaseModel):
    url: str


@register("page-title")
class PageTitle(BatchAutomation[BaseConfig]):
    TaskPayload = Page

    async def run_one(self, task, ctx):
        return None
"""


def spans(stdout: str) -> list[dict[str, Any]]:
    """The spans ConsoleSpanExporter printed (indented JSON objects, one after another)."""
    decoder = json.JSONDecoder()
    out, at = [], 0
    while (start := stdout.find("{", at)) != -1:
        obj, at = decoder.raw_decode(stdout, start)
        out.append(obj)
    return out


def test_the_python_block_runs_with_the_documented_variables(tmp_path: Path) -> None:
    (block,) = [
        b for b in fenced_blocks(section(PAGE.read_text("utf-8"), "## Turning it on"))
        if b.lang == "python"
    ]  # fmt: skip
    script = tmp_path / "submit_traced.py"
    script.write_text(block.text, encoding="utf-8")
    (tmp_path / "page_title_plugin.py").write_text(PLUGIN, encoding="utf-8")
    master = MasterProcess(
        f"sqlite:///{tmp_path / 'fleet.db'}",
        tmp_path,
        env={"FLEET_PLUGINS": "page_title_plugin", "PYTHONPATH": str(tmp_path)},
    )
    try:
        asyncio.run(master.wait_ready())
        # What a reader has: the master's URL and the admin token, nothing else of Fleet's.
        env = {k: v for k, v in fleet_env().items() if not k.startswith(("FLEET_", "OTEL_"))}
        env.update(FLEET_MASTER_URL=master.url, FLEET_ADMIN_TOKEN=MASTER_TOKEN)
        run = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        # The task id, then the spans the shutdown flushed.
        task_id, exported = run.stdout.split("\n", 1)
        by_name = {s["name"]: s for s in spans(exported)}
        app_span = by_name["refresh-titles"]
        submit_span = by_name["fleet.submit page-title"]
        trace_id = app_span["context"]["trace_id"].removeprefix("0x")
        assert submit_span["context"]["trace_id"].removeprefix("0x") == trace_id
        assert submit_span["parent_id"] == app_span["context"]["span_id"]

        record = httpx.get(
            f"{master.url}/api/v1/automations/page-title/tasks/{task_id}",
            headers={"Authorization": f"Bearer {MASTER_TOKEN}"},
        ).json()
        assert record["trace_id"] == trace_id, record
        shown = subprocess.run(
            [sys.executable, "-m", "fleet", "task", "page-title", task_id],
            env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))},
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert f"trace id  {trace_id}" in shown.stdout
    finally:
        master.close()
