"""Webhooks (``backend.webhooks``): subscriptions stored and read back, the delivery
log's rule (a final entry stays, attempts never go down, the newest entries kept), a
delete taking the log with it; on every backend."""

from __future__ import annotations

from fleet.backends.base import Backend
from fleet.core.webhooks import Delivery, Hook


def hook(hook_id: str = "wh_1", created_at: float = 100.0, **fields: object) -> Hook:
    base: dict[str, object] = {
        "id": hook_id,
        "url": "http://127.0.0.1:9/in",
        "events": ("run.completed",),
        "secret": "whsec_" + "A" * 32,
        "created_at": created_at,
    }
    base.update(fields)
    return Hook(**base)  # type: ignore[arg-type]


def entry(event: str, status: str, attempts: int = 0, at: float = 10.0, **more: object) -> Delivery:
    return Delivery(event, "run.completed", status, attempts, created_at=at, updated_at=at, **more)  # type: ignore[arg-type]


async def test_subscriptions_are_stored_listed_and_deleted(backend: Backend) -> None:
    hooks = backend.webhooks
    assert await hooks.all() == [] and await hooks.get("wh_1") is None
    first = hook("wh_b", 100.0, types=("t1",), runs=None, description="d")
    second = hook("wh_a", 200.0, runs=("r1", "r2"), enabled=False)
    await hooks.put(second)
    await hooks.put(first)
    assert await hooks.get("wh_b") == first
    assert [h.id for h in await hooks.all()] == ["wh_b", "wh_a"]  # oldest first
    changed = hook("wh_b", 100.0, events=("task.dead", "run.paused"))
    await hooks.put(changed)
    assert await hooks.get("wh_b") == changed
    await hooks.log("wh_b", entry("evt_1", "pending"))
    assert await hooks.delete("wh_b") is True
    assert await hooks.delete("wh_b") is False
    assert await hooks.get("wh_b") is None
    await hooks.put(changed)  # the same id again: its old log is gone
    assert await hooks.deliveries("wh_b") == []


async def test_a_log_update_follows_the_rule(backend: Backend) -> None:
    hooks = backend.webhooks
    assert await hooks.log("wh_x", entry("evt_1", "pending")) is None  # unknown: nothing
    await hooks.put(hook("wh_1"))
    await hooks.log("wh_1", entry("evt_1", "pending", 0, 10.0))
    failed = await hooks.log(
        "wh_1", entry("evt_1", "failed", 1, 11.0, http_status=500, error="HTTP 500")
    )
    assert failed is not None
    assert (failed.status, failed.attempts, failed.http_status) == ("failed", 1, 500)
    assert failed.created_at == 10.0 and failed.updated_at == 11.0
    done = await hooks.log("wh_1", entry("evt_1", "delivered", 3, 12.5, http_status=200))
    assert done is not None and (done.status, done.attempts, done.error) == ("delivered", 3, None)
    # a slower attempt that failed after the delivery changes only the attempts
    late = await hooks.log("wh_1", entry("evt_1", "failed", 4, 13.0, http_status=502))
    assert late is not None and (late.status, late.attempts, late.http_status) == (
        "delivered",
        4,
        200,
    )
    # queued again (a repeat): nothing changes
    again = await hooks.log("wh_1", entry("evt_1", "pending", 0, 20.0))
    assert again == late
    assert await hooks.deliveries("wh_1") == [late]


async def test_the_log_keeps_the_newest_entries(backend: Backend) -> None:
    hooks = backend.webhooks
    await hooks.put(hook("wh_1"))
    for i in range(7):
        await hooks.log("wh_1", entry(f"evt_{i}", "pending", at=100.0 + i), keep=5)
    found = await hooks.deliveries("wh_1", limit=50)
    assert [d.event_id for d in found] == ["evt_6", "evt_5", "evt_4", "evt_3", "evt_2"]
    page = await hooks.deliveries("wh_1", offset=2, limit=2)
    assert [d.event_id for d in page] == ["evt_4", "evt_3"]
    # an update of a kept entry trims nothing
    await hooks.log("wh_1", entry("evt_2", "dead", 5, 200.0), keep=5)
    assert len(await hooks.deliveries("wh_1")) == 5
