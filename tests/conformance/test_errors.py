"""Conformance: the ``errors`` capability (error groups and snapshots) on every backend —
deltas merged by the rule, pages newest first with a cursor, a group with its snapshots,
bodies read back byte for byte, the per-group bound, the type's byte budget, expiry
after the TTL, forget, and bad ids and cursors refused naming the field."""

from __future__ import annotations

import pytest

from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.error_groups import (
    MAX_DOMAINS,
    SNAPSHOT_BUDGET,
    SNAPSHOTS_PER_GROUP,
    TTL_SECONDS,
    GroupDelta,
    Sample,
    Snapshot,
    SnapshotMeta,
)
from fleet.core.errors import ContractValueError
from fleet.core.records import now

TYPE = "conf-errors"
G1 = "0123456789abcdef"
G2 = "fedcba9876543210"


def delta(group: str, count: int, at: float, *domains: str, task: str = "t") -> GroupDelta:
    return GroupDelta(
        group,
        "ValueError",
        "no price at <url>",
        "shop.py:parse",
        count,
        at,
        at,
        tuple(domains),
        Sample(task, f"no price at https://{task}.test/", "Traceback...\nValueError"),
    )


def snap(
    sid: str, at: float, html: bytes | None = b"<p>x</p>", png: bytes | None = None
) -> Snapshot:
    meta = SnapshotMeta(
        sid,
        at,
        task_id="t1",
        url="http://shop.test/1",
        html_bytes=len(html or b""),
        png_bytes=len(png or b""),
    )
    return Snapshot(meta, html, png)


async def test_deltas_merge_and_pages_go_newest_first(
    backend: Backend, frozen: ManualClock
) -> None:
    t0 = now()
    assert await backend.errors.get(TYPE, G1) is None
    await backend.errors.record(TYPE, [delta(G1, 3, t0, "a.test", task="x")])
    frozen.advance(1.5)
    t1 = now()
    await backend.errors.record(
        TYPE, [delta(G1, 2, t1, "b.test", "a.test", task="y"), delta(G2, 1, t0 - 5)]
    )
    g = await backend.errors.get(TYPE, G1)
    assert g is not None
    assert (g.count, g.first_seen, g.last_seen) == (5, t0, t1)
    assert g.domains == ("a.test", "b.test")
    assert g.sample.task_id == "y" and g.exc == "ValueError" and g.location == "shop.py:parse"
    assert g.snapshots == ()
    # An older delta keeps the newer sample.
    await backend.errors.record(TYPE, [delta(G1, 1, t0 - 1, task="old")])
    g = await backend.errors.get(TYPE, G1)
    assert g is not None and g.sample.task_id == "y" and g.first_seen == t0 - 1 and g.count == 6

    first = await backend.errors.page(TYPE, limit=1)
    assert [i.group for i in first.items] == [G1] and first.cursor is not None
    rest = await backend.errors.page(TYPE, cursor=first.cursor, limit=1)
    assert [i.group for i in rest.items] == [G2] and rest.cursor is None
    everything = await backend.errors.page(TYPE)
    assert [i.group for i in everything.items] == [G1, G2] and everything.cursor is None
    assert (await backend.errors.page("other-type")).items == ()


async def test_domains_are_bounded(backend: Backend, frozen: ManualClock) -> None:
    many = [f"d{i}.test" for i in range(MAX_DOMAINS + 5)]
    await backend.errors.record(TYPE, [delta(G1, 1, now(), *many)])
    g = await backend.errors.get(TYPE, G1)
    assert g is not None and g.domains == tuple(many[:MAX_DOMAINS])


async def test_ties_in_last_seen_page_by_id(backend: Backend, frozen: ManualClock) -> None:
    at = now()
    groups = [f"{i:016x}" for i in range(7)]
    await backend.errors.record(TYPE, [delta(g, 1, at) for g in groups])
    seen: list[str] = []
    cursor = None
    while True:
        got = await backend.errors.page(TYPE, cursor=cursor, limit=2)
        seen += [i.group for i in got.items]
        cursor = got.cursor
        if cursor is None:
            break
    assert seen == sorted(groups, reverse=True)


async def test_snapshots_bodies_and_the_per_group_bound(
    backend: Backend, frozen: ManualClock
) -> None:
    await backend.errors.record(TYPE, [delta(G1, 1, now())])
    png = bytes(range(256)) * 4
    for i in range(SNAPSHOTS_PER_GROUP + 2):
        assert await backend.errors.put(TYPE, G1, snap(f"a{i}", now(), png=png if i else None))
        frozen.advance(0.25)
    g = await backend.errors.get(TYPE, G1)
    assert g is not None
    kept = [s.id for s in g.snapshots]
    assert kept == [f"a{i}" for i in reversed(range(2, SNAPSHOTS_PER_GROUP + 2))]
    assert g.snapshots[0].png_bytes == len(png) and g.snapshots[0].url == "http://shop.test/1"
    body = await backend.errors.snapshot(TYPE, G1, "a4")
    assert body is not None and body.png == png and body.html == b"<p>x</p>"
    assert await backend.errors.snapshot(TYPE, G1, "a0") is None
    assert await backend.errors.snapshot(TYPE, G2, "a4") is None


async def test_the_type_budget_drops_the_oldest(backend: Backend, frozen: ManualClock) -> None:
    third = SNAPSHOT_BUDGET // 3 + 1
    big = b"x" * third
    groups = [f"{i:016x}" for i in range(3)]
    for g in groups:
        assert await backend.errors.put(TYPE, g, snap("1", now(), html=big))
        frozen.advance(1)
    assert await backend.errors.snapshot(TYPE, groups[0], "1") is None
    assert await backend.errors.snapshot(TYPE, groups[2], "1") is not None
    # Heavier than the whole budget: refused, nothing dropped.
    huge = b"y" * (SNAPSHOT_BUDGET + 1)
    assert not await backend.errors.put(TYPE, groups[0], snap("2", now(), html=huge))
    assert await backend.errors.snapshot(TYPE, groups[1], "1") is not None


async def test_groups_and_snapshots_expire(backend: Backend, frozen: ManualClock) -> None:
    await backend.errors.record(TYPE, [delta(G1, 4, now())])
    await backend.errors.put(TYPE, G1, snap("1", now()))
    frozen.advance(TTL_SECONDS - 1)
    assert await backend.errors.get(TYPE, G1) is not None
    frozen.advance(2)
    assert await backend.errors.get(TYPE, G1) is None
    assert await backend.errors.snapshot(TYPE, G1, "1") is None
    assert (await backend.errors.page(TYPE)).items == ()
    # Starts again from nothing.
    await backend.errors.record(TYPE, [delta(G1, 1, now())])
    g = await backend.errors.get(TYPE, G1)
    assert g is not None and g.count == 1 and g.snapshots == ()


async def test_forget_and_purge(backend: Backend, frozen: ManualClock) -> None:
    await backend.errors.record(TYPE, [delta(G1, 1, now())])
    await backend.errors.put(TYPE, G1, snap("1", now()))
    await backend.errors.forget(TYPE)
    assert await backend.errors.get(TYPE, G1) is None
    await backend.errors.record(TYPE, [delta(G1, 1, now())])
    await backend.purge_type(TYPE)
    assert (await backend.errors.page(TYPE)).items == ()


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda b: b.errors.get(TYPE, "nothex"), "group"),
        (lambda b: b.errors.snapshot(TYPE, G1, "Z!"), "snapshot"),
        (lambda b: b.errors.page(TYPE, cursor="garbage"), "cursor"),
        (lambda b: b.errors.page(TYPE, limit=0), "limit"),
        (lambda b: b.errors.put(TYPE, "x", snap("1", 0.0)), "group"),
    ],
)
async def test_bad_input_names_its_field(backend: Backend, call: object, field: str) -> None:
    with pytest.raises(ContractValueError) as info:
        await call(backend)  # type: ignore[operator]
    assert info.value.field == field
