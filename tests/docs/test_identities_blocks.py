"""Every block of docs/identities.md runs as written, in order, against a real ``fleet
master`` (the JSON file saved as the page says, ``$API`` and ``$TOKEN`` set as the REST
page's top says, ``fleet`` on the PATH) and answers what the page shows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs.blocks import Block, fenced_blocks
from tests.support.master_proc import MASTER_TOKEN, MasterProcess

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "identities.md").read_text(encoding="utf-8")
# The REST and CLI walk-through; the section on ctx.identity has a test of its own
# (tests/docs/test_identity_task_block.py).
WALK = PAGE[: PAGE.index("## In a task: ctx.identity")]
MASKED = "********"


def answers(out: str) -> list[Any]:
    """The JSON documents a block printed, one after the other."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while at < len(out):
        if out[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(out, at)
        found.append(value)
    return found


def check_curl(block: Block, got: list[Any], saved: dict[str, Any]) -> None:
    """What each curl block of the page shows, against what it answered."""
    text = block.text
    if "-d @identities.json" in text:
        assert got == [{"pool": "shop", "created": 2, "replaced": 0, "ids": ["shop-1", "shop-2"]}]
    elif '"bad-1"' in text:
        (error,) = got[0]["detail"]
        assert error["loc"] == ["body", "identities", "1", "cookies", "0", "domain"]
    elif '"generate"' in text:
        assert got[0]["created"] == 4 and all(i.startswith("gen-") for i in got[0]["ids"])
        saved["generated"] = sorted(got[0]["ids"])
    elif "$API/identities\n" in text:
        counts = {"ready": 6, "leased": 0, "cooling": 0, "retired": 0}
        assert got == [{"pools": [{"pool": "shop", "total": 6, "counts": counts}]}]
    elif "limit=2" in text:
        assert [i["id"] for i in got[0]["items"]] == saved["generated"][:2]
        assert got[0]["next"] == saved["generated"][1]
    elif "reveal=true" in text:
        one = got[0]
        assert one["proxy"] == "http://alice:alice-pw@proxy-de.example:8000"
        assert one["cookies"][0]["value"] == "a1b2c3" and one["account"]["password"] == "hunter2"
    elif "/retire" in text:
        retired, revived, deleted = got
        assert (retired["state"], retired["stats"]["last_reason"]) == ("retired", "account banned")
        assert revived["state"] == "ready"
        assert deleted == {"pool": "shop", "id": "shop-2", "deleted": True}
    elif "identities/shops" in text:
        assert [a["detail"] for a in got] == [
            "unknown identity pool 'shops': it holds no identity; did you mean 'shop'?",
            "unknown identity 'shop-9' in pool 'shop'",
        ]
    elif "shop/shop-1" in text:
        one = got[0]
        assert one["proxy"] == f"http://alice:{MASKED}@proxy-de.example:8000"
        assert one["cookies"][0]["value"] == MASKED and one["cookies"][0]["secure"] is True
        assert one["account"] == {"login": "alice", "password": MASKED}
        assert (one["fingerprint"]["locale"], one["fingerprint"]["timezone"]) == (
            "de-DE",
            "Europe/Berlin",
        )
    else:
        raise AssertionError(f"a curl block this test does not check:\n{text}")


def check_cli(out: str) -> None:
    """The CLI block: it added, generated, listed, showed, retired, revived, deleted."""
    assert "shop: 1 created, 1 replaced" in out  # shop-2 was deleted above
    assert "shop: 10 created, 0 replaced" in out
    assert "identity pools" in out and "identities of shop" in out
    assert "de-DE" in out and "Europe/Berlin" in out and "alice-pw" not in out
    assert "account banned" in out and "identity shop-1 deleted" in out


def _run(script: str, cwd: Path, env: dict[str, str]) -> str:
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, (script, out.stdout, out.stderr)
    return out.stdout


async def test_every_block_runs_as_written(tmp_path: Path) -> None:
    blocks = fenced_blocks(WALK)
    assert {b.lang for b in blocks} == {"json", "bash"}
    master = MasterProcess(f"sqlite:///{tmp_path / 'fleet.db'}", tmp_path)
    try:
        await master.wait_ready()
        env = {
            **os.environ,
            "API": f"{master.url}/api/v1",
            "TOKEN": MASTER_TOKEN,
            "FLEET_MASTER_URL": master.url,
            "FLEET_ADMIN_TOKEN": MASTER_TOKEN,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "COLUMNS": "200",
        }
        saved: dict[str, Any] = {}
        ran = 0
        for block in blocks:
            if block.lang == "json":
                assert block.file_name == "identities.json"
                (tmp_path / block.file_name).write_text(block.text)
                continue
            out = await asyncio.to_thread(_run, block.text, tmp_path, env)
            if block.text.lstrip().startswith("curl"):
                check_curl(block, answers(out), saved)
            else:
                check_cli(out)
            ran += 1
        assert ran == sum(1 for b in blocks if b.lang == "bash") >= 9
    finally:
        master.close()


pytestmark = pytest.mark.timeout(180)
