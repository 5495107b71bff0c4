"""Conformance: the schedule store — put/get/list/delete, the due index, compare
and set, unreadable records affecting only themselves, purge_type."""

from __future__ import annotations

import pytest

from fleet.backends.base import Backend
from fleet.core.capabilities.schedules import UnreadableSchedule
from fleet.core.schedule import ScheduleRecord, new_record

from .helpers import TYPE


def rec(sid: str, next_run: float, *, enabled: bool = True, type_: str = TYPE) -> ScheduleRecord:
    r = new_record(type_, sid, {"every_seconds": 60, "payload": {"n": 1}, "enabled": enabled})
    return r.evolve(next_run=next_run)


async def test_put_get_list_delete(backend: Backend) -> None:
    a, b = rec("a", 100.0), rec("b", 200.0)
    await backend.schedules.put(b)
    await backend.schedules.put(a)
    assert await backend.schedules.get(TYPE, "a") == a
    assert await backend.schedules.get(TYPE, "nope") is None
    assert [r.id for r in await backend.schedules.listing(TYPE)] == ["a", "b"]
    assert await backend.schedules.listing("other-type") == []
    assert await backend.schedules.delete(TYPE, "a")
    assert not await backend.schedules.delete(TYPE, "a")
    assert [r.id for r in await backend.schedules.listing(TYPE)] == ["b"]


async def test_due_index_across_types_earliest_first(backend: Backend) -> None:
    await backend.schedules.put(rec("late", 300.0))
    await backend.schedules.put(rec("early", 100.0, type_="other"))
    await backend.schedules.put(rec("mid", 200.0))
    await backend.schedules.put(rec("off", 50.0, enabled=False))
    assert await backend.schedules.next_due() == 100.0
    due = await backend.schedules.due(250.0)
    assert [(r.automation_type, r.id) for r in due] == [("other", "early"), (TYPE, "mid")]
    assert [r.id for r in await backend.schedules.due(1000.0, limit=1)] == ["early"]
    # Re-indexing moves it; deleting drops it.
    await backend.schedules.put(rec("mid", 400.0))
    assert [r.id for r in await backend.schedules.due(350.0)] == ["early", "late"]
    assert await backend.schedules.delete("other", "early")
    assert await backend.schedules.next_due() == 300.0


async def test_swap_is_compare_and_set(backend: Backend) -> None:
    first = rec("s", 100.0)
    await backend.schedules.put(first)
    moved = first.evolve(next_run=160.0, last_run=100.0, last_task_id="t1")
    assert await backend.schedules.swap(first, moved)
    assert not await backend.schedules.swap(first, first.evolve(next_run=999.0))  # stale
    assert await backend.schedules.get(TYPE, "s") == moved
    assert await backend.schedules.next_due() == 160.0
    paused = moved.evolve(definition={**moved.definition, "enabled": False})
    assert await backend.schedules.swap(moved, paused)
    assert await backend.schedules.next_due() is None
    assert await backend.schedules.due(10_000.0) == []


async def test_an_unreadable_record_affects_only_itself(backend: Backend) -> None:
    await backend.schedules.put(rec("good", 100.0))
    await backend.schedules.put_raw(TYPE, "bad", '{"id": "bad", "next_run": "soon"}', 50.0)
    await backend.schedules.put_raw(TYPE, "worse", "not json", 60.0)
    listed = await backend.schedules.listing(TYPE)
    assert [type(x).__name__ for x in listed] == [
        "UnreadableSchedule",
        "ScheduleRecord",
        "UnreadableSchedule",
    ]
    assert isinstance(listed[0], UnreadableSchedule) and listed[0].id == "bad"
    # The firer gets the good one and takes the bad ones out of the due index.
    assert [r.id for r in await backend.schedules.due(1000.0)] == ["good"]
    assert await backend.schedules.next_due() == 100.0
    with pytest.raises(ValueError, match="cannot be read"):
        await backend.schedules.get(TYPE, "worse")
    assert await backend.schedules.delete(TYPE, "worse")


async def test_purge_type_drops_its_schedules(backend: Backend) -> None:
    await backend.schedules.put(rec("a", 100.0))
    await backend.schedules.put(rec("b", 100.0, type_="other"))
    await backend.purge_type(TYPE)
    assert await backend.schedules.listing(TYPE) == []
    assert [r.id for r in await backend.schedules.due(1000.0)] == ["b"]
