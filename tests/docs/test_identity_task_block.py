"""The "In a task: ctx.identity" section of docs/identities.md runs as written: its
module saved as the page names it, its type pointed at a pool as the page says, run by a
worker against a local site that refuses one of the two identities: the refused one
cools down and the task is done by the other, uncharged."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from fleet.backends import open_backend
from fleet.core.automation import get_automation, unregister
from fleet.core.identities import parse_identity
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks, section
from tests.support.sites import serving
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "identities.md").read_text(encoding="utf-8")


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        refused = "Refused" in self.headers.get("User-Agent", "")
        body = json.dumps({"ok": not refused}).encode()
        self.send_response(403 if refused else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def site() -> Iterator[str]:
    with serving(_Site) as url:
        yield url


async def test_the_visitor_of_the_page_runs(site: str, tmp_path: Path) -> None:
    text = section(PAGE, "## In a task: ctx.identity")
    (block,) = [b for b in fenced_blocks(text) if b.lang == "python"]
    assert block.file_name == "visitor.py"
    (tmp_path / "visitor.py").write_text(block.text)
    assert "`fleet config set visitor identity_pool=shop`" in text
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("visitor")
        visitor = get_automation("visitor")
        assert visitor is not None
        b = await open_backend(f"sqlite:///{tmp_path / 'fleet.db'}")
        try:
            await b.identities.put(
                "shop",
                [
                    parse_identity({"id": "a-refused", "fingerprint": {"user_agent": "Refused/1"}}),
                    parse_identity({"id": "b-fine", "fingerprint": {"user_agent": "Fine/1"}}),
                ],
            )
            await push_config(b, "visitor", {"identity_pool": "shop"}, [])
            async with running_worker(b, [visitor]):
                (pushed,) = await b.queues.push(
                    "visitor", [make_push_request({"url": site}, max_attempts=1)]
                )

                async def done() -> bool:
                    return (await b.queues.state("visitor", pushed.task_id)).state == "done"

                await until(done, timeout=20, what="the visit done")
            (entry,) = await b.streams.read("visitor")
            assert entry.payload == {"url": site, "identity": "b-fine", "status": 200}
            refused = await b.identities.get("shop", "a-refused")
            assert refused is not None and refused.state == "cooling"
            assert refused.stats.last_reason == "blocked by generic"  # the classifier's 403
        finally:
            await b.close()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("visitor", None)
        unregister("visitor")
