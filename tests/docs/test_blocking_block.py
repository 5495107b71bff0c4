"""The "Blocking code" section of docs/batch-automations.md: its Python block runs as
written and moves the blocking call off the event loop (the loop keeps beating
while it runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import fenced_blocks, section

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "batch-automations.md"


def test_the_blocking_code_block_runs(tmp_path: Path) -> None:
    text = section(PAGE.read_text(encoding="utf-8"), "### Blocking code")
    (block,) = [b for b in fenced_blocks(text) if b.lang == "python"]
    script = tmp_path / "offload.py"
    script.write_text(block.text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "fetched https://example.com/"
    # The same coroutine beside a ticker: the loop is free while the call blocks.
    probe = tmp_path / "probe.py"
    probe.write_text(
        block.text.replace('print(asyncio.run(fetch("https://example.com/")))', "")
        + """
async def main() -> int:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await fetch("x")
    ticker.cancel()
    return ticks


print(asyncio.run(main()))
""",
        encoding="utf-8",
    )
    ticks = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, timeout=60, check=True
    )
    assert int(ticks.stdout.strip()) >= 3
