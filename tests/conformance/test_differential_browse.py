"""Differential: the task browser and the lookup by id on SQLite (its indexes, schema
v16) and on Redis (the browse indexes its scripts keep, ``lua/browse.lua``) give the
same pages after the same random operations (issue 41, items 2 and 4).

Hypothesis draws pushes (priorities, groups, delays, submit times with ties),
reserves, acks, nacks (retried or dead), releases, cancels, lost leases swept,
dead letters replayed or deleted by selection, walks of a state in between (on Redis,
the live indexes are kept from the first one on) and the end of browsing (the marker
expires: the next page rebuilds them); after the sequence every state is walked page
by page with a drawn page size, and every id is looked up (its stored body, as the
task page reads it). Both engines must answer alike, item by item.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.capabilities.browse import BROWSE_STATES
from fleet.core.clock import ManualClock
from fleet.core.records import PushRequest, Reservation, TaskBody

OPS = st.one_of(
    st.tuples(
        st.just("push"),
        st.sampled_from([None, "a", "b"]),
        st.sampled_from([-1, 0, 1]),
        st.integers(1, 4),
        st.booleans(),  # delayed
    ),
    st.tuples(st.just("reserve"), st.integers(1, 5)),
    st.tuples(st.just("ack"), st.integers(0, 5)),
    st.tuples(st.just("nack"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("cancel"), st.integers(0, 15)),
    st.tuples(st.just("lose"), st.integers(0, 5)),
    st.tuples(st.just("dead"), st.booleans(), st.lists(st.integers(0, 15), max_size=3)),
    # a walk mid-sequence (on Redis the live indexes are kept from then on), after
    # the end of browsing if drawn (on Redis the marker expires, the scripts stop
    # keeping the live indexes, and the walk's first page rebuilds them)
    st.tuples(st.just("walk"), st.sampled_from(BROWSE_STATES), st.booleans()),
)
_types = itertools.count()


def _id(i: int) -> str:
    # Ids that do not sort as they were issued, so ties of submit time are ordered by id.
    return f"{(i * 7919) % 1000:03x}-{i}"


async def _walk(backend: Backend, automation_type: str, state: Any, limit: int) -> list[Any]:
    items: list[Any] = []
    cursor = None
    for _ in range(100):
        page = await backend.browse.page(automation_type, state, limit, cursor)
        items += [
            (
                s.id,
                s.state,
                s.priority,
                s.group,
                s.attempt,
                s.enqueued_at,
                s.last_error is not None,
                s.ready_at is not None,
            )
            for s in page.items
        ]
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor
    raise AssertionError("a walk that does not end")


async def _forget(backend: Backend, automation_type: str) -> None:
    """On Redis, what ``KEEP_SECONDS`` without a page does: the marker goes."""
    lane = getattr(backend, "_lane", None)
    if lane is not None:
        marker = backend._keys.browse_indexes(automation_type)[0]  # type: ignore[attr-defined]
        await lane.execute("DEL", marker)


async def run(
    backend: Backend, automation_type: str, ops: list[tuple[Any, ...]], limit: int
) -> list[Any]:
    """:func:`_run` on a clock of its own, started now, that moves a millisecond an
    operation (and past a lease's deadline when one is lost): each backend sees the
    same times, and nothing waits."""
    with clock.frozen() as ticking:
        return await _run(backend, automation_type, ops, limit, ticking)


async def _run(
    backend: Backend,
    automation_type: str,
    ops: list[tuple[Any, ...]],
    limit: int,
    ticking: ManualClock,
) -> list[Any]:
    """Apply ``ops``, then walk every state and look every id up: the trace."""
    held: list[Reservation] = []
    seq = itertools.count()
    issued = 0
    trace: list[Any] = []
    for op in ops:
        ticking.advance(0.001)  # time passes between two operations, alike everywhere
        kind = op[0]
        if kind == "push":
            _, group, priority, n, delayed = op
            reqs = []
            for _ in range(n):
                i = next(seq)
                body = TaskBody(
                    id=_id(i),
                    payload={"i": i},
                    priority=priority,
                    max_attempts=2,
                    enqueued_at=1_000.0 + i // 3,  # ties of three
                    group=group,
                )
                reqs.append(PushRequest(body, delay_seconds=3600.0 if delayed else 0.0))
            issued += n
            await backend.queues.push(automation_type, reqs)
        elif kind == "reserve":
            held += await backend.queues.reserve(automation_type, k=op[1])
        elif kind == "cancel":
            if issued:
                tid = _id(op[1] % issued)
                outcome = await backend.queues.cancel(automation_type, tid)
                trace.append(outcome)
                if outcome == "cancelled":
                    held = [r for r in held if r.body.id != tid]
        elif kind == "walk":
            if op[2]:
                await _forget(backend, automation_type)
            trace.append((op[1], await _walk(backend, automation_type, op[1], limit)))
        elif kind == "dead":
            if issued:
                ids = [_id(i % issued) for i in op[2]]
                picked = await backend.browse.dead_select(automation_type, ids, replay=op[1])
                trace.append((picked.done, picked.skipped, picked.unknown))
        elif held:
            res = held.pop(op[1] % len(held))
            tid, token = res.body.id, res.token
            if kind == "ack":
                trace.append(await backend.queues.ack(automation_type, [(tid, token)]))
            elif kind == "nack":
                trace.append(
                    await backend.queues.nack(
                        automation_type, tid, token, delay_seconds=3600.0, dead=op[2]
                    )
                )
            elif kind == "release":
                trace.append(await backend.queues.release(automation_type, tid, token))
            else:  # lose: the lease runs out, the sweep settles it
                await backend.queues.extend(automation_type, tid, token, 0.0)
                ticking.advance(0.002)  # past the deadline
                trace.append(await backend.queues.sweep(automation_type))
    for state in BROWSE_STATES:
        trace.append((state, await _walk(backend, automation_type, state, limit)))
    for i in range(issued):
        body = await backend.browse.body(automation_type, _id(i))
        trace.append((_id(i), None if body is None else (body.payload, body.enqueued_at)))
    return trace


@pytest.mark.slow
def test_browse_pages_answer_alike_on_sqlite_and_redis(redis_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'browse.db'}"

        @settings(
            max_examples=120,
            deadline=None,
            derandomize=True,  # the same sequences each run: the floor below always holds
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(OPS, min_size=1, max_size=40), st.integers(1, 4))
        def check(ops: list[tuple[Any, ...]], limit: int) -> None:
            automation_type = f"browse-diff-{next(_types)}"

            async def both() -> list[list[Any]]:
                traces = []
                for url in (sqlite_url, redis_url):
                    async with await open_backend(url) as b:
                        traces.append(await run(b, automation_type, ops, limit))
                return traces

            sqlite, redis = asyncio.run(both())
            assert redis == sqlite, (ops, limit, redis, sqlite)
            listed.append(
                sum(
                    len(step[1])
                    for step in sqlite
                    if isinstance(step, tuple) and step[0] in BROWSE_STATES
                )
            )

        listed: list[int] = []
        check()
        assert sum(listed) > 50, listed  # the walks listed tasks, not only empty pages
