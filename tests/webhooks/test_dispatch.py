"""The master's dispatcher (``WebhookService``) on a memory backend, no delivery worker:
each source's message becomes one queued delivery per subscription that wants it
(filtered by event, type and run; not for a subscription made after the event), logged
``pending``; the same event heard twice, or scanned again, queues nothing more. A worker
that dead-letters a task publishes it (``task.dead``), except for a delivery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from redis.crc import key_slot

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.backends.memory.store import drop_store
from fleet.backends.redis.keys import KeySpace
from fleet.core import BaseConfig, BatchAutomation, Context, Task
from fleet.core.access.router import DOMAINS_TOPIC
from fleet.core.identity import IDENTITIES_TOPIC, identity_event
from fleet.core.records import PushRequest, TaskBody
from fleet.core.webhooks import DELIVERY_TYPE, Hook
from fleet.master.services import webhook_dispatch
from fleet.master.services.webhook_dispatch import WebhookService, dispatch, monitor_changed
from fleet.webhooks.events import DEAD_TOPIC, Event, monitor_event, run_event
from fleet.worker.run_local import run_local
from tests.support.waits import until

TYPE = "shop"
SECRET = "whsec_" + "QUJD" * 8


def hook(hook_id: str, events: tuple[str, ...], created_at: float = 1.0, **kw: Any) -> Hook:
    return Hook(hook_id, "http://127.0.0.1:9/in", events, SECRET, created_at, **kw)


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    name = "webhook-dispatch"
    b = await open_backend(f"memory://{name}")
    try:
        yield b
    finally:
        await b.close()
        drop_store(name)


async def test_each_source_becomes_one_delivery_per_wanting_hook(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(webhook_dispatch.ENV_WORKER, "0")
    await backend.webhooks.put(hook("wh_all", ("run.completed", "run.paused", "task.dead",
                                               "identity.retired", "tier.changed")))  # fmt: skip
    await backend.webhooks.put(hook("wh_shop", ("run.completed", "task.dead"), types=("shop",)))
    await backend.webhooks.put(hook("wh_off", ("run.completed",), enabled=False))
    service = WebhookService(backend, check_seconds=0.05, scan_seconds=3600)
    service.start()
    try:
        await until(lambda: _scanned(service), timeout=10, what="the first scan")
        run = await backend.runs.create(types=(TYPE,))
        await backend.queues.push(TYPE, [PushRequest(TaskBody(id="t1", payload={}, run=run))])
        other = await backend.runs.create(types=("else",))
        await backend.queues.push("else", [PushRequest(TaskBody(id="t2", payload={}, run=other))])
        held = await backend.runs.create(types=("else",))
        await backend.queues.push("else", [PushRequest(TaskBody(id="t3", payload={}, run=held))])
        await backend.runs.pause(held, "budget")
        for t in (TYPE, "else"):
            (r,) = await backend.queues.reserve(t, k=1)
            await backend.queues.ack(t, [(r.body.id, r.token)])
        dead = {"type": TYPE, "task_id": "t9", "token": "tok", "attempt": 3, "error": "boom",
                "run": None, "at": 5.0}  # fmt: skip
        await backend.events.publish(DEAD_TOPIC, dead)
        await backend.events.publish(DEAD_TOPIC, dead)  # heard twice: one event
        await backend.events.publish(IDENTITIES_TOPIC, identity_event("p", "i1", "retired", "x"))
        await backend.events.publish(IDENTITIES_TOPIC, identity_event("p", "i2", "blocked", "x"))
        tier = {"type": TYPE, "domain": "a.test", "tier": "residential", "tier_index": 1,
                "change": "escalated", "kind": "blocked", "vendor": None}  # fmt: skip
        await backend.events.publish(DOMAINS_TOPIC, tier)

        async def logged() -> dict[str, list[str]] | None:
            found = {}
            for h in ("wh_all", "wh_shop", "wh_off"):
                found[h] = sorted(d.event_type for d in await backend.webhooks.deliveries(h))
            return found if len(found["wh_all"]) == 6 and len(found["wh_shop"]) == 2 else None

        found = await until(logged, timeout=10, what="the deliveries logged")
        assert found == {
            # the run of "else" ended too: wh_all hears it, wh_shop (types shop) does not
            "wh_all": [
                "identity.retired",
                "run.completed",
                "run.completed",
                "run.paused",
                "task.dead",
                "tier.changed",
            ],
            "wh_shop": ["run.completed", "task.dead"],
            "wh_off": [],
        }
        depths = await backend.queues.depths(DELIVERY_TYPE)
        assert depths.pending == 8
        # a scan now sees the two ended runs and the paused one again: nothing new
        service._seen.clear()
        assert await service.scan() == 3
        await asyncio.sleep(0.2)
        assert (await backend.queues.depths(DELIVERY_TYPE)).pending == 8
        for d in await backend.webhooks.deliveries("wh_all"):
            assert d.status == "pending" and d.event_id.startswith("evt_")
    finally:
        await service.stop()


async def _scanned(service: WebhookService) -> bool:
    return service.scans > 0


async def test_ids_are_stable_and_late_hooks_hear_nothing_earlier(backend: Backend) -> None:
    record = {"run_id": "r" * 32, "state": "done", "finished_at": 50.0, "by_type": {TYPE: {}}}
    first, again = run_event(record), run_event(dict(record))
    assert first is not None and again is not None and first.id == again.id
    cancelled = run_event({**record, "state": "cancelled"})
    assert cancelled is not None and cancelled.type == "run.cancelled" and cancelled.id != first.id
    assert run_event({**record, "state": "running"}) is None
    fired = monitor_event(record, {"monitor": "min_items", "state": "firing", "value": 0,
                                   "threshold": 1, "since": 40.0})  # fmt: skip
    assert fired is not None and fired.type == "monitor.firing" and fired.types == (TYPE,)
    assert monitor_event(record, {"monitor": "m", "state": "ok", "since": 1.0}) is None
    await backend.webhooks.put(hook("wh_late", ("run.completed",), created_at=60.0))
    assert await dispatch(backend, first) == 0  # made after the run ended
    await backend.webhooks.put(hook("wh_early", ("run.completed",), created_at=10.0, runs=("x",)))
    assert await dispatch(backend, first) == 0  # another run
    await backend.webhooks.put(
        hook("wh_run", ("run.completed",), created_at=10.0, runs=("r" * 32,))
    )
    assert await dispatch(backend, first) == 1
    assert await dispatch(backend, first) == 0  # the idempotent push: queued once
    (task,) = await backend.queues.reserve(DELIVERY_TYPE, k=5)
    assert task.body.id == f"{first.id}.wh_run"
    assert task.body.payload == {"hook": "wh_run", "event": first.to_dict()}
    assert isinstance(first, Event)


class Fails(BaseModel):
    n: int


class AlwaysFails(BatchAutomation[BaseConfig]):
    automation_type = "always-fails"
    Config = BaseConfig
    TaskPayload = Fails

    async def run_one(self, task: Task[Fails], ctx: Context[BaseConfig]) -> None:
        raise RuntimeError(f"page {task.payload.n} broke")


async def test_a_worker_publishes_the_tasks_it_dead_letters() -> None:
    url = "memory://webhook-dead"
    listener = await open_backend(url)
    try:
        sub = await listener.events.subscribe(DEAD_TOPIC)
        code = await run_local(
            AlwaysFails, [{"n": 7}], backend_url=url, config={"max_attempts": 1}, signals=False
        )
        assert code == 1
        topic, message = await asyncio.wait_for(sub.__anext__(), 10)
        await sub.aclose()
    finally:
        await listener.close()
        drop_store("webhook-dead")
    assert topic == DEAD_TOPIC
    assert message["type"] == "always-fails" and message["attempt"] == 1
    assert "page 7 broke" in message["error"] and message["token"]


def test_the_webhook_keys_share_one_slot_on_a_cluster() -> None:
    ks = KeySpace("acme", cluster=True)
    names = [*ks.webhook_keys("wh_1"), *ks.webhook_keys("wh_2")]
    assert {key_slot(n.encode()) for n in names} == {key_slot(b"webhooks")}
    assert KeySpace().webhook_keys("wh_1") == [
        "fleet:webhooks",
        "fleet:webhooks:wh_1:log",
        "fleet:webhooks:wh_1:order",
    ]


async def test_a_monitors_change_is_dispatched(backend: Backend) -> None:
    await backend.webhooks.put(hook("wh_mon", ("monitor.firing", "monitor.resolved")))
    run = await backend.runs.create(types=(TYPE,))
    record = await backend.runs.get(run)
    assert record is not None
    state = {"monitor": "min_items", "state": "firing", "value": 0, "threshold": 5, "since": 9.0}
    await monitor_changed(backend, record, state)
    await monitor_changed(backend, record, state)  # the next sweep's: the same event
    await monitor_changed(backend, record, {**state, "state": "resolved", "since": 12.0})
    found = await backend.webhooks.deliveries("wh_mon")
    assert sorted(d.event_type for d in found) == ["monitor.firing", "monitor.resolved"]


async def test_a_budgets_pause_is_one_event_with_the_scans(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lua/meters.lua publishes a budget's pause with the run id only, its time rounded by
    # cjson: the event is the one the scan makes from the stored record, queued once.
    monkeypatch.setenv(webhook_dispatch.ENV_WORKER, "0")
    b = await open_backend(redis_url)
    service = WebhookService(b, check_seconds=0.05, scan_seconds=3600)
    try:
        await b.webhooks.put(hook("wh_p", ("run.paused",)))
        run = await b.runs.create(types=(TYPE,))
        await b.queues.push(TYPE, [PushRequest(TaskBody(id="p1", payload={}, run=run))])
        record = await b.runs.pause(run, "spent")
        assert record is not None and record.paused_at is not None
        service.start()
        await until(lambda: _scanned(service), timeout=10, what="the first scan")
        rounded = float(f"{record.paused_at:.14g}") + 1e-4
        message = {"event": "paused", "run_id": run, "state": "paused",
                   "paused_reason": "spent", "paused_at": rounded}  # fmt: skip
        await b.events.publish("runs", message)
        await asyncio.sleep(0.3)
        (entry,) = await b.webhooks.deliveries("wh_p")
        assert entry.event_type == "run.paused"
        assert (await b.queues.depths(DELIVERY_TYPE)).pending == 1
    finally:
        await service.stop()
        await b.close()
