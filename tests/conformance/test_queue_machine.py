"""A hypothesis state machine driving one backend's queue against a model.

Rules push, reserve, mark started, ack, nack, release, extend, let short leases
run out and sweep (refunding the attempt of a reservation never marked started,
up to ``refund_cap`` refunds), use stale tokens and replay the DLQ. After every
step the invariants check that each task is in exactly one place (no task lost
or duplicated), that no task is held by two live leases, that reserves follow
priority then FIFO, that attempts and dead-lettering follow ``max_attempts``,
and that stale tokens change nothing.

Where a backend may legitimately order tasks either way (several leases swept
in one call, several retries coming due together), the model keeps them as one
unordered *group*: a reserve may take any member of the first group first.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fleet.backends import open_backend
from fleet.backends.base import Backend
from fleet.core.clock import ManualClock
from fleet.core.records import (
    TIERS,
    LeaseStatus,
    PushRequest,
    TaskBody,
    Tier,
    now,
    refund_cap,
    tier_of,
)

R = TypeVar("R")

SHORT_VISIBILITY = 0.02
LONG_VISIBILITY = 60.0
DEFAULT_MAX_ATTEMPTS = 3
MAX_TASKS = 12


@dataclass
class ModelTask:
    id: str
    priority: int
    max_attempts: int | None
    attempt: int = 0
    token: str | None = None
    short_lease: bool = False
    started: bool = False  # the current reservation was marked started
    refunds: int = 0
    #: A cancel was requested while it ran; the flag travels with the task until
    #: an ack or a reserve settles it. None: it went to the DLQ flagged, and
    #: whether a replay keeps the flag is not specified, so it is never replayed.
    cancel: bool | None = False

    @property
    def tier(self) -> Tier:
        return tier_of(self.priority)

    @property
    def limit(self) -> int:
        return self.max_attempts or DEFAULT_MAX_ATTEMPTS

    def deliverable(self) -> bool:
        return self.attempt + 1 <= self.limit


def queue_machine(url: str, clock: ManualClock) -> type[RuleBasedStateMachine]:
    """A machine class bound to one backend URL (each run uses a fresh type) and the
    stopped clock it moves to let short leases run out."""

    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.backend: Backend = self.run(open_backend(url))
            self.type = f"machine-{uuid.uuid4().hex[:12]}"
            self.tasks: dict[str, ModelTask] = {}
            self.tiers: dict[Tier, deque[set[str]]] = {t: deque() for t in TIERS}
            self.due: set[str] = set()  # retries due now (promoted at next reserve/sweep)
            self.far: set[str] = set()  # retries scheduled far in the future
            self.processing: dict[str, ModelTask] = {}
            self.dead: set[str] = set()
            self.done: set[str] = set()
            self.cancelled: set[str] = set()
            self.stale: list[tuple[str, str]] = []
            self.counter = 0

        def run(self, coro: Coroutine[Any, Any, R]) -> R:
            return self.loop.run_until_complete(coro)

        def teardown(self) -> None:
            try:
                self.run(self.backend.purge_type(self.type))
                self.run(self.backend.close())
            finally:
                self.loop.close()

        # ------------------------------------------------------------ model helpers
        def pending_ids(self) -> set[str]:
            return {i for t in TIERS for g in self.tiers[t] for i in g}

        def first_group(self) -> set[str] | None:
            for tier in TIERS:
                groups = self.tiers[tier]
                while groups and not groups[0]:
                    groups.popleft()
                if groups:
                    return groups[0]
            return None

        def remove_pending(self, tid: str) -> None:
            for tier in TIERS:
                for group in self.tiers[tier]:
                    group.discard(tid)

        def promote_due(self) -> None:
            by_tier: dict[Tier, set[str]] = {t: set() for t in TIERS}
            for tid in self.due:
                by_tier[self.tasks[tid].tier].add(tid)
            for tier, group in by_tier.items():
                if group:
                    self.tiers[tier].append(group)
            self.due.clear()

        def settle(self, task: ModelTask, place: str) -> None:
            if place == "dead":
                if task.cancel:
                    task.cancel = None
                self.dead.add(task.id)
            elif place == "cancelled":
                self.cancelled.add(task.id)
            else:
                self.done.add(task.id)

        def lose_lease(self, task: ModelTask) -> None:
            assert task.token is not None
            self.stale.append((task.id, task.token))
            task.token = None
            task.started = False
            del self.processing[task.id]

        # ------------------------------------------------------------ rules
        @initialize()
        def start_empty(self) -> None:
            depths = self.run(self.backend.queues.depths(self.type))
            assert depths.pending == depths.processing == depths.dead == 0

        @precondition(lambda self: len(self.tasks) < MAX_TASKS)
        @rule(
            priority=st.sampled_from([-1, 0, 0, 1]),
            max_attempts=st.sampled_from([None, 1, 2, 3]),
        )
        def push(self, priority: int, max_attempts: int | None) -> None:
            self.counter += 1
            tid = f"t{self.counter:03d}"
            body = TaskBody(
                id=tid,
                payload={"n": self.counter},
                priority=priority,
                max_attempts=max_attempts,
                enqueued_at=now(),
            )
            result = self.run(self.backend.queues.push(self.type, [PushRequest(body)]))
            assert result[0].queued and result[0].task_id == tid
            task = ModelTask(tid, priority, max_attempts)
            self.tasks[tid] = task
            self.tiers[task.tier].append({tid})

        @rule(k=st.integers(1, 3), short=st.booleans())
        def reserve(self, k: int, short: bool) -> None:
            visibility = SHORT_VISIBILITY if short else LONG_VISIBILITY
            got = self.run(
                self.backend.queues.reserve(
                    self.type,
                    k=k,
                    visibility_seconds=visibility,
                    default_max_attempts=DEFAULT_MAX_ATTEMPTS,
                )
            )
            assert len(got) <= k
            self.promote_due()
            # Cancelled and undeliverable tasks the backend met on its way were
            # dropped or dead-lettered; which ones it met is read back.
            for tid in list(self.pending_ids()):
                task = self.tasks[tid]
                if task.cancel or not task.deliverable():
                    state = self.run(self.backend.queues.state(self.type, tid)).state
                    gone = "cancelled" if task.cancel else "dead"
                    assert state in ("queued", gone), (tid, state)
                    if state != "queued":
                        self.remove_pending(tid)
                        self.settle(task, gone)
            for res in got:
                tid = res.body.id
                group = self.first_group()
                assert group is not None, f"{tid} delivered but the model has nothing pending"
                assert tid in group, f"{tid} delivered before {sorted(group)} (priority/FIFO)"
                group.discard(tid)
                task = self.tasks[tid]
                assert task.deliverable(), f"{tid} delivered beyond max_attempts"
                assert not task.cancel, f"{tid} delivered after it was cancelled"
                task.attempt += 1
                assert res.body.attempt == task.attempt
                assert res.body.priority == task.priority
                assert res.body.max_attempts == task.limit
                assert res.body.refunds == task.refunds
                assert res.token not in {tok for _, tok in self.stale}
                task.token = res.token
                task.short_lease = short
                self.processing[tid] = task
            if len(got) < k:
                assert self.first_group() is None, "reserve stopped while tasks were pending"

        @precondition(lambda self: self.processing)
        @rule(data=st.data())
        def ack(self, data: st.DataObject) -> None:
            task = data.draw(st.sampled_from(sorted(self.processing.values(), key=lambda t: t.id)))
            assert task.token is not None
            assert self.run(self.backend.queues.ack(self.type, [(task.id, task.token)])) == [True]
            self.lose_lease(task)
            self.settle(task, "cancelled" if task.cancel else "done")

        @precondition(lambda self: self.processing)
        @rule(data=st.data(), far=st.booleans(), dead=st.booleans())
        def nack(self, data: st.DataObject, far: bool, dead: bool) -> None:
            task = data.draw(st.sampled_from(sorted(self.processing.values(), key=lambda t: t.id)))
            assert task.token is not None
            outcome = self.run(
                self.backend.queues.nack(
                    self.type,
                    task.id,
                    task.token,
                    delay_seconds=LONG_VISIBILITY if far else 0.0,
                    error="boom",
                    dead=dead,
                )
            )
            self.lose_lease(task)
            if dead or task.attempt >= task.limit:
                assert outcome == "dead"
                self.settle(task, "dead")
            else:
                assert outcome == "retry"
                (self.far if far else self.due).add(task.id)

        @precondition(lambda self: self.processing)
        @rule(data=st.data())
        def release(self, data: st.DataObject) -> None:
            task = data.draw(st.sampled_from(sorted(self.processing.values(), key=lambda t: t.id)))
            assert task.token is not None
            assert self.run(self.backend.queues.release(self.type, task.id, task.token))
            self.lose_lease(task)
            task.attempt -= 1
            self.tiers[task.tier].appendleft({task.id})

        @precondition(lambda self: self.processing)
        @rule(data=st.data())
        def mark_started(self, data: st.DataObject) -> None:
            task = data.draw(st.sampled_from(sorted(self.processing.values(), key=lambda t: t.id)))
            assert task.token is not None
            lease = (task.id, task.token)
            assert self.run(self.backend.queues.mark_started(self.type, [lease, lease])) == [
                True,
                True,
            ]
            task.started = True

        @precondition(lambda self: self.processing)
        @rule(data=st.data())
        def extend(self, data: st.DataObject) -> None:
            task = data.draw(st.sampled_from(sorted(self.processing.values(), key=lambda t: t.id)))
            assert task.token is not None
            status = self.run(
                self.backend.queues.extend(self.type, task.id, task.token, LONG_VISIBILITY)
            )
            assert status == (LeaseStatus.CANCELLED if task.cancel else LeaseStatus.OK)
            task.short_lease = False

        @rule()
        def expire_and_sweep(self) -> None:
            if any(t.short_lease for t in self.processing.values()):
                clock.advance(SHORT_VISIBILITY * 1.5)
            swept = self.run(self.backend.queues.sweep(self.type))
            expired = [t for t in self.processing.values() if t.short_lease]
            assert swept == len(expired)
            by_tier: dict[Tier, set[str]] = {t: set() for t in TIERS}
            for task in expired:
                if not task.started and task.refunds < refund_cap(task.limit):
                    task.attempt -= 1  # lost unstarted: refunded
                    task.refunds += 1
                self.lose_lease(task)
                by_tier[task.tier].add(task.id)
            for tier, group in by_tier.items():
                if group:
                    self.tiers[tier].appendleft(group)
            self.promote_due()

        @precondition(lambda self: self.stale)
        @rule(data=st.data())
        def stale_token_is_refused(self, data: st.DataObject) -> None:
            tid, token = data.draw(st.sampled_from(self.stale))
            b, ty = self.backend, self.type
            assert self.run(b.queues.ack(ty, [(tid, token)])) == [False]
            assert self.run(b.queues.mark_started(ty, [(tid, token)])) == [False]
            assert self.run(b.queues.nack(ty, tid, token, delay_seconds=0, dead=True)) == "stale"
            assert self.run(b.queues.extend(ty, tid, token, 1)) == LeaseStatus.STALE
            assert not self.run(b.queues.release(ty, tid, token))

        @precondition(lambda self: any(self.tasks[i].cancel is False for i in self.dead))
        @rule()
        def replay_dead(self) -> None:
            chosen = {i for i in self.dead if self.tasks[i].cancel is False}
            if chosen == self.dead:
                replayed = self.run(self.backend.queues.dead_replay(self.type))
            else:
                ids = sorted(chosen)
                replayed = self.run(self.backend.queues.dead_replay(self.type, task_ids=ids))
            assert replayed == len(chosen)
            by_tier: dict[Tier, set[str]] = {t: set() for t in TIERS}
            for tid in chosen:
                self.tasks[tid].attempt = 0
                self.tasks[tid].refunds = 0
                by_tier[self.tasks[tid].tier].add(tid)
            for tier, group in by_tier.items():
                if group:
                    self.tiers[tier].append(group)
            self.dead -= chosen

        @precondition(lambda self: self.tasks)
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            tid = data.draw(st.sampled_from(sorted(self.tasks)))
            task = self.tasks[tid]
            outcome = self.run(self.backend.queues.cancel(self.type, tid))
            if tid in self.processing:
                assert outcome == "cancelling"
                task.cancel = True
            elif tid in self.pending_ids() or tid in self.due or tid in self.far:
                assert outcome == "cancelled"
                self.remove_pending(tid)
                self.due.discard(tid)
                self.far.discard(tid)
                self.settle(task, "cancelled")
            else:
                assert outcome == "not_found", (tid, outcome)

        # ------------------------------------------------------------ invariants
        @invariant()
        def every_task_in_exactly_one_place(self) -> None:
            places = {
                "queued": self.pending_ids(),
                "due": set(self.due),
                "scheduled": set(self.far),
                "processing": set(self.processing),
                "dead": set(self.dead),
                "done": set(self.done),
                "cancelled": set(self.cancelled),
            }
            seen: list[str] = [i for ids in places.values() for i in ids]
            assert sorted(seen) == sorted(self.tasks), "model lost or duplicated a task"
            for place, ids in places.items():
                for tid in ids:
                    state = self.run(self.backend.queues.state(self.type, tid))
                    allowed = ("scheduled", "queued") if place == "due" else (place,)
                    assert state.state in allowed, (tid, place, state)
                    if place in ("queued", "processing", "scheduled", "due"):
                        assert state.attempt == self.tasks[tid].attempt, (tid, state)

        @invariant()
        def depths_match(self) -> None:
            d = self.run(self.backend.queues.depths(self.type))
            assert d.processing == len(self.processing)
            assert d.dead == len(self.dead)
            assert d.pending + d.scheduled == len(self.pending_ids()) + len(self.due) + len(
                self.far
            )
            for tier in TIERS:
                in_tier = sum(len(g) for g in self.tiers[tier])
                due_here = sum(1 for i in self.due if self.tasks[i].tier == tier)
                assert in_tier <= getattr(d, tier) <= in_tier + due_here
            assert d.counters.completed == len(self.done)
            assert d.counters.cancelled == len(self.cancelled)

        @invariant()
        def dead_letters_match(self) -> None:
            dead = self.run(self.backend.queues.dead_peek(self.type, n=100))
            assert {b.id for b in dead} == self.dead
            for b in dead:
                assert b.last_error

        @invariant()
        def one_live_lease_per_task(self) -> None:
            tokens = [t.token for t in self.processing.values()]
            assert len(tokens) == len(set(tokens))

    return QueueMachine


def test_queue_state_machine(backend_url: str, frozen: ManualClock) -> None:
    """Runs in a few seconds per backend; for a deeper search run it with
    ``FLEET_MACHINE_EXAMPLES=500 pytest --timeout=0``."""
    machine = queue_machine(backend_url, frozen)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("FLEET_MACHINE_EXAMPLES", "30")),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=False,
        ),
    )
