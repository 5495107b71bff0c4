"""The task queue of one automation type in the memory backend.

Pure and synchronous: every method is one atomic step because nothing in it
awaits. The async backend wraps it and owns the waiting.

Layout (each structure keeps reserve/ack/sweep at O(log N) or better):

* ``tasks``: every live task (queued, scheduled or processing) by id.
* ``tiers``: one deque of ``(id, seq)`` per priority tier. Entries are checked
  lazily against ``tasks`` (a cancel leaves a dead entry that a pop skips), so
  removing from the middle of a tier never costs a scan.
* ``scheduled``/``leases``: heaps of ``(time, seq, id)`` validated the same way;
  an extended lease pushes a new entry and the old one goes stale.
* ``dead``: insertion-ordered dict (oldest death first, O(1) removal by id).
* ``finished``: done/cancelled states kept for ``FLEET_RESULT_TTL_SECONDS``, at
  most ``FLEET_RESULT_MAX_PER_TYPE`` (oldest finished dropped first).
* ``records``: progress and outputs of the tasks that reported any, dropped with
  their finished state.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from fleet.backends.memory.group_book import Group, GroupBook
from fleet.backends.memory.queue_view import QueueView
from fleet.backends.memory.runs import RunBook
from fleet.backends.memory.task_records import Extras, TaskRecordKeeping
from fleet.core.delivery import at_failure, at_take, duplicate_of, exhausted_error, refund_at_loss
from fleet.core.flow import GroupLimits
from fleet.core.records import (
    TIERS,
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    Reservation,
    TaskBody,
    TaskInfo,
    Tier,
    new_token,
)
from fleet.core.results import result_max_per_type, result_ttl
from fleet.core.runs import RunEvent

LiveState = Literal["queued", "scheduled", "processing"]
COUNTER_NAMES = ("submitted", "completed", "failed", "dead", "expired", "cancelled", "throttled")


@dataclass(slots=True)
class _Task:
    body: TaskBody
    state: LiveState
    seq: int  # changes on every move; index entries carrying an older seq are stale
    token: str | None = None
    deadline: float = 0.0
    ready_at: float = 0.0
    cancel: bool = False
    started: bool = False  # the current reservation was marked started
    started_at: float | None = None  # when the latest attempt was marked started


@dataclass(slots=True)
class _Finished:
    state: Literal["done", "cancelled"]
    at: float
    body: TaskBody
    started_at: float | None = None


def _noop(*_: object) -> None:
    return None


class QueueState(QueueView, TaskRecordKeeping):
    """All queue state of one type.

    Args:
        on_ready: Called with how many tasks just became pending (wake reservers).
        on_reschedule: Called when the earliest scheduled due time moved earlier
            (blocked reservers recompute how long to wait).
    """

    def __init__(
        self,
        on_ready: Callable[[int], None] = _noop,
        on_reschedule: Callable[[], None] = _noop,
        *,
        automation_type: str = "",
        runs: RunBook | None = None,
    ) -> None:
        self.on_ready = on_ready
        self.on_reschedule = on_reschedule
        self.automation_type = automation_type
        self.runs = runs
        self._seq = itertools.count()
        self.result_ttl = result_ttl()
        self.result_max = result_max_per_type()
        self.reset()

    def reset(self) -> None:
        """Forget every task, key and counter (``purge_type``); waiters stay."""
        self.tasks: dict[str, _Task] = {}
        self.tiers: dict[Tier, deque[tuple[str, int]]] = {t: deque() for t in TIERS}
        self.tier_len: dict[Tier, int] = dict.fromkeys(TIERS, 0)
        self.scheduled: list[tuple[float, int, str]] = []
        self.n_scheduled = 0
        self.leases: list[tuple[float, int, str]] = []
        self.n_processing = 0
        self.dead: OrderedDict[str, TaskBody] = OrderedDict()
        self.finished: dict[str, _Finished] = {}
        self.finished_order: deque[tuple[float, str]] = deque()
        self.records: dict[str, Extras] = {}
        self.idem: dict[str, tuple[str, float]] = {}
        self.idem_heap: list[tuple[float, str]] = []
        self.counters: dict[str, int] = dict.fromkeys(COUNTER_NAMES, 0)
        self.groups = GroupBook(self.on_reschedule)

    def _run(self, body: TaskBody, event: RunEvent, now: float, from_running: bool = False) -> None:
        """Move the counters of ``body``'s run, if it has one (same step)."""
        if body.run is not None and self.runs is not None:
            self.runs.event(body, self.automation_type, event, now, from_running=from_running)

    # ------------------------------------------------------------ moves
    def _enqueue(self, task: _Task, *, head: bool) -> None:
        task.state = "queued"
        task.seq = next(self._seq)
        task.token = None
        tier = task.body.tier
        name = task.body.group
        if name is None:
            entries = self.tiers[tier]
        else:
            group = self.groups.get(name)
            entries = group.tiers[tier]
            group.tier_len[tier] += 1
        if head:
            entries.appendleft((task.body.id, task.seq))
        else:
            entries.append((task.body.id, task.seq))
        self.tier_len[tier] += 1
        if name is not None:
            self.groups.joined(group, tier)

    def _schedule(self, task: _Task, ready_at: float) -> None:
        task.state = "scheduled"
        task.seq = next(self._seq)
        task.token = None
        task.ready_at = ready_at
        earliest = self.next_due()
        heapq.heappush(self.scheduled, (ready_at, task.seq, task.body.id))
        self.n_scheduled += 1
        if earliest is None or ready_at < earliest:
            self.on_reschedule()

    def _unlink(self, task: _Task) -> None:
        """Take a live task out of its state's counts (its index entries go stale)."""
        if task.state == "queued":
            self.tier_len[task.body.tier] -= 1
            if task.body.group is not None:
                self.groups.get(task.body.group).tier_len[task.body.tier] -= 1
        elif task.state == "scheduled":
            self.n_scheduled -= 1
        else:
            self.n_processing -= 1
            self._lease_ended(task)
        task.seq = next(self._seq)

    def _finish(self, task: _Task, state: Literal["done", "cancelled"], now: float) -> None:
        del self.tasks[task.body.id]
        self.finished[task.body.id] = _Finished(state, now, task.body, task.started_at)
        self._ended(task.body.id, now)

    def _bury(self, body: TaskBody) -> None:
        self.dead.pop(body.id, None)
        self.dead[body.id] = body
        self.counters["dead"] += 1
        if body.id in self.records:
            self._ended(body.id, body.failed_at or 0.0)

    def _lease_ended(self, task: _Task) -> None:
        """A reservation of a grouped task ended: its group's running count falls."""
        if task.body.group is not None and self.groups.ended(task.body.group):
            self.on_ready(1)

    def _valid(self, tid: str, seq: int, state: LiveState) -> _Task | None:
        task = self.tasks.get(tid)
        if task is None or task.seq != seq or task.state != state:
            return None
        return task

    def _owned(self, tid: str, token: str) -> _Task | None:
        task = self.tasks.get(tid)
        if task is None or task.state != "processing" or task.token != token:
            return None
        return task

    # ------------------------------------------------------------ push
    def push(self, requests: Sequence[PushRequest], now: float) -> list[PushResult]:
        """Enqueue requests in order (see ``TaskQueues.push``)."""
        while self.idem_heap and self.idem_heap[0][0] <= now:
            exp, old_key = heapq.heappop(self.idem_heap)
            old = self.idem.get(old_key)
            if old is not None and old[1] == exp:
                del self.idem[old_key]
        results: list[PushResult] = []
        ready = 0
        for req in requests:
            body = req.body
            key = req.idempotency_key
            hit = None if key is None else self.idem.get(key)
            holder = hit[0] if hit is not None and hit[1] > now else None
            dup = duplicate_of(body.id, key_holder=holder, live=body.id in self.tasks)
            if dup is not None:
                results.append(PushResult(dup, queued=False, duplicate=True))
                continue
            if body.run is not None and self.runs is not None:
                verdict = self.runs.admit(
                    body, req.unique_key, self.automation_type, now, req.delay_seconds
                )
                if verdict != "ok":
                    refused = "delay" if verdict == "delay" else None
                    results.append(PushResult(body.id, False, verdict == "duplicate", refused))
                    continue
            if body.enqueued_at <= 0:
                body = body.evolve(enqueued_at=now)
            if key is not None:
                expires = now + req.idempotency_ttl
                self.idem[key] = (body.id, expires)
                heapq.heappush(self.idem_heap, (expires, key))
            self.finished.pop(body.id, None)
            self.records.pop(body.id, None)
            task = _Task(body, "queued", 0)
            self.tasks[body.id] = task
            if req.delay_seconds > 0:
                self._schedule(task, now + req.delay_seconds)
            else:
                self._enqueue(task, head=False)
                ready += 1
            self.counters["submitted"] += 1
            self._run(body, "queued", now)
            results.append(PushResult(body.id, queued=True, duplicate=False))
        if ready:
            self.on_ready(ready)
        return results

    # ------------------------------------------------------------ reserve
    def next_due(self) -> float | None:
        """When the earliest scheduled task becomes pending or the earliest held
        group may go again (None if neither)."""
        due = self.groups.next_due()
        while self.scheduled:
            ready_at, seq, tid = self.scheduled[0]
            if self._valid(tid, seq, "scheduled") is not None:
                return ready_at if due is None else min(due, ready_at)
            heapq.heappop(self.scheduled)
        return due

    def promote_due(self, now: float) -> int:
        """Move due scheduled tasks to the tail of their tier; returns how many."""
        moved = 0
        while self.scheduled and self.scheduled[0][0] <= now:
            _, seq, tid = heapq.heappop(self.scheduled)
            task = self._valid(tid, seq, "scheduled")
            if task is None:
                continue
            self.n_scheduled -= 1
            self._enqueue(task, head=False)
            moved += 1
        if moved:
            self.on_ready(moved)
        return moved

    def _plain_pending(self, tier: Tier) -> bool:
        entries = self.tiers[tier]
        while entries:
            tid, seq = entries[0]
            if self._valid(tid, seq, "queued") is not None:
                return True
            entries.popleft()
        return False

    def _pop_from(self, entries: deque[tuple[str, int]], tier: Tier) -> _Task | None:
        while entries:
            tid, seq = entries.popleft()
            task = self._valid(tid, seq, "queued")
            if task is not None:
                self.tier_len[tier] -= 1
                return task
        return None

    def _pop_pending(
        self, now: float, limits: GroupLimits
    ) -> tuple[_Task, Group | None, float] | None:
        """The next task by the reserve rule: tier by tier, tasks without a group
        and groups with budget taking turns (see ``TaskGroups``); a group without
        budget is set aside on the way. Returns the task, its group and the
        group's rate state (``tat``) to charge if the task is delivered."""
        book = self.groups
        for tier in TIERS:
            while True:
                plain = self._plain_pending(tier)
                group = book.peek(tier)
                if group is not None and group.best_tier() != tier:
                    book.set_aside(group, "")  # its better tasks left: requeue it
                    book.activate(group)
                    continue
                if group is None or (plain and book.turn == "plain"):
                    if not plain:
                        break
                    if group is not None:
                        book.turn = "group"
                    task = self._pop_from(self.tiers[tier], tier)
                    if task is not None:
                        return task, None, 0.0
                    continue
                verdict, value = book.verdict(group, limits, now)
                if verdict != "serve":
                    book.refuse(group, verdict, value)
                    continue
                if plain:
                    book.turn = "plain"
                task = self._pop_from(group.tiers[tier], tier)
                if task is None:  # its count was off: never, but never spin either
                    group.tier_len[tier] = 0
                    book.settle(group, limits, now)
                    continue
                group.tier_len[tier] -= 1
                return task, group, value
        return None

    def take(
        self,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
        now: float,
        expired: list[TaskBody] | None = None,
    ) -> list[Reservation]:
        """Reserve up to ``k`` deliverable tasks (see ``TaskQueues.reserve``), groups
        under the type's stored limits (``groups.defaults``).

        The body of every task dropped for its ttl is appended to ``expired``
        when given (the backend logs them once the step is over).
        """
        self.promote_due(now)
        self.groups.promote_due(now)
        limits = self.groups.defaults
        out: list[Reservation] = []
        while len(out) < k:
            popped = self._pop_pending(now, limits)
            if popped is None:
                break
            task, group, tat = popped
            res = self._deliver(task, visibility_seconds, default_max_attempts, now, expired)
            if group is not None:
                if res is not None:
                    group.running += 1
                    group.tat = tat
                self.groups.settle(group, limits, now)
            if res is not None:
                out.append(res)
        return out

    def _deliver(
        self,
        task: _Task,
        visibility_seconds: float,
        default_max_attempts: int,
        now: float,
        expired: list[TaskBody] | None,
    ) -> Reservation | None:
        """Lease one popped task, or settle it if it must not be delivered."""
        body = task.body
        if body.max_attempts is None:
            body = body.evolve(max_attempts=default_max_attempts)
        limit = body.max_attempts or default_max_attempts
        verdict = at_take(
            body, cancel=task.cancel, attempt=body.attempt + 1, max_attempts=limit, now=now
        )
        if verdict == "cancelled":
            self._finish(task, "cancelled", now)
            self.counters["cancelled"] += 1
            self._run(body, "cancelled", now)
            return None
        if verdict == "expired":
            del self.tasks[body.id]
            self.counters["expired"] += 1
            self._run(body, "expired", now)
            if expired is not None:
                expired.append(body)
            return None
        if verdict == "exhausted":
            del self.tasks[body.id]
            error = exhausted_error(body.attempt + 1, limit)
            self._bury(body.evolve(last_error=error, failed_at=now))
            self._run(body, "dead", now)
            return None
        body = body.evolve(attempt=body.attempt + 1)
        task.body = body
        task.state = "processing"
        task.seq = next(self._seq)
        task.token = new_token()
        task.started = False
        task.deadline = now + visibility_seconds
        heapq.heappush(self.leases, (task.deadline, task.seq, body.id))
        self.n_processing += 1
        self._run(body, "started", now)
        return Reservation(body, task.token, task.deadline)

    # ------------------------------------------------------------ lease ends
    def ack(self, leases: Sequence[tuple[str, str]], now: float) -> list[bool]:
        out: list[bool] = []
        for tid, token in leases:
            task = self._owned(tid, token)
            if task is None:
                out.append(False)
                continue
            self._unlink(task)
            if task.cancel:
                self._finish(task, "cancelled", now)
                self.counters["cancelled"] += 1
                self._run(task.body, "cancelled", now, True)
            else:
                self._finish(task, "done", now)
                self.counters["completed"] += 1
                self._run(task.body, "done", now)
            out.append(True)
        return out

    def nack(
        self,
        tid: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None,
        traceback: str | None,
        dead: bool,
        now: float,
    ) -> NackOutcome:
        task = self._owned(tid, token)
        if task is None:
            return "stale"
        self._unlink(task)
        body = task.body.evolve(last_error=error, traceback=traceback, failed_at=now)
        if at_failure(dead=dead, attempt=body.attempt, max_attempts=body.max_attempts) == "dead":
            del self.tasks[tid]
            self._bury(body)
            self._run(body, "dead", now, True)
            return "dead"
        task.body = body
        self._schedule(task, now + max(delay_seconds, 0.0))
        self.counters["failed"] += 1
        self._run(body, "requeued", now)
        return "retry"

    def release(self, tid: str, token: str) -> bool:
        task = self._owned(tid, token)
        if task is None:
            return False
        self._unlink(task)
        task.body = task.body.evolve(attempt=max(task.body.attempt - 1, 0))
        self._enqueue(task, head=True)
        self._run(task.body, "requeued", 0.0)
        self.on_ready(1)
        return True

    def throttle(self, tid: str, token: str, retry_after: float, now: float) -> bool:
        """End a lease uncharged; hold its group (or the task) for ``retry_after``."""
        task = self._owned(tid, token)
        if task is None:
            return False
        self._unlink(task)
        task.body = task.body.evolve(attempt=max(task.body.attempt - 1, 0))
        self.counters["throttled"] += 1
        self._run(task.body, "requeued", now)
        if task.body.group is None:
            self._schedule(task, now + retry_after)
            return True
        group = self.groups.get(task.body.group)
        group.until = max(group.until, now + retry_after)
        self._enqueue(task, head=True)
        self.groups.set_aside(group, "D", group.until)
        return True

    def mark_started(self, leases: Sequence[tuple[str, str]], now: float) -> list[bool]:
        out: list[bool] = []
        for tid, token in leases:
            task = self._owned(tid, token)
            if task is not None:
                task.started = True
                task.started_at = now
            out.append(task is not None)
        return out

    def extend(self, tid: str, token: str, visibility_seconds: float, now: float) -> LeaseStatus:
        task = self._owned(tid, token)
        if task is None:
            return LeaseStatus.STALE
        task.deadline = now + visibility_seconds
        heapq.heappush(self.leases, (task.deadline, task.seq, tid))
        return LeaseStatus.CANCELLED if task.cancel else LeaseStatus.OK

    def sweep(self, now: float) -> int:
        """Re-queue expired leases at the head of their tier (refunding the
        attempt of one never marked started, up to ``refund_cap`` refunds);
        promote due tasks."""
        expired: list[_Task] = []
        while self.leases and self.leases[0][0] <= now:
            deadline, seq, tid = heapq.heappop(self.leases)
            task = self._valid(tid, seq, "processing")
            if task is not None and task.deadline == deadline:
                expired.append(task)
        # Reversed so the lease that ran out first ends up at the very head.
        for task in reversed(expired):
            self._unlink(task)
            body = task.body
            if refund_at_loss(
                started=task.started,
                attempt=body.attempt,
                refunds=body.refunds,
                max_attempts=body.max_attempts,
            ):
                task.body = body.evolve(attempt=body.attempt - 1, refunds=body.refunds + 1)
            task.started = False
            self._enqueue(task, head=True)
            self._run(task.body, "requeued", now)
        if expired:
            self.on_ready(len(expired))
        self.promote_due(now)
        return len(expired)

    # ------------------------------------------------------------ dead letters
    def dead_peek(self, n: int) -> list[TaskBody]:
        return list(itertools.islice(self.dead.values(), max(n, 0)))

    def dead_replay(self, n: int | None, task_ids: Sequence[str] | None) -> int:
        if task_ids is not None:
            chosen = [tid for tid in dict.fromkeys(task_ids) if tid in self.dead]
        else:
            limit = len(self.dead) if n is None else max(n, 0)
            chosen = list(itertools.islice(self.dead.keys(), limit))
        replayed = 0
        for tid in chosen:
            body = self.dead.pop(tid)
            self.records.pop(tid, None)
            if tid in self.tasks:
                continue  # the id was pushed again meanwhile; the live task wins
            task = _Task(body.evolve(attempt=0, refunds=0), "queued", 0)
            self.tasks[tid] = task
            self._enqueue(task, head=False)
            self._run(body, "replayed", 0.0)
            replayed += 1
        if replayed:
            self.on_ready(replayed)
        return replayed

    def dead_clear(self) -> int:
        n = len(self.dead)
        self.dead.clear()
        return n

    # ------------------------------------------------------------ inspection
    def _bare_state(self, tid: str, now: float) -> tuple[TaskInfo, float | None]:
        task = self.tasks.get(tid)
        if task is not None:
            info = TaskInfo.of(
                task.body,
                task.state,
                deadline=task.deadline if task.state == "processing" else None,
                ready_at=task.ready_at if task.state == "scheduled" else None,
            )
            return info, task.started_at
        dead = self.dead.get(tid)
        if dead is not None:
            return TaskInfo.of(dead, "dead"), None
        fin = self.finished.get(tid)
        if fin is not None and fin.at >= now - self.result_ttl:
            return TaskInfo.of(fin.body, fin.state, finished_at=fin.at), fin.started_at
        return TaskInfo(task_id=tid, state="unknown"), None

    def cancel(self, tid: str, now: float) -> CancelOutcome:
        task = self.tasks.get(tid)
        if task is None:
            return "not_found"
        if task.state == "processing":
            task.cancel = True
            return "cancelling"
        self._unlink(task)
        self._finish(task, "cancelled", now)
        self.counters["cancelled"] += 1
        self._run(task.body, "cancelled", now)
        return "cancelled"
