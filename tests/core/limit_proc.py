"""Child of the two-process ``ctx.limit`` test: ``python -m tests.core.limit_proc URL OUT N``.

Opens the backend, prints ``ready``, waits for a line on stdin, then makes N calls
under ``Limit(key "proc-limit", concurrency=1)`` and writes ``start end`` of each
(wall-clock seconds, taken inside the block) to OUT.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from fleet.backends import open_backend
from fleet.core.limit import Limit


async def main(url: str, n: int) -> list[str]:
    backend = await open_backend(url)
    calls: list[str] = []
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for _ in range(n):
            async with Limit(backend.limits, "proc-limit", concurrency=1, timeout=20):
                start = time.time()
                await asyncio.sleep(0.03)
                end = time.time()
            calls.append(f"{start!r} {end!r}\n")
            await asyncio.sleep(0.01)  # a gap, so the other process gets its turns
    finally:
        await backend.close()
    return calls


if __name__ == "__main__":
    lines = asyncio.run(main(sys.argv[1], int(sys.argv[3])))
    Path(sys.argv[2]).write_text("".join(lines), encoding="utf-8")
