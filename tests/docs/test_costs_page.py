"""docs/costs.md runs as written: its config validates (the tiers' and the ``costs``
prices), and its task, saved as ``prices.py``, run by a worker against a local API,
meters its requests, bytes and ``api_credits`` and prices them as the page says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fleet.backends.base import Backend
from fleet.core import BaseConfig
from fleet.core.automation import get_automation, unregister
from fleet.core.meters import type_scope
from fleet.core.submission import make_push_request
from tests.docs.blocks import fenced_blocks
from tests.support.sites import QuietHandler, serving
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "costs.md").read_text(encoding="utf-8")


class Api(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, b'{"price": 12.5}', {"content-type": "application/json"})


def test_the_prices_config_validates() -> None:
    block, daily = [b for b in fenced_blocks(PAGE) if b.lang == "json"]
    budget = BaseConfig.model_validate(json.loads(daily.text)).daily_budget
    assert budget == {"bytes:residential": 20e9, "spend": 100.0}
    config = BaseConfig.model_validate(json.loads(block.text))
    assert config.proxy_tiers[1].cost_per_gb == 6.0
    assert config.costs.per_solve["*"] == 0.001 and config.costs.per_unit["api_credits"] == 0.01


async def test_the_task_meters_what_it_spends(backend: Backend, tmp_path: Path) -> None:
    (block,) = [b for b in fenced_blocks(PAGE) if b.lang == "python"]
    assert block.file_name == "prices.py"
    (tmp_path / "prices.py").write_text(block.text)
    sys.path.insert(0, str(tmp_path))
    try:
        __import__("prices")
        cls = get_automation("price-lookup")
        assert cls is not None
        await push_config(
            backend, "price-lookup", {"costs": {"per_unit": {"api_credits": 0.01}}}, []
        )
        with serving(Api) as url:
            async with running_worker(backend, [cls]):
                await backend.queues.push(
                    "price-lookup", [make_push_request({"url": f"{url}sku/{n}"}) for n in range(3)]
                )

                async def metered() -> dict[str, float] | None:
                    got = (await backend.meters.get([type_scope("price-lookup")])).get(
                        type_scope("price-lookup"), {}
                    )
                    return got if got.get("attempts", 0) >= 3 else None

                meters = await until(metered, timeout=20, what="three lookups metered")
        assert meters["requests"] == 3 and meters["requests:default"] == 3
        assert meters["api_credits"] == 3 and meters["spend"] == pytest.approx(0.03)
        assert meters["bytes_received"] > 3 * len(b'{"price": 12.5}')
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("prices", None)
        unregister("price-lookup")
