"""Runs on the Redis backend (docs/runs.md; keys: docs/redis-schema.md, "Runs").

A run's counters move inside the queue scripts, in the same script call as the task
operation that moves them (``lua/run_common.lua``, included by push, reserve, ack,
nack, release, throttle, sweep, cancel and dead); the call that ends the run also
pushes its ``on_complete`` task. Here: create, read, list, and cancel (one script
ends the run and answers its live tasks, each then cancelled by ``cancel.lua``; a
task of the run popped between the two is dropped by ``reserve.lua``, so a
cancelled run's queued task never starts).
"""

from __future__ import annotations

import json
from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.budgets import check_budget
from fleet.core.capabilities.runs import Runs
from fleet.core.records import dumps, new_id, now
from fleet.core.runs import (
    COUNTERS,
    DEFAULT_MAX_DELAY,
    OPEN_STATES,
    RunCancel,
    RunPage,
    RunRecord,
    RunState,
    check_reason,
    check_run,
    is_run_id,
    run_idle_ttl,
    run_ttl,
    zero_counters,
)

_STATES: dict[str, RunState] = {s: s for s in ("running", "paused", "done", "cancelled")}
#: Parked bodies moved back per script call at resume (bounded work per call).
UNPARK_CHUNK = 500


def _record(run_id: str, h: dict[str, str]) -> RunRecord:
    total = zero_counters()
    by_type: dict[str, dict[str, int]] = {}
    for field, value in h.items():
        if field.startswith("c:"):
            total[field[2:]] = int(value)
        elif field.startswith("t:"):
            automation_type, _, name = field[2:].rpartition(":")
            by_type.setdefault(automation_type, zero_counters())[name] = int(value)
    oc = h.get("oc")
    types = h.get("ty")
    finished = h.get("finished_at")
    state = h.get("state", "running")
    budget = h.get("bg")
    paused_at = h.get("pa")
    return RunRecord(
        id=run_id,
        name=h.get("name") or None,
        on_complete=None if oc is None else json.loads(oc),
        state=_STATES.get(state, "running"),
        created_at=float(h.get("created_at", 0.0)),
        finished_at=None if finished is None else float(finished),
        counters={n: total.get(n, 0) for n in COUNTERS},
        by_type=by_type,
        types=None if types is None else tuple(json.loads(types)),
        max_delay_seconds=float(h.get("md", DEFAULT_MAX_DELAY)),
        budget=None if budget is None else json.loads(budget),
        paused_reason=h.get("pr") if state == "paused" else None,
        paused_at=None if paused_at is None or state != "paused" else float(paused_at),
    )


class RedisRuns(RedisPart, Runs):
    """The :class:`Runs` capability on Redis."""

    async def create(
        self,
        *,
        name: str | None = None,
        on_complete: dict[str, Any] | None = None,
        types: tuple[str, ...] | None = None,
        max_delay_seconds: float = DEFAULT_MAX_DELAY,
        budget: dict[str, float] | None = None,
    ) -> str:
        self._not_on_cluster("runs (docs/runs.md)")
        on_complete, types, max_delay = check_run(on_complete, types, max_delay_seconds)
        caps = check_budget(budget)
        run_id = new_id()
        t = now()
        fields = ["state", "running", "created_at", repr(t), "md", repr(max_delay)]
        if name is not None:
            fields += ["name", name]
        if on_complete is not None:
            fields += ["oc", dumps(on_complete)]
        if types is not None:
            fields += ["ty", dumps(list(types))]
        if caps is not None:
            fields += ["bg", dumps(caps)]
        key = self._keys.run(run_id)
        with self._guard():
            await self._lane.execute("HSET", key, *fields)
            # Created and never started, it expires idle (the scripts that move it
            # push this forward: lua/run_common.lua run_touch).
            await self._lane.execute("PEXPIRE", key, int(run_idle_ttl() * 1000) + 1)
            await self._lane.execute("ZADD", self._keys.RUN_INDEX, repr(t), run_id)
            # Where the script that ends the run publishes it (its database's prefix).
            await self._lane.execute(
                "SET", self._keys.RUN_CHANNEL, self._keys.event_prefix(self._core._endpoint.db)
            )
            await self._prune(t)
        return run_id

    async def _prune(self, t: float) -> None:
        # Index entries of runs whose hash expired (RUN_TTL after they ended), a few
        # at a time from the oldest: bounded work per create.
        old = await self._lane.execute("ZRANGE", self._keys.RUN_INDEX, 0, 9)
        gone = [r for r in old if not await self._lane.execute("EXISTS", self._keys.run(r))]
        if gone:
            await self._lane.execute("ZREM", self._keys.RUN_INDEX, *gone)

    async def get(self, run_id: str) -> RunRecord | None:
        if not is_run_id(run_id):
            return None  # nothing that is not a run id is ever read as a key
        with self._guard():
            flat = await self._lane.execute("HGETALL", self._keys.run(run_id))
        if not flat:
            return None
        h = _hash(flat)
        return _record(run_id, h) if "state" in h else None

    async def page(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        limit = max(limit, 1)
        with self._guard():
            top = "+inf"
            if after is not None:
                score = await self._lane.execute("ZSCORE", self._keys.RUN_INDEX, after)
                top = "+inf" if score is None else f"({score}"
            ids = await self._lane.execute(
                "ZREVRANGEBYSCORE", self._keys.RUN_INDEX, top, "-inf", "LIMIT", 0, limit + 1
            )
        found = [r for r in [await self.get(i) for i in ids[:limit]] if r is not None]
        return RunPage(found, found[-1].id if len(ids) > limit and found else None)

    async def cancel(self, run_id: str) -> RunCancel | None:
        self._not_on_cluster("runs (docs/runs.md)")
        if not is_run_id(run_id):
            return None
        with self._guard():
            answer = await self._scripts.run_cancel(
                self._lane, [self._keys.run(run_id)], [repr(now()), str(int(run_ttl() * 1000) + 1)]
            )
        if answer is None:
            return None
        stopping: list[tuple[str, str]] = []
        was_open = answer[0] in OPEN_STATES
        if was_open:
            for member in answer[1:]:
                automation_type, _, task_id = str(member).partition("|")
                qkeys = self._keys.queue_keys(automation_type, now())
                with self._guard():
                    outcome = await self._scripts.cancel(self._lane, qkeys, [repr(now()), task_id])
                if outcome == "cancelling":
                    stopping.append((automation_type, task_id))
        record = await self.get(run_id)
        if record is None:
            return None
        if was_open:
            await self._publish("ended", record)
        return RunCancel(record, tuple(stopping))

    async def _publish(self, event: str, record: RunRecord) -> None:
        message = dumps({"event": event, **record.to_dict()})
        channel = self._keys.event_channel("runs", self._core._endpoint.db)
        with self._guard():
            await self._lane.execute("PUBLISH", channel, message)

    async def pause(self, run_id: str, reason: str = "paused by an operator") -> RunRecord | None:
        self._not_on_cluster("runs (docs/runs.md)")
        why = check_reason(reason)
        if not is_run_id(run_id):
            return None
        with self._guard():
            answer = await self._scripts.run_pause(
                self._lane, [self._keys.run(run_id)], ["pause", repr(now()), why]
            )
        if answer is None:
            return None
        record = await self.get(run_id)
        if record is not None and len(answer) > 1:
            await self._publish("paused", record)
        return record

    async def resume(self, run_id: str, budget: dict[str, float] | None = None) -> RunRecord | None:
        self._not_on_cluster("runs (docs/runs.md)")
        caps = check_budget(budget)
        if not is_run_id(run_id):
            return None
        with self._guard():
            answer = await self._scripts.run_pause(
                self._lane,
                [self._keys.run(run_id)],
                ["resume", repr(now()), "" if caps is None else dumps(caps)],
            )
        if answer is None:
            return None
        for member in answer[1:]:
            # Each type's parked tasks back into its queue, a chunk a call.
            automation_type = str(member)
            while True:
                qkeys = self._keys.queue_keys(automation_type, now())
                with self._guard():
                    left = await self._scripts.run_unpark(
                        self._lane, qkeys, [run_id, repr(now()), str(UNPARK_CHUNK)]
                    )
                if int(left) == 0:
                    break
        record = await self.get(run_id)
        if record is not None and answer[0] == "paused":
            await self._publish("resumed", record)
        return record


def _hash(flat: Any) -> dict[str, str]:
    if isinstance(flat, dict):
        return {str(k): str(v) for k, v in flat.items()}
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


__all__ = ["RedisRuns"]
