"""Conformance of the FleetState capability: the catalog, the worker registry and
config with generations; and the backend's lifecycle (ping)."""

from __future__ import annotations

import asyncio

from fleet.backends.base import Backend

HW = {"host": "h1", "cpu_count": 2, "memory_bytes": 1 << 30}


async def test_register_and_get(backend: Backend) -> None:
    assert await backend.workers.get("t", "w1") is None
    await backend.workers.register("t", "w1", HW)
    rec = await backend.workers.get("t", "w1")
    assert rec is not None
    assert (rec.automation_type, rec.worker_id, rec.hardware) == ("t", "w1", HW)
    assert (rec.config, rec.gen, rec.stats) == (None, 0, None)
    assert rec.state == {}
    assert rec.last_seen is None


async def test_state_merges_fields(backend: Backend) -> None:
    await backend.workers.register("t", "w1", HW)
    await backend.workers.set_state("t", "w1", {"state": "IDLE", "last_seen": "100.5"})
    await backend.workers.set_state("t", "w1", {"state": "RUNNING", "slots": "4"})
    rec = await backend.workers.get("t", "w1")
    assert rec is not None
    assert rec.state == {"state": "RUNNING", "last_seen": "100.5", "slots": "4"}
    assert rec.last_seen == 100.5


async def test_stats_replaced(backend: Backend) -> None:
    await backend.workers.register("t", "w1", HW)
    await backend.workers.put_stats("t", "w1", {"ts": 1, "slots": {"busy": 1, "total": 2}})
    await backend.workers.put_stats("t", "w1", {"ts": 2})
    rec = await backend.workers.get("t", "w1")
    assert rec is not None and rec.stats == {"ts": 2}


async def test_ids_and_all_sorted(backend: Backend) -> None:
    await backend.workers.register("t", "w2", HW)
    await backend.workers.register("t", "w1", HW)
    await backend.workers.register("u", "w1", HW)
    await backend.workers.register("t", "w1", {"host": "again"})  # idempotent
    assert await backend.workers.ids("t") == ["w1", "w2"]
    assert await backend.workers.ids("u") == ["w1"]
    assert await backend.workers.ids("none") == []
    assert await backend.workers.all() == [("t", "w1"), ("t", "w2"), ("u", "w1")]
    rec = await backend.workers.get("t", "w1")
    assert rec is not None and rec.hardware == {"host": "again"}


async def test_forget(backend: Backend) -> None:
    await backend.workers.register("t", "w1", HW)
    await backend.workers.register("t", "w2", HW)
    await backend.workers.set_state("t", "w1", {"state": "IDLE"})
    await backend.workers.put_stats("t", "w1", {"ts": 1})
    await backend.configs.put_desired("t", "w1", {"slots": 1}, 1)
    await backend.workers.forget("t", "w1")
    assert await backend.workers.get("t", "w1") is None
    assert await backend.workers.ids("t") == ["w2"]
    assert await backend.workers.all() == [("t", "w2")]
    assert await backend.configs.desired("t", "w1") == (None, 0)
    # Registering again starts from scratch.
    await backend.workers.register("t", "w1", HW)
    rec = await backend.workers.get("t", "w1")
    assert rec is not None and rec.state == {} and rec.gen == 0


async def test_type_wide_config_and_override(backend: Backend) -> None:
    assert await backend.configs.get("t") == {}
    assert await backend.configs.get("t", "w1") == {}
    await backend.configs.set("t", {"slots": 4, "extra": {"a": 1}})
    await backend.configs.set("t", {"slots": 8}, worker_id="w1")
    assert await backend.configs.get("t") == {"slots": 4, "extra": {"a": 1}}
    assert await backend.configs.get("t", "w1") == {"slots": 8}
    assert await backend.configs.get("t", "w2") == {}
    await backend.configs.set("t", {"enabled": False})
    assert await backend.configs.get("t") == {"enabled": False}  # replaced, not merged
    assert await backend.configs.get("u") == {}


async def test_next_generation_is_monotonic_per_type(backend: Backend) -> None:
    assert [await backend.configs.next_generation("t") for _ in range(3)] == [1, 2, 3]
    assert await backend.configs.next_generation("u") == 1


async def test_next_generation_unique_under_concurrency(backend: Backend) -> None:
    gens = await asyncio.gather(*(backend.configs.next_generation("t") for _ in range(30)))
    assert sorted(gens) == list(range(1, 31))


async def test_worker_config_put_only_with_higher_gen(backend: Backend) -> None:
    assert await backend.configs.desired("t", "w1") == (None, 0)
    assert await backend.configs.put_desired("t", "w1", {"slots": 2}, 5)
    assert await backend.configs.desired("t", "w1") == ({"slots": 2}, 5)
    assert not await backend.configs.put_desired("t", "w1", {"slots": 3}, 5)
    assert not await backend.configs.put_desired("t", "w1", {"slots": 3}, 4)
    assert await backend.configs.desired("t", "w1") == ({"slots": 2}, 5)
    assert await backend.configs.put_desired("t", "w1", {"slots": 9}, 6)
    await backend.workers.register("t", "w1", HW)
    rec = await backend.workers.get("t", "w1")
    assert rec is not None and (rec.config, rec.gen) == ({"slots": 9}, 6)


async def test_worker_config_put_races_keep_highest(backend: Backend) -> None:
    results = await asyncio.gather(
        *(backend.configs.put_desired("t", "w1", {"g": g}, g) for g in (3, 1, 7, 2, 7, 5))
    )
    assert any(results)
    assert await backend.configs.desired("t", "w1") == ({"g": 7}, 7)


# ------------------------------------------------------------ catalog


async def test_catalog(backend: Backend) -> None:
    assert await backend.catalog.get("t") is None
    assert await backend.catalog.all() == {}
    entry = {"config": {"type": "object"}, "output": None, "task_payload": {"x": [1]}}
    await backend.catalog.put("t", entry)
    await backend.catalog.put("u", {"config": {}})
    assert await backend.catalog.get("t") == entry
    assert await backend.catalog.all() == {"t": entry, "u": {"config": {}}}
    await backend.catalog.put("u", {"config": {"v": 2}})
    assert await backend.catalog.get("u") == {"config": {"v": 2}}
    await backend.catalog.delete("t")
    assert await backend.catalog.get("t") is None
    assert list(await backend.catalog.all()) == ["u"]


async def test_ping(backend: Backend) -> None:
    assert await backend.ping() is True


async def test_returned_values_are_copies(backend: Backend) -> None:
    await backend.catalog.put("t", {"list": [1]})
    got = await backend.catalog.get("t")
    assert got is not None
    got["list"].append(2)
    assert await backend.catalog.get("t") == {"list": [1]}


async def test_next_generation_floor_keeps_generations_from_going_backwards(
    backend: Backend,
) -> None:
    assert await backend.configs.next_generation("t") == 1
    # The backend lost its data while a worker holds generation 7: the next is above it.
    assert await backend.configs.next_generation("t", floor=7) == 8
    assert await backend.configs.next_generation("t", floor=3) == 9  # a lower floor changes nothing
    assert await backend.configs.next_generation("u", floor=5) == 6  # a counter that did not exist
    assert await backend.configs.next_generation("t") == 10
