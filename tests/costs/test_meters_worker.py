"""Meters in a running worker (issue 45, items 1 and 2): what the tasks of a run
download through ``ctx.http()`` is metered per run, type, domain and hour, by tier,
with ``run_one`` seconds and attempts (a retried attempt's bytes count: they were
spent), the plugin's own units (``ctx.meter``), and priced (``spend``) by the tier's
``cost_per_gb`` and the type's ``costs``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from fleet.backends.base import Backend
from fleet.core.meters import domain_scope, hour_scope, run_scope, type_scope
from fleet.core.submission import make_push_request
from tests.costs.meter_plugin import CostFetch
from tests.support.sites import QuietHandler, serving
from tests.support.sqlite_file import backend
from tests.support.waits import until
from tests.worker.support import push_config, running_worker

__all__ = ["backend"]  # the fixture this module reuses

TYPE = "cost-fetch"
BODY = b"x" * 100_000


class Site(QuietHandler):
    def do_GET(self) -> None:
        self.answer(200, BODY, {"content-type": "application/octet-stream"})


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving(Site) as url:
        yield url.rstrip("/")


async def test_a_runs_downloads_are_metered_and_priced(site: str, backend: Backend) -> None:
    config = {
        "slots": 2,
        "proxy_tiers": [{"name": "direct", "direct": True, "cost_per_gb": 10.0}],
        "costs": {"per_unit": {"api_credits": 0.5}},
    }
    await push_config(backend, TYPE, config, [])
    run = await backend.runs.create(name="meters")
    tasks = [
        make_push_request({"url": f"{site}/p/{n}", "credits": 2, "fail": n == 0}, run=run)
        for n in range(5)
    ]
    started = time.time()
    async with running_worker(backend, [CostFetch]):
        await backend.queues.push(TYPE, tasks)

        async def metered() -> dict[str, float] | None:
            got = (await backend.meters.get([run_scope(run)])).get(run_scope(run), {})
            return got if got.get("attempts", 0) >= 6 else None

        meters = await until(metered, timeout=20, what="the run's six attempts metered")
    host = site.split("//")[1].split(":")[0]
    # Six attempts (the first one of task 0 failed after its download: it counts).
    assert meters["attempts"] == 6 and meters["requests"] == 6
    assert meters["requests:direct"] == 6
    received = meters["bytes_received"]
    assert 6 * len(BODY) < received < 6 * (len(BODY) + 400)  # bodies and their headers
    assert meters["bytes:direct"] == received + meters["bytes_sent"]
    assert meters["api_credits"] == 6 * 2
    assert meters["run_seconds"] > 0
    spend = meters["bytes:direct"] / 1e9 * 10.0 + 12 * 0.5
    assert meters["spend"] == pytest.approx(spend)
    scopes = [type_scope(TYPE), domain_scope(TYPE, host), hour_scope(TYPE, started)]
    got = await backend.meters.get(scopes)
    assert got[type_scope(TYPE)]["attempts"] == 6
    assert got[domain_scope(TYPE, host)]["bytes_received"] == received  # traffic by domain
    assert "attempts" not in got[domain_scope(TYPE, host)]
    assert got[hour_scope(TYPE, started)]["requests"] == 6
