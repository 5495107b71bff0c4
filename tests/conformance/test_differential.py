"""Differential: the same random operation sequences through memory (the pure rules
in Python), SQLite (the same rules inside its transactions) and Redis (the Lua
copies), every answer compared.

Hypothesis draws sequences of pushes (with and without groups and priorities),
reserves, acks, nacks, releases, group settings (caps, pauses) and the type's
fleet-wide group limits; each sequence runs on a fresh type of every backend and
the three traces must be equal, answer by answer. Every other task joins one run,
with a unique key: the run's counters, end and callback are compared too.
Rates and throttles are left out:
their answers depend on the clock, which the three runs cannot share.
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
from fleet.core.flow import GroupLimits, GroupSettings
from fleet.core.records import PushRequest, Reservation, TaskBody, now

GROUPS = st.sampled_from([None, "a", "b", "c"])
OPS = st.one_of(
    st.tuples(st.just("push"), GROUPS, st.sampled_from([-1, 0, 1]), st.integers(1, 3)),
    st.tuples(st.just("reserve"), st.integers(1, 6)),
    st.tuples(st.just("ack"), st.integers(0, 5)),
    st.tuples(st.just("nack"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(
        st.just("group"),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([None, 1, 2]),
        st.booleans(),
    ),
    st.tuples(st.just("reset"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("limits"), st.sampled_from([None, 1, 2, 3])),
)
_types = itertools.count()


async def run(backend: Backend, automation_type: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    """Apply ``ops``; the trace of every answer (ids, states, counts)."""
    trace: list[Any] = []
    held: list[Reservation] = []
    seq = itertools.count()
    gen = itertools.count(1)
    # Every other task joins one run (its counters move in the Lua copies too) with a
    # unique key out of 2 (from the third on, duplicates); once the run ended, the
    # pushes into it are refused.
    run_id = await backend.runs.create(on_complete={"type": f"{automation_type}-cb"})
    for op in ops:
        kind = op[0]
        if kind == "push":
            _, group, priority, n = op
            reqs = [
                PushRequest(
                    TaskBody(
                        id=f"t{i}",
                        payload={},
                        priority=priority,
                        max_attempts=3,
                        enqueued_at=now(),
                        group=group,
                        run=run_id if i % 2 == 0 else None,
                    ),
                    unique_key=f"k{i // 2 % 2}" if i % 2 == 0 else None,
                )
                for i in (next(seq) for _ in range(n))
            ]
            pushed = await backend.push(automation_type, reqs)
            trace.append([(r.queued, r.duplicate) for r in pushed])
        elif kind == "reserve":
            got = await backend.reserve(automation_type, k=op[1])
            held += got
            trace.append([(r.body.id, r.body.attempt) for r in got])
        elif kind in ("ack", "nack", "release"):
            if not held:
                trace.append(None)
                continue
            res = held.pop(op[1] % len(held))
            if kind == "ack":
                trace.append(await backend.ack(automation_type, [(res.body.id, res.token)]))
            elif kind == "nack":
                # A retry far ahead: when a due retry rejoins its tier is a matter of
                # the clock, which the three runs do not share.
                outcome = await backend.nack(
                    automation_type, res.body.id, res.token, delay_seconds=3600.0, dead=op[2]
                )
                trace.append(outcome)
            else:
                trace.append(await backend.release(automation_type, res.body.id, res.token))
        elif kind == "group":
            _, name, cap, paused = op
            await backend.group_set(
                automation_type, name, GroupSettings(concurrency=cap, paused=paused)
            )
            trace.append("set")
        elif kind == "reset":
            await backend.group_reset(automation_type, op[1])
            trace.append("reset")
        else:
            await backend.group_defaults_set(
                automation_type, GroupLimits(concurrency=op[1]), gen=next(gen)
            )
            trace.append("limits")
    depths = await backend.depths(automation_type)
    trace.append((depths.high, depths.normal, depths.low, depths.processing, depths.dead))
    for name in ("a", "b", "c"):
        info = await backend.group_info(automation_type, name)
        trace.append((name, info.pending, info.running))
    # Then everything held is acked and everything pending drained: a run none of
    # whose tasks waits for a retry ends here, and its callback is queued.
    if held:
        trace.append(await backend.ack(automation_type, [(r.body.id, r.token) for r in held]))
    while got := await backend.reserve(automation_type, k=50):
        trace.append(await backend.ack(automation_type, [(r.body.id, r.token) for r in got]))
    record = await backend.runs.get(run_id)
    assert record is not None
    trace.append((record.state, record.counters, record.by_type))
    trace.append((await backend.depths(f"{automation_type}-cb")).pending)
    return trace


@pytest.mark.slow
def test_groups_and_queues_answer_alike_everywhere(redis_url: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = f"sqlite:///{Path(tmp) / 'diff.db'}"

        @settings(
            max_examples=300,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(OPS, min_size=1, max_size=40))
        def check(ops: list[tuple[Any, ...]]) -> None:
            automation_type = f"diff-{next(_types)}"
            ran.append(len(ops))

            async def all_three() -> list[list[Any]]:
                traces = []
                for url in ("memory://differential", sqlite_url, redis_url):
                    async with await open_backend(url) as b:
                        traces.append(await run(b, automation_type, ops))
                return traces

            memory, sqlite, redis = asyncio.run(all_three())
            assert sqlite == memory, (ops, sqlite, memory)
            assert redis == memory, (ops, redis, memory)
            state, counters, _ = memory[-2]
            runs.append((state, counters["duplicates"] > 0))

        ran: list[int] = []
        runs: list[tuple[str, bool]] = []
        check()
        # Runs ended (and callbacks went out) and met duplicates in some sequences.
        assert any(state == "done" for state, _ in runs), runs
        assert any(dupes for _, dupes in runs), runs
        # The sequences were really run, and long ones among them.
        assert len(ran) >= 30 and max(ran) >= 15, (len(ran), max(ran, default=0))
