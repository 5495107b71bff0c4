"""The later sections of docs/blocks.md run as written: the task's ``fetch`` meets a
Cloudflare challenge through ``ctx.http()`` and prints what its comments say; the tiers
config validates; the solver's entry point is the example's; and the complete example,
saved as ``shop.py`` with its config (its proxy a local one), climbs a shop that
refuses the direct exit to ``datacenter`` under a real worker, every page fetched and
no task charged."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleet.backends.base import Backend
from fleet.core import BaseConfig, Context
from fleet.core.automation import get_automation, unregister
from fleet.core.blocks import Blocked
from fleet.core.submission import make_push_request
from fleet.dev.demo_proxies import DemoProxy, source_available
from tests.docs.blocks import fenced_blocks, section
from tests.support.sites import QuietHandler
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "blocks.md").read_text(encoding="utf-8")
EXIT = "127.0.0.2"


class Shop(QuietHandler):
    """Refuses the direct exit (a 403), serves the proxy's; ``/cf`` is a Cloudflare
    challenge for everyone."""

    def do_GET(self) -> None:
        if self.path == "/cf":
            body = b"<html><title>Just a moment...</title></html>"
            headers = {"content-type": "text/html", "cf-mitigated": "challenge"}
            self.answer(403, body, {**headers, "server": "cloudflare"})
        elif self.client_address[0] != EXIT:
            self.answer(403, b"<h1>Forbidden</h1>", {"content-type": "text/html"})
        else:
            self.answer(200, b"<html><h1>A product</h1></html>", {"content-type": "text/html"})


@pytest.fixture
def shop() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def blocks(heading: str, lang: str) -> list[str]:
    return [b.text for b in fenced_blocks(section(PAGE, heading)) if b.lang == lang]


async def test_a_task_meets_a_challenge_as_the_page_shows(shop: str, backend: Backend) -> None:
    (code,) = blocks("## In a task", "python")
    scope: dict[str, Any] = {"__name__": "docs_blocks_task"}
    exec(compile(code, "docs/blocks.md", "exec"), scope)
    ctx: Context[BaseConfig] = Context(
        backend=backend, automation_type="docs-shop", config=lambda: BaseConfig()
    )
    printed = io.StringIO()
    async with ctx.http() as http:
        with contextlib.redirect_stdout(printed), pytest.raises(Blocked) as met:
            await scope["fetch"](http, f"{shop}/cf")
    first, second = printed.getvalue().splitlines()
    assert first == "challenge cloudflare"  # what the comment says
    assert second == "127.0.0.1 None None True"
    assert met.value.challenge is not None and met.value.challenge.client is http
    await ctx.access.flush()
    state = await backend.domains.get("docs-shop", "127.0.0.1")
    assert state is not None and state.count("challenge", 0) == 1


def test_the_tiers_config_validates_and_the_solver_is_the_examples() -> None:
    (tiers,) = blocks("## Proxy tiers per domain", "json")
    config = BaseConfig.model_validate(json.loads(tiers))
    assert [t.name for t in config.proxy_tiers] == ["direct", "datacenter", "residential"]
    (toml,) = blocks("## Solvers", "toml")
    points = tomllib.loads(toml)["project"]["entry-points"]["fleet.solvers"]
    example = tomllib.loads((ROOT / "examples/cf-scraper/pyproject.toml").read_text())
    assert points == example["project"]["entry-points"]["fleet.solvers"]


async def test_the_complete_example_climbs_to_the_proxy_the_shop_lets_through(
    shop: str, backend: Backend, tmp_path: Path
) -> None:
    if not source_available(EXIT):
        pytest.fail("this machine cannot open connections from 127.0.0.2")
    (code,) = blocks("## A complete example", "python")
    (config_text,) = blocks("## A complete example", "json")
    (tmp_path / "shop.py").write_text(code)
    proxy = DemoProxy(EXIT)
    await proxy.start()
    sys.path.insert(0, str(tmp_path))
    try:
        __import__("shop")
        cls = get_automation("shop-pages")
        assert cls is not None
        config = json.loads(config_text.replace("http://127.0.0.1:8899", proxy.url))
        await push_config(backend, "shop-pages", config, [])
        pages = [make_push_request({"url": f"{shop}/p/{n}"}, max_attempts=1) for n in range(12)]
        async with running_worker(backend, [cls]):
            await backend.queues.push("shop-pages", pages)

            async def fetched() -> bool:
                return len(await backend.streams.read("shop-pages", n=100)) >= 12

            await until(fetched, timeout=30, what="12 pages fetched")
        out = [e.payload for e in await backend.streams.read("shop-pages", n=100)]
        assert {p["status"] for p in out} == {200} and len(out) == 12
        assert (await backend.queues.depths("shop-pages")).dead == 0  # no attempt charged
        state = await backend.domains.get("shop-pages", "127.0.0.1")
        assert state is not None and state.tier == 1 and state.count("blocked", 0) >= 3
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop", None)
        unregister("shop-pages")
        await proxy.stop()
