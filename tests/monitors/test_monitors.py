"""Monitors of runs on every backend, with a real worker: a parser that starts returning
``None`` for a field mid-run fires ``max_null_rate`` live (the run still running); an
empty run fires ``min_items`` when it ends; a monitor that stops firing is
``resolved``; the run's record shows them; bad monitors are refused (422)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import BaseModel

from fleet.backends.base import Backend
from fleet.core import BaseConfig, BatchAutomation
from fleet.core.catalog import describe
from fleet.core.errors import InvalidInput
from fleet.core.submission import make_push_request
from fleet.master.services import monitors as run_monitors
from fleet.master.services import runs
from fleet.master.services.config_ops import patch_type_config
from tests.worker.support import running_worker, wait_until

pytestmark = pytest.mark.timeout(60)


class Item(BaseModel):
    n: int


class Priced(BaseModel):
    n: int
    price: float | None


class Parser(BatchAutomation[BaseConfig]):
    """Prices from 30 on are lost: the site changed its markup."""

    Config = BaseConfig
    TaskPayload = Item
    Output = Priced

    async def run_one(self, task: Any, ctx: Any) -> None:
        n = task.payload.n
        if n >= 0:
            await ctx.emit(Priced(n=n, price=None if n >= 30 else 9.5))


Parser.automation_type = "priced"


def registered(backend: Backend) -> Any:
    async def check() -> bool:
        return await backend.catalog.get("priced") is not None

    return check


async def _record(backend: Backend, run_id: str) -> dict[str, Any]:
    return await runs.get(backend, run_id)


async def test_a_field_gone_null_fires_live(backend: Backend) -> None:
    async with running_worker(backend, [Parser], "w-mon"):
        await wait_until(registered(backend), what="the type registered")
        monitors = {"max_null_rate": {"price": 0.2}, "min_items": 10, "max_error_rate": 0.1}
        created = await runs.create(backend, "prices", None, ["priced"], monitors=monitors)
        run_id = created["run_id"]
        # 60 pages, and one an hour out: the run stays open.
        tasks = [make_push_request({"n": n}, run=run_id) for n in range(60)]
        tasks.append(make_push_request({"n": -1}, run=run_id, delay_seconds=3600))
        await backend.queues.push("priced", tasks)

        async def outputs() -> bool:
            record = await _record(backend, run_id)
            return bool((record["meters"] or {}).get("outputs", 0) >= 60)

        await wait_until(outputs, timeout=20, what="60 items metered")
        await run_monitors.tick(backend)
        record = await _record(backend, run_id)
        assert record["state"] == "running"
        by_name = {m["monitor"]: m for m in record["monitors"]}
        assert by_name["max_null_rate:price"]["state"] == "firing"
        assert by_name["max_null_rate:price"]["value"] == pytest.approx(0.5)
        assert by_name["max_error_rate"]["state"] == "ok"
        assert by_name["min_items"]["state"] == "ok"  # judged when the run ends
        assert record["meters"]["outputs_valid"] == 60
        assert record["meters"]["nulls:price"] == 30


async def test_an_empty_run_fires_min_items_when_it_ends(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker has stopped (its meters sent): the run is judged without waiting.
    monkeypatch.setattr(run_monitors, "SETTLE_SECONDS", 0.0)
    async with running_worker(backend, [Parser], "w-mon"):
        await wait_until(registered(backend), what="the type registered")
        created = await runs.create(backend, "empty", None, ["priced"], monitors={"min_items": 1})
        run_id = created["run_id"]
        await backend.queues.push("priced", [make_push_request({"n": -1}, run=run_id)] * 1)

        async def ended() -> bool:
            run = await backend.runs.get(run_id)
            return run is not None and run.state == "done"

        await wait_until(ended, timeout=20, what="the run's end")
    await run_monitors.tick(backend)
    record = await _record(backend, run_id)
    (m,) = record["monitors"]
    assert (m["monitor"], m["state"], m["value"], m["threshold"]) == ("min_items", "firing", 0, 1)


async def test_bad_monitors_are_refused(backend: Backend) -> None:
    async with running_worker(backend, [Parser], "w-mon"):
        await wait_until(registered(backend), what="the type registered")
        for monitors, loc in (
            ({"max_null_rate": {"cost": 0.1}}, ["body", "monitors", "max_null_rate", "cost"]),
            ({"max_error_rate": 2}, ["body", "monitors", "max_error_rate"]),
            ({"min_itemz": 1}, ["body", "monitors", "min_itemz"]),
        ):
            with pytest.raises(InvalidInput) as e:
                await runs.create(backend, "bad", None, ["priced"], monitors=monitors)
            assert e.value.errors[0]["loc"] == loc, e.value.errors
        with pytest.raises(InvalidInput) as e:
            await patch_type_config(
                backend, "priced", describe(Parser), {"monitors": {"max_null_rate": {"cost": 0.1}}}
            )
        assert "'cost'" in e.value.errors[0]["msg"] and "price" in e.value.errors[0]["msg"]
        assert (await runs.page(backend, None, 10))["runs"] == []  # nothing was created


async def test_type_monitors_apply_to_its_runs(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_monitors, "SETTLE_SECONDS", 0.0)
    async with running_worker(backend, [Parser], "w-mon"):
        await wait_until(registered(backend), what="the type registered")
        await patch_type_config(backend, "priced", describe(Parser), {"monitors": {"min_items": 5}})
        run_id = (await runs.create(backend, "typed", None, ["priced"]))["run_id"]
        await backend.queues.push("priced", [make_push_request({"n": 1}, run=run_id)])

        async def ended() -> bool:
            run = await backend.runs.get(run_id)
            return run is not None and run.state == "done"

        await wait_until(ended, timeout=20, what="the run's end")
    started = time.time()
    record = await _record(backend, run_id)
    (m,) = record["monitors"]
    assert (m["monitor"], m["state"], m["value"]) == ("min_items", "firing", 1)
    assert m["since"] >= started - 1
