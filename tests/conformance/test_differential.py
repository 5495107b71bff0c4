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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.clock import ManualClock
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
    # The delivery rules: an id pushed again, an idempotency key, a lease lost with
    # or without its start mark (refunds, then the attempt limit), a cancel, a ttl.
    st.tuples(st.just("again"), st.integers(0, 7)),
    st.tuples(st.just("idem"), st.integers(0, 1)),
    st.tuples(st.just("lose"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("cancel"), st.integers(0, 7)),
    st.tuples(st.just("ttl"), GROUPS),
)
_types = itertools.count()


async def run(backend: Backend, automation_type: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    """:func:`_run` on a clock of its own, started now, that moves a millisecond an
    operation (and past a lease's deadline when one is lost): each backend sees the
    same times, and nothing waits."""
    with clock.frozen() as ticking:
        return await _run(backend, automation_type, ops, ticking)


async def _run(
    backend: Backend, automation_type: str, ops: list[tuple[Any, ...]], ticking: ManualClock
) -> list[Any]:
    """Apply ``ops``; the trace of every answer (ids, states, counts)."""
    trace: list[Any] = []
    held: list[Reservation] = []
    seq = itertools.count()
    issued = [0]  # how many ids the pushes drew from seq (an "again" picks one of them)
    gen = itertools.count(1)
    # Every other task joins one run (its counters move in the Lua copies too) with a
    # unique key out of 2 (from the third on, duplicates); once the run ended, the
    # pushes into it are refused.
    run_id = await backend.runs.create(on_complete={"type": f"{automation_type}-cb"})
    for op in ops:
        ticking.advance(0.001)  # time passes between two operations, alike everywhere
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
            issued[0] += n
            pushed = await backend.queues.push(automation_type, reqs)
            trace.append([(r.queued, r.duplicate) for r in pushed])
        elif kind == "again" and not issued[0]:
            trace.append(None)  # no id to push again yet
        elif kind in ("again", "idem", "ttl"):
            # An earlier id again (in the run if it was), a key out of 2, or a task
            # whose ttl runs out before any reserve can take it.
            i = op[1] % issued[0] if kind == "again" else next(seq)
            body = TaskBody(
                id=f"t{i}",
                payload={},
                max_attempts=3,
                enqueued_at=now(),
                group=op[1] if kind == "ttl" else None,
                ttl_seconds=1e-6 if kind == "ttl" else None,
                run=run_id if kind == "again" and i % 2 == 0 else None,
            )
            req = PushRequest(
                body,
                idempotency_key=f"ik{op[1]}" if kind == "idem" else None,
                unique_key=f"k{i // 2 % 2}" if kind == "again" and i % 2 == 0 else None,
            )
            got_ = await backend.queues.push(automation_type, [req])
            if kind != "again":
                issued[0] += 1
            trace.append([(r.task_id, r.queued, r.duplicate) for r in got_])
        elif kind == "lose":
            # The lease runs out (extended to now) with or without its start mark; the
            # sweep then settles it by the refund rule.
            if not held:
                trace.append(None)
                continue
            res = held.pop(op[1] % len(held))
            if op[2]:
                await backend.queues.mark_started(
                    automation_type, [(res.body.id, res.token)], worker_id="w/marked"
                )
            await backend.queues.extend(automation_type, res.body.id, res.token, 0.0)
            ticking.advance(0.002)  # past the deadline
            trace.append(("swept", await backend.queues.sweep(automation_type)))
        elif kind == "cancel":
            outcome = await backend.queues.cancel(automation_type, f"t{op[1]}")
            held = [r for r in held if r.body.id != f"t{op[1]}" or outcome != "cancelled"]
            trace.append(outcome)
        elif kind == "reserve":
            got = await backend.queues.reserve(automation_type, k=op[1])
            held += got
            trace.append([(r.body.id, r.body.attempt) for r in got])
        elif kind in ("ack", "nack", "release"):
            if not held:
                trace.append(None)
                continue
            res = held.pop(op[1] % len(held))
            if kind == "ack":
                trace.append(
                    await backend.queues.ack(
                        automation_type, [(res.body.id, res.token)], worker_id="w/ack"
                    )
                )
            elif kind == "nack":
                # A retry far ahead: when a due retry rejoins its tier is a matter of
                # the clock, which the three runs do not share.
                outcome = await backend.queues.nack(
                    automation_type,
                    res.body.id,
                    res.token,
                    delay_seconds=3600.0,
                    dead=op[2],
                    error="E: boom",
                    worker_id="w|nack",
                )
                trace.append(outcome)
            else:
                trace.append(await backend.queues.release(automation_type, res.body.id, res.token))
        elif kind == "group":
            _, name, cap, paused = op
            await backend.groups.set(
                automation_type, name, GroupSettings(concurrency=cap, paused=paused)
            )
            trace.append("set")
        elif kind == "reset":
            await backend.groups.reset(automation_type, op[1])
            trace.append("reset")
        else:
            await backend.groups.set_defaults(
                automation_type, GroupLimits(concurrency=op[1]), gen=next(gen)
            )
            trace.append("limits")
    depths = await backend.queues.depths(automation_type)
    trace.append((depths.high, depths.normal, depths.low, depths.processing, depths.dead))
    for name in ("a", "b", "c"):
        info = await backend.groups.info(automation_type, name)
        trace.append((name, info.pending, info.running))
    # Every task's attempts as its record keeps them (the times are each run's own clock).
    for i in range(next(seq)):
        task = await backend.queues.state(automation_type, f"t{i}")
        attempts = [(a.number, a.worker, a.outcome, a.error) for a in task.attempts]
        trace.append((f"t{i}", task.state, attempts))
    # Then everything held is acked and everything pending drained: a run none of
    # whose tasks waits for a retry ends here, and its callback is queued.
    if held:
        trace.append(
            await backend.queues.ack(automation_type, [(r.body.id, r.token) for r in held])
        )
    while got := await backend.queues.reserve(automation_type, k=50):
        trace.append(await backend.queues.ack(automation_type, [(r.body.id, r.token) for r in got]))
    record = await backend.runs.get(run_id)
    assert record is not None
    trace.append((record.state, record.counters, record.by_type))
    trace.append((await backend.queues.depths(f"{automation_type}-cb")).pending)
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
        # Each delivery rule surely taken, whatever the draw: a lease lost unstarted
        # (refunded) and started (charged) until the attempts run out, a ttl, an
        # id and a key pushed again, a cancel of a waiting and of a running task.
        @example(
            ops=[
                ("push", None, 0, 2),
                *[("reserve", 1), ("lose", 0, True)] * 3,
                ("reserve", 1),
                ("lose", 0, False),
                ("reserve", 2),
                ("ttl", "a"),
                ("again", 1),
                ("idem", 0),
                ("idem", 0),
                ("cancel", 1),
                ("reserve", 2),
                ("cancel", 3),
            ]
        )
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
            swept.extend(step[1] for step in memory[: len(ops)] if isinstance(step, tuple))
            dead.append(memory[len(ops)][4])  # the depths after the ops: (..., dead)

        ran: list[int] = []
        runs: list[tuple[str, bool]] = []
        swept: list[int] = []
        dead: list[int] = []
        check()
        # Leases were lost and swept, and tasks dead-lettered, in some sequences.
        assert any(n > 0 for n in swept) and any(n > 0 for n in dead), (swept, dead)
        # Runs ended (and callbacks went out) and met duplicates in some sequences.
        assert any(state == "done" for state, _ in runs), runs
        assert any(dupes for _, dupes in runs), runs
        # The sequences were really run, and long ones among them.
        assert len(ran) >= 30 and max(ran) >= 15, (len(ran), max(ran, default=0))
