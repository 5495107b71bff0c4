"""Runs in the memory backend: one :class:`RunBook` per store, shared by every
type's queue, moved by the queues in the same synchronous step as the task
operation (so atomic under asyncio), by the pure rule of :mod:`fleet.core.runs`.

Each run keeps its ``unique_key`` set exactly (a Python set of ``(type, key)``:
memory is one process's) and the ids of its live tasks (for ``runs.cancel``). A
running run expires at ``idle_until`` (pushed forward by every move of it), checked
on every read and by the sweep."""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet.core.capabilities.runs import Runs
from fleet.core.records import PushRequest, TaskBody, new_id, now
from fleet.core.runs import (
    COUNTERS,
    DEFAULT_MAX_DELAY,
    RunCancel,
    RunEvent,
    RunPage,
    RunRecord,
    RunState,
    callback_payload,
    callback_task_id,
    check_run,
    deltas,
    ends_now,
    idle_until,
    is_run_id,
    run_ttl,
    zero_counters,
)

Admit = Literal["ok", "duplicate", "refused", "delay"]
_LEAVES = frozenset(("done", "dead", "cancelled", "expired"))


@dataclass(slots=True)
class _Run:
    id: str
    name: str | None
    on_complete: dict[str, Any] | None
    created_at: float
    seq: int
    types: tuple[str, ...] | None = None
    max_delay: float = DEFAULT_MAX_DELAY
    idle_until: float = 0.0
    state: RunState = "running"
    finished_at: float | None = None
    counters: dict[str, int] = field(default_factory=zero_counters)
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    keys: set[tuple[str, str]] = field(default_factory=set)
    live: set[tuple[str, str]] = field(default_factory=set)

    def touch(self, t: float, delay: float = 0.0) -> None:
        """It moved at ``t`` (a task of it is due ``delay`` seconds later)."""
        if self.state == "running":
            self.idle_until = max(self.idle_until, idle_until(t, delay))

    def record(self) -> RunRecord:
        return RunRecord(
            id=self.id,
            name=self.name,
            on_complete=self.on_complete,
            state=self.state,
            created_at=self.created_at,
            finished_at=self.finished_at,
            counters=dict(self.counters),
            by_type={t: dict(c) for t, c in self.by_type.items()},
            types=self.types,
            max_delay_seconds=self.max_delay,
        )


def _noop_push(_type: str, _req: PushRequest) -> None:
    return None


def _noop_cancel(_type: str, _task_id: str) -> str:
    return "not_found"


class RunBook:
    """Every run of one memory store.

    Args:
        push: Pushes one request into a type's queue, synchronously (the callback).
        cancel: Cancels one task of a type, synchronously (``runs.cancel``).
        publish: Publishes an event (``runs`` topic) when a run ends.
    """

    def __init__(
        self,
        push: Callable[[str, PushRequest], None] = _noop_push,
        cancel: Callable[[str, str], str] = _noop_cancel,
        publish: Callable[[str, Any], None] | None = None,
    ) -> None:
        self.push = push
        self.cancel_task = cancel
        self.publish = publish
        self.runs: dict[str, _Run] = {}
        self._ended: deque[tuple[float, str]] = deque()
        # (idle_until as last seen, run id) of running runs: a run whose entry comes
        # due is checked, and pushed back with its current idle_until if it moved.
        self._idle: list[tuple[float, str]] = []
        self._seq = 0

    # ------------------------------------------------------------ lifecycle
    def create(
        self,
        name: str | None,
        on_complete: dict[str, Any] | None,
        t: float,
        types: tuple[str, ...] | None = None,
        max_delay: float = DEFAULT_MAX_DELAY,
    ) -> str:
        self.prune(t)
        self._seq += 1
        run = _Run(new_id(), name, on_complete, t, self._seq, types, max_delay)
        run.touch(t)
        self.runs[run.id] = run
        heapq.heappush(self._idle, (run.idle_until, run.id))
        return run.id

    def prune(self, t: float) -> int:
        """Forget the runs that ended ``FLEET_RUN_TTL_SECONDS`` ago and the running
        ones idle past their ``idle_until``; how many."""
        ttl = run_ttl()
        gone = 0
        while self._ended and self._ended[0][0] + ttl <= t:
            _, run_id = self._ended.popleft()
            gone += self.runs.pop(run_id, None) is not None
        while self._idle and self._idle[0][0] <= t:
            _, run_id = heapq.heappop(self._idle)
            run = self.runs.get(run_id)
            if run is None or run.state != "running":
                continue
            if run.idle_until > t:
                heapq.heappush(self._idle, (run.idle_until, run_id))
            else:
                del self.runs[run_id]
                gone += 1
        return gone

    def get(self, run_id: str, t: float) -> RunRecord | None:
        self.prune(t)
        run = self.runs.get(run_id)
        return None if run is None else run.record()

    def page(self, after: str | None, limit: int, t: float) -> RunPage:
        self.prune(t)
        ordered = sorted(self.runs.values(), key=lambda r: r.seq, reverse=True)
        if after is not None:
            cut = self.runs.get(after)
            ordered = [r for r in ordered if cut is None or r.seq < cut.seq]
        chosen = ordered[: max(limit, 1)]
        more = len(ordered) > len(chosen)
        return RunPage([r.record() for r in chosen], chosen[-1].id if more and chosen else None)

    def cancel(self, run_id: str, t: float) -> RunCancel | None:
        self.prune(t)
        run = self.runs.get(run_id)
        if run is None:
            return None
        stopping: list[tuple[str, str]] = []
        if run.state == "running":
            self._end(run, "cancelled", t)
            for automation_type, task_id in list(run.live):
                if self.cancel_task(automation_type, task_id) == "cancelling":
                    stopping.append((automation_type, task_id))
        return RunCancel(run.record(), tuple(stopping))

    # ------------------------------------------------------------ task events
    def admit(
        self,
        body: TaskBody,
        unique_key: str | None,
        automation_type: str,
        t: float,
        delay: float = 0.0,
    ) -> Admit:
        """Whether a push of ``body`` (which has a run) may be queued, ``delay``
        seconds from now: ``refused`` (the run is not running), ``delay`` (past the
        run's ``max_delay_seconds``), ``duplicate`` (its ``unique_key`` was seen in
        this type: counted) or ``ok``."""
        self.prune(t)
        run = self.runs.get(body.run or "")
        if run is None or run.state != "running":
            return "refused"
        if delay > run.max_delay:
            return "delay"
        if unique_key is not None:
            key = (automation_type, unique_key)
            if key in run.keys:
                self.event(body, automation_type, "duplicate", t)
                return "duplicate"
            run.keys.add(key)
        run.touch(t, delay)
        return "ok"

    def event(
        self,
        body: TaskBody,
        automation_type: str,
        event: RunEvent,
        t: float,
        *,
        from_running: bool = False,
    ) -> None:
        """One task event of ``body``'s run (nothing if the run is gone)."""
        run = self.runs.get(body.run or "")
        if run is None:
            return
        run.touch(t)
        per_type = run.by_type.get(automation_type)
        if per_type is None:
            per_type = run.by_type[automation_type] = zero_counters()
        for name, delta in deltas(event, from_running=from_running):
            run.counters[name] += delta
            per_type[name] += delta
        if event in ("queued", "replayed"):
            run.live.add((automation_type, body.id))
        elif event in _LEAVES:
            run.live.discard((automation_type, body.id))
        if ends_now(run.state, run.counters):
            self._end(run, "done", t)

    def _end(self, run: _Run, state: RunState, t: float) -> None:
        run.state = state
        run.finished_at = t
        run.keys = set()
        self._ended.append((t, run.id))
        record = run.record()
        if state == "done" and run.on_complete is not None:
            body = TaskBody(
                id=callback_task_id(run.id),
                payload=callback_payload(run.on_complete, record),
                enqueued_at=t,
            )
            self.push(str(run.on_complete["type"]), PushRequest(body))
        if self.publish is not None:
            self.publish("runs", {"event": "ended", **record.to_dict()})


class MemoryRuns(Runs):
    """The :class:`Runs` capability over the store's :class:`RunBook`."""

    def __init__(self, book: RunBook) -> None:
        self._run_book = book

    async def create(
        self,
        *,
        name: str | None = None,
        on_complete: dict[str, Any] | None = None,
        types: tuple[str, ...] | None = None,
        max_delay_seconds: float = DEFAULT_MAX_DELAY,
    ) -> str:
        on_complete, types, max_delay = check_run(on_complete, types, max_delay_seconds)
        return self._run_book.create(name, on_complete, now(), types, max_delay)

    async def get(self, run_id: str) -> RunRecord | None:
        if not is_run_id(run_id):
            return None
        return self._run_book.get(run_id, now())

    async def page(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        return self._run_book.page(after, limit, now())

    async def cancel(self, run_id: str) -> RunCancel | None:
        await asyncio.sleep(0)
        return self._run_book.cancel(run_id, now())


__all__ = ["COUNTERS", "MemoryRuns", "RunBook"]
