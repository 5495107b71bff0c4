"""docs/errors.md runs as written: its Python block is a real automation, run by a real
worker (in this process) against a local site on a SQLite file a live master reads. Pages
without a price make one group ``no price on <url>`` with the last response's HTML as
its snapshot, sold-out pages the page's ``ctx.snapshot("sold out")`` group, priced pages
no group; the page's ``fleet errors`` lines print them."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from fleet.backends import open_backend
from fleet.cli import main
from fleet.core.catalog import catalog_entry
from tests.cli.test_task_command import db_url, live  # noqa: F401  (fixtures)
from tests.docs.blocks import fenced_blocks
from tests.master.conftest import ADMIN, LiveMaster
from tests.support.sites import QuietHandler, serving
from tests.worker.support import push, running_worker, wait_until

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
BROKEN, SOLD, PRICED = 12, 3, 2


class Shop(QuietHandler):
    def do_GET(self) -> None:
        kind = self.path.split("/")[1]
        inner = {
            "item": "<h1>A thing</h1>",
            "sold": "<h1>A thing</h1><p>sold out</p>",
            "ok": '<h1>A thing</h1><span class="price">9.50</span>',
        }[kind]
        body = f"<html><body>{inner}</body></html>".encode()
        self.answer(200, body, {"content-type": "text/html"})


def test_the_page_runs(live: LiveMaster, db_url: str) -> None:  # noqa: F811
    (python,) = [b.text for b in fenced_blocks(PAGE) if b.lang == "python"]
    scope: dict[str, Any] = {"__name__": "errors_page"}
    exec(compile(python, "errors.md", "exec"), scope)
    cls = scope["Shop"]
    t = cls.automation_type
    assert t == "shop"

    async def work(site: str) -> dict[str, Any]:
        async with await open_backend(db_url) as b:
            await b.catalog.put(t, catalog_entry(cls))
            urls = [f"{site}item/{i}?q={i * 31}" for i in range(BROKEN)]
            urls += [f"{site}sold/{i}" for i in range(SOLD)] + [
                f"{site}ok/{i}" for i in range(PRICED)
            ]
            await push(b, t, *[{"url": u} for u in urls], max_attempts=1)
            async with running_worker(b, [cls], "w-errors-page"):

                async def drained() -> bool:
                    d = await b.queues.depths(t)
                    return d.pending == 0 and d.processing == 0 and d.dead == BROKEN

                await wait_until(drained, timeout=30, what="the shop's tasks")
            page = await b.errors.page(t)
            out: dict[str, Any] = {"groups": {g.message: g for g in page.items}}
            for g in page.items:
                full = await b.errors.get(t, g.group)
                assert full is not None
                out[g.message + ":snaps"] = full.snapshots
                if full.snapshots:
                    snap = await b.errors.snapshot(t, g.group, full.snapshots[0].id)
                    assert snap is not None
                    out[g.message + ":html"] = (snap.html or b"").decode()
            return out

    with serving(Shop) as site:
        got = asyncio.run(work(site))
    groups = got["groups"]
    assert set(groups) == {"no price on <url>", "sold out"}
    broken, sold = groups["no price on <url>"], groups["sold out"]
    assert (broken.exc, broken.count, broken.location) == (
        "ValueError",
        BROKEN,
        "errors.md:run_one",
    )
    assert (sold.exc, sold.count) == ("snapshot", SOLD)
    assert 1 <= len(got["no price on <url>:snaps"]) <= 3
    assert "<h1>A thing</h1>" in got["no price on <url>:html"]
    assert "sold out" in got["sold out:html"] and got["sold out:snaps"][0].label == "sold out"

    lines = [
        line
        for b in fenced_blocks(PAGE)
        if b.lang == "bash"
        for line in b.text.splitlines()
        if line.startswith("fleet errors")
    ]
    assert len(lines) == 2, lines
    for line in lines:
        args = shlex.split(line.replace("3f9c2a61d04b7e85", broken.group))
        r = CliRunner().invoke(main, [*args[1:], "--url", live.url, "--token", ADMIN])
        assert r.exit_code == 0, (line, r.output)
        assert broken.group in r.output
    assert "ValueError: no price on" in r.output and "Traceback" in r.output
