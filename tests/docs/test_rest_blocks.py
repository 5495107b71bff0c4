"""The curl blocks of docs/rest-api.md for the task browser, the dead-letter selection
and the history run as written against a real master (only ``$API`` and ``$TOKEN``
are set, as the page's top says), and answer what the page shows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet.backends import open_backend
from fleet.core.catalog import catalog_entry
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks
from tests.master.plugins import Scraper
from tests.support.master_proc import MASTER_TOKEN, MasterProcess

ROOT = Path(__file__).resolve().parents[2]
TYPE = "cf-scraper"  # the type the page's examples use
PAGE = (ROOT / "docs" / "rest-api.md").read_text(encoding="utf-8")

#: A phrase of each block this test runs, and the keys its answer must have.
BLOCKS = {
    "/tasks?state=dead&limit=2": {"items", "next_cursor"},
    "/dead/selection": {"action", "done", "skipped", "unknown"},
    "/history?window=1h": {"type", "window", "step_seconds", "points"},
}


def _block(phrase: str) -> str:
    found = [b.text for b in fenced_blocks(PAGE) if b.lang == "bash" and phrase in b.text]
    assert len(found) == 1, f"one bash block of docs/rest-api.md has {phrase!r}"
    return found[0]


async def test_the_browser_selection_and_history_blocks_run_as_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    async with await open_backend(url) as b:
        await b.catalog.put(TYPE, catalog_entry(Scraper))
        await b.queues.push(TYPE, [make_push_request({"url": f"u{i}"}) for i in range(3)])
        for r in await b.queues.reserve(TYPE, k=2):
            await b.queues.nack(TYPE, r.body.id, r.token, delay_seconds=0, error="boom", dead=True)
    master = MasterProcess(url, tmp_path)
    try:
        await master.wait_ready()
        env = {**os.environ, "API": f"{master.url}/api/v1", "TOKEN": MASTER_TOKEN}
        for phrase, keys in BLOCKS.items():
            out = await asyncio.to_thread(
                subprocess.run,
                ["bash", "-euc", _block(phrase)],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert out.returncode == 0, out.stderr
            answer = json.loads(out.stdout)
            assert keys <= set(answer), (phrase, answer)
            if phrase.startswith("/tasks"):
                assert len(answer["items"]) == 2 and answer["items"][0]["state"] == "dead"
            if phrase == "/dead/selection":
                assert answer["unknown"] == ["9d1e…", "77ab…", "gone-1"]  # the page's ids
    finally:
        master.close()


pytestmark = pytest.mark.timeout(120)
