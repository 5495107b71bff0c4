"""Task queues of the Redis backend (``backend.queues``): every state change is one Lua script.

Times: every script gets ``now`` from Python (:func:`fleet.core.records.now`),
the one clock workers and backends compare deadlines on; Redis' own clock is
used only for key TTLs (idempotency keys), which are relative.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fleet.backends.redis import keys
from fleet.backends.redis.core import BLOCKING_GRACE, RAW, RedisPart, log
from fleet.backends.redis.records import (
    TaskRecord,
    body_with_record,
    delivered_body,
    mark_parts,
    parse_record,
    task_extras,
)
from fleet.core.attempts import attempts_of, cut_error, last_started, quote_worker
from fleet.core.capabilities import TaskQueues
from fleet.core.capabilities.queues import Taken
from fleet.core.errors import BackendUnavailable
from fleet.core.records import (
    CancelOutcome,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    QueueCounters,
    QueueDepths,
    Reservation,
    TaskBody,
    TaskInfo,
    TaskStateName,
    dumps,
    new_token,
    now,
)
from fleet.core.results import result_ttl
from fleet.core.stored import UnreadableBody, dead_body
from fleet.core.tracing import trace_id_of

#: Requests per push script call (bounds one script's run time).
PUSH_CHUNK = 500
#: Most tasks one reserve call takes (bounds one script's run time and Lua stack).
RESERVE_CHUNK = 1000
#: Leases per ack script call.
ACK_CHUNK = 1000
#: Leases per mark_started script call.
MARK_CHUNK = 1000
#: Expired leases handled per sweep script call.
SWEEP_CHUNK = 1000
#: Groups whose heads the oldest-pending age reads at most (the first by name):
#: past it the age is of those groups' tasks and the plain tiers'.
GROUP_HEADS_CAP = 1000
#: Shortest BLPOP wait (Redis rounds smaller timeouts oddly; 0 means forever).
MIN_BLOCK = 0.01

_STATE_NAMES: dict[str, TaskStateName] = {
    "q": "queued",
    "s": "scheduled",
    "p": "processing",
    "D": "done",
    "C": "cancelled",
}


def _opt_text(value: str | None) -> str:
    """Encode an optional string for a script argument ('-' means None)."""
    return "-" if value is None else "+" + value


def _expired(flat: Sequence[str]) -> tuple[tuple[str, float | None, float | None], ...]:
    """The ttl drops reserve.lua reports as ``[id, age, ttl, ...]``."""
    out = []
    for i in range(0, len(flat) - 2, 3):
        age, ttl = flat[i + 1], flat[i + 2]
        out.append((flat[i], float(age) if age else None, float(ttl) if ttl else None))
    return tuple(out)


class RedisQueues(RedisPart, TaskQueues):
    """Push, reserve, leases, DLQ and inspection of task queues."""

    def _qkeys(self, automation_type: str, t: float | None = None) -> list[str]:
        return self._keys.queue_keys(automation_type, now() if t is None else t)

    # ------------------------------------------------------------ push
    async def push(self, automation_type: str, requests: Sequence[PushRequest]) -> list[PushResult]:
        results: list[PushResult] = []
        base = self._qkeys(automation_type)
        for start in range(0, len(requests), PUSH_CHUNK):
            chunk = requests[start : start + PUSH_CHUNK]
            t = now()
            extra: list[str] = []
            rows: list[list[Any]] = []
            bodies: list[str] = []
            for req in chunk:
                body = req.body
                if body.enqueued_at <= 0:
                    body = body.evolve(enqueued_at=t)
                idem_index = 0
                if req.idempotency_key is not None:
                    extra.append(self._keys.idempotency(automation_type, req.idempotency_key))
                    idem_index = len(base) + len(extra)
                ready_at = t + req.delay_seconds if req.delay_seconds > 0 else 0
                expires = None
                if body.ttl_seconds is not None:
                    expires = repr(body.enqueued_at + body.ttl_seconds)
                # The record keeps the submitted time (row[9]): the list need not.
                bodies.append(body.to_json(enqueued_at=False))
                row = [
                    body.id,
                    body.priority,
                    ready_at,
                    idem_index,
                    max(1, int(req.idempotency_ttl * 1000)),
                    body.attempt,
                    body.max_attempts,
                    expires,
                    body.group,
                    repr(body.enqueued_at),
                ]
                if body.traceparent is not None or body.run is not None:
                    # kept in the record: the trace id for task_state, the run for
                    # run_common.lua (and the run's unique key, at push only)
                    row.append(trace_id_of(body.traceparent) if body.traceparent else None)
                    if body.run is not None:
                        row += [body.run, req.unique_key]
                rows.append(row)
            argv = [repr(t), dumps(rows), *bodies]
            with self._guard():
                raw = await self._scripts.push(self._lane, base + extra, argv)
            for i in range(0, len(raw), 2):
                # 1 queued, 0 duplicate, 2 refused (its run ended), 3 refused (delayed
                # past its run's max_delay_seconds)
                code = int(raw[i])
                results.append(
                    PushResult(
                        str(raw[i + 1]),
                        queued=code == 1,
                        duplicate=code == 0,
                        refused="delay" if code == 3 else None,
                    )
                )
        return results

    # ------------------------------------------------------------ reserve
    async def _take(
        self,
        automation_type: str,
        k: int,
        visibility_seconds: float,
        default_max_attempts: int,
    ) -> Taken:
        k = max(1, min(int(k), RESERVE_CHUNK))
        t = now()
        deadline = t + visibility_seconds
        argv: list[Any] = [repr(t), k, repr(deadline), default_max_attempts, new_token()]
        with self._guard():
            raw = await self._scripts.reserve(self._lane, self._qkeys(automation_type, t), argv)
        n = len(raw)
        expired: tuple[tuple[str, float | None, float | None], ...] = ()
        if n % 3 == 2:
            # A trailing element: the tasks dropped for their ttl (see reserve.lua).
            expired = _expired(raw[-1])
            n -= 1
        out: list[Reservation] = []
        for i in range(1, n, 3):
            try:
                out.append(Reservation(delivered_body(raw[i], raw[i + 1]), raw[i + 2], deadline))
            except (KeyError, TypeError, ValueError) as exc:  # JSON, but not a task body
                await self._bury_unreadable(automation_type, raw[i], raw[i + 2], exc)
        next_due = float(raw[0]) if raw[0] else None
        return Taken(out, next_due, expired=expired)

    async def _wait_for_work(self, automation_type: str, signal: int, seconds: float) -> bool:
        # BLPOP's timeout has a resolution: a shorter block would return at once.
        return await self._wait_wake(automation_type, max(seconds, MIN_BLOCK))

    async def _wait_wake(self, automation_type: str, seconds: float) -> bool:
        """Block on the type's wake-up list for at most ``seconds`` (one BLPOP on
        the blocking pool). A cancelled wait drops its connection, so a half-read
        reply can never confuse a later command, and puts a token back in case it
        had consumed one meant for another reserver (a spare wake-up is harmless).
        True if a wake-up token arrived, False on timeout (or close)."""
        wake_key = self._keys.queue_wake(automation_type)
        # The BLPOP runs as its own task so close() can end it (see _close_clients).
        blpop = asyncio.ensure_future(self._b.blpop([wake_key], timeout=seconds))
        self._blocked.add(blpop)
        try:
            with self._guard():
                try:
                    async with asyncio.timeout(seconds + BLOCKING_GRACE):
                        popped = await blpop
                except TimeoutError as exc:
                    raise self._unavailable(exc) from exc
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._closed and (me is None or me.cancelling() == 0):
                return False  # ended by close(), not by our caller
            if not self._closed:
                self._spawn(self._give_back_wake(wake_key))
            raise
        except BackendUnavailable:
            if self._closed:
                return False  # close() dropped the connection under us: end quietly
            raise
        finally:
            self._blocked.discard(blpop)
        return popped is not None

    async def _give_back_wake(self, wake_key: str) -> None:
        with contextlib.suppress(Exception):
            await self._r.lpush(wake_key, "1")

    # ------------------------------------------------------------ lease ends
    async def ack(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        out: list[bool] = []
        worker = "" if worker_id is None else quote_worker(worker_id)
        for start in range(0, len(leases), ACK_CHUNK):
            t = now()
            base = self._qkeys(automation_type, t)
            flat: list[str] = []
            for task_id, token in leases[start : start + ACK_CHUNK]:
                flat += [task_id, token]
            argv = [repr(t), dumps(flat), worker]
            with self._guard():
                raw = await self._scripts.ack(self._lane, base, argv)
            out += [bool(int(x)) for x in raw]
        return out

    async def mark_started(
        self,
        automation_type: str,
        leases: Sequence[tuple[str, str]],
        *,
        worker_id: str | None = None,
    ) -> list[bool]:
        out: list[bool] = []
        worker = "" if worker_id is None else quote_worker(worker_id)
        script = self._scripts.mark_started
        for start in range(0, len(leases), MARK_CHUNK):
            flat: list[str] = []
            for task_id, token in leases[start : start + MARK_CHUNK]:
                flat += [task_id, token]
            with self._guard():
                raw = await script(
                    self._lane, self._qkeys(automation_type), [dumps(flat), repr(now()), worker]
                )
            out += [bool(int(x)) for x in raw]
        return out

    async def nack(
        self,
        automation_type: str,
        task_id: str,
        token: str,
        *,
        delay_seconds: float,
        error: str | None = None,
        traceback: str | None = None,
        dead: bool = False,
        worker_id: str | None = None,
        started_at: float | None = None,
    ) -> NackOutcome:
        argv = [
            repr(now()),
            task_id,
            token,
            repr(float(delay_seconds)),
            "1" if dead else "0",
            _opt_text(error),
            _opt_text(traceback),
            "" if worker_id is None else quote_worker(worker_id),
            "" if started_at is None else repr(float(started_at)),
            _opt_text(cut_error(error)),
        ]
        with self._guard():
            raw = await self._scripts.nack(self._lane, self._qkeys(automation_type), argv)
        outcome: NackOutcome = raw
        return outcome

    async def release(self, automation_type: str, task_id: str, token: str) -> bool:
        with self._guard():
            raw = await self._scripts.release(
                self._lane, self._qkeys(automation_type), [task_id, token, repr(now())]
            )
        return bool(int(raw))

    async def extend(
        self, automation_type: str, task_id: str, token: str, visibility_seconds: float
    ) -> LeaseStatus:
        argv = [repr(now()), task_id, token, repr(float(visibility_seconds))]
        with self._guard():
            raw = await self._scripts.extend(self._lane, self._qkeys(automation_type), argv)
        return LeaseStatus(raw)

    async def sweep(self, automation_type: str) -> int:
        total = 0
        base = self._qkeys(automation_type)
        while True:
            with self._guard():
                requeued, seen = await self._scripts.sweep(
                    self._lane, base, [repr(now()), SWEEP_CHUNK]
                )
            total += int(requeued)
            if int(seen) < SWEEP_CHUNK:
                return total

    # ------------------------------------------------------------ dead letters
    async def _bury_unreadable(
        self, automation_type: str, raw_body: str, token: str, error: Exception
    ) -> None:
        """Dead-letter a delivered body that is JSON with an id but not a task body
        (pushed by hand): delivering it would fail every reserve that takes it."""
        task_id = _body_id(raw_body)
        why = f"{type(error).__name__}: {error}"
        log.warning(
            "%s: task %s has a stored body that cannot be read (%s): dead-lettered",
            automation_type,
            task_id,
            why,
        )
        if task_id is not None:
            error_text = f"the stored body could not be read ({why}): dead-lettered at reserve"
            await self.nack(
                automation_type, task_id, token, delay_seconds=0, error=error_text, dead=True
            )

    async def dead_peek(self, automation_type: str, n: int = 50) -> list[TaskBody]:
        qkeys = self._qkeys(automation_type)
        with self._guard():
            try:
                raw = await self._scripts.dead(self._lane, qkeys, ["peek", n])
            except UnicodeDecodeError:  # an entry that is not UTF-8: read them as bytes
                raw = await self._dead_peek_raw(qkeys[6], qkeys[11], n)
        return [_dead_entry(raw[i], raw[i + 1]) for i in range(0, len(raw), 2)]

    async def _dead_peek_raw(self, dead_key: str, info_key: str, n: int) -> list[Any]:
        """``peek`` of dead.lua over redis-py with replies as bytes: the entries as
        text where they are UTF-8 (bytes where not), each with its record or ''."""
        items = await self._r.execute_command("LRANGE", dead_key, 0, max(n, 1) - 1, **RAW)
        texts: list[str | bytes] = []
        for item in items[: max(n, 0)]:
            try:
                texts.append(item.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(item)
        ids = [_body_id(t) if isinstance(t, str) else None for t in texts]
        wanted = [i for i in ids if i is not None]
        infos = await self._r.hmget(info_key, wanted) if wanted else []
        info_of = dict(zip(wanted, infos, strict=True))
        out: list[Any] = []
        for text, task_id in zip(texts, ids, strict=True):
            out += [text, (info_of.get(task_id) if task_id is not None else None) or ""]
        return out

    async def dead_replay(
        self, automation_type: str, *, n: int | None = None, task_ids: Sequence[str] | None = None
    ) -> int:
        if task_ids is not None:
            if not task_ids:
                return 0
            argv: list[Any] = ["replay_ids", *task_ids]
        else:
            argv = ["replay", -1 if n is None else max(0, n)]
        with self._guard():
            raw = await self._scripts.dead(self._lane, self._qkeys(automation_type), argv)
        return int(raw)

    async def dead_clear(self, automation_type: str) -> int:
        with self._guard():
            raw = await self._scripts.dead(self._lane, self._qkeys(automation_type), ["clear"])
        return int(raw)

    # ------------------------------------------------------------ inspection
    async def depths(self, automation_type: str) -> QueueDepths:
        k = self._qkeys(automation_type)
        normal, high, low, proc, _pb, sched, dead, tasks, counters = k[:9]
        with self._guard():
            async with self._pipeline(transaction=True) as pipe:
                pipe.llen(high).llen(normal).llen(low)
                pipe.zcard(proc).zcard(sched).llen(dead).hgetall(counters)
                pipe.lindex(high, 0).lindex(normal, 0).lindex(low, 0)
                # Tasks waiting in groups count in their tiers too.
                pipe.hmget(k[keys.GROUPS_META], ["high", "normal", "low"])
                res = await pipe.execute()
        heads = [h for h in res[7:10] if h is not None]
        for i, grouped in enumerate(res[10]):
            res[i] = int(res[i]) + int(grouped or 0)
        if any(int(g or 0) > 0 for g in res[10]):
            heads += await self._group_heads(k)
        t = now()
        times = await self._submitted_times(tasks, heads)
        oldest = min(times, default=None)
        c = {name: int(v) for name, v in res[6].items()}
        return QueueDepths(
            high=int(res[0]),
            normal=int(res[1]),
            low=int(res[2]),
            processing=int(res[3]),
            scheduled=int(res[4]),
            dead=int(res[5]),
            oldest_pending_age=None if oldest is None else max(t - oldest, 0.0),
            counters=QueueCounters(**{f: c.get(f, 0) for f in QueueCounters.__dataclass_fields__}),
        )

    async def state(self, automation_type: str, task_id: str) -> TaskInfo:
        with self._guard():
            where, raw, score, *extras = await self._scripts.task_state(
                self._lane, self._qkeys(automation_type), [task_id]
            )
        info = self._bare_state(task_id, where, raw, score)
        try:
            rec: TaskRecord | None = parse_record(raw) if raw else None
        except (TypeError, ValueError):
            rec = None
        extra = task_extras(rec, *extras)
        if rec is None:
            return info.with_extras(**extra)
        ran = attempts_of(
            rec.attempts,
            state=info.state,
            attempt=info.attempt,
            started_at=extra["started_at"],
            finished_at=info.finished_at,
            worker=mark_parts(extras[0])[1] if info.state == "processing" else rec.worker,
        )
        if info.state == "dead":
            extra["started_at"] = last_started(ran)
        return replace(info.with_extras(**extra), attempts=ran)

    def _bare_state(self, task_id: str, where: str, raw: str, score: str) -> TaskInfo:
        if where == "none":
            return TaskInfo(task_id=task_id, state="unknown")
        try:
            rec = parse_record(raw)
        except (TypeError, ValueError) as exc:  # written by something else
            error = f"the stored state record could not be read: {exc}"
            return TaskInfo(
                task_id=task_id, state="dead" if where == "dead" else "unknown", last_error=error
            )
        state: TaskStateName = "dead" if where == "dead" else _STATE_NAMES.get(rec.state, "unknown")
        if state in ("done", "cancelled"):
            finished = rec.finished_at or 0.0
            if finished < now() - result_ttl():
                return TaskInfo(task_id=task_id, state="unknown")
        return TaskInfo(
            task_id=task_id,
            state=state,
            attempt=rec.attempt or 0,
            max_attempts=rec.max_attempts or 0,
            priority=rec.priority,
            last_error=rec.last_error,
            traceback=rec.traceback,
            deadline=float(score) if state == "processing" and score else None,
            ready_at=float(score) if state == "scheduled" and score else None,
            finished_at=rec.finished_at if state in ("done", "cancelled") else rec.failed_at,
            trace_id=rec.trace_id,
        )

    async def _group_heads(self, k: list[str]) -> list[str]:
        """The head bodies of the group lists of the first :data:`GROUP_HEADS_CAP`
        groups by name (only read when some task waits in a group)."""
        names_key = k[keys.GROUPS_META - 1]
        prefix = k[keys.GROUPS_META + 1]
        with self._guard():
            names = await self._r.zrange(names_key, 0, GROUP_HEADS_CAP - 1)
            if not names:
                return []
            async with self._pipeline(transaction=False) as pipe:
                for raw in names:
                    name = raw.decode() if isinstance(raw, bytes) else str(raw)
                    for tier in ("high", "normal", "low"):
                        pipe.lindex(f"{prefix}{name}:{tier}", 0)
                found = await pipe.execute()
        return [h for h in found if h is not None]

    async def _submitted_times(self, tasks_key: str, heads: list[str]) -> list[float]:
        """When each head body was submitted: its ``enqueued_at``, or, for Fleet's
        own pushes, which keep it in the record only, the record's."""
        times: list[float] = []
        missing: list[str] = []
        for head in heads:
            try:
                d = json.loads(head)
                at = d.get("enqueued_at")
                if at is None:
                    missing.append(str(d["id"]))
                else:
                    times.append(float(at))
            except (ValueError, AttributeError, TypeError, KeyError):
                continue
        if missing:
            with self._guard():
                recs = await self._live_records(tasks_key, missing)
            for raw in recs:
                try:
                    at = parse_record(str(raw)).submitted_at if raw is not None else None
                except (ValueError, TypeError):
                    continue
                if at is not None:
                    times.append(at)
        return times

    async def cancel(self, automation_type: str, task_id: str) -> CancelOutcome:
        with self._guard():
            raw = await self._scripts.cancel(
                self._lane, self._qkeys(automation_type), [repr(now()), task_id]
            )
        outcome: CancelOutcome = raw
        return outcome


def _body_id(raw_body: str) -> str | None:
    """The id of a stored body that is JSON with an id (as reserve.lua reads it)."""
    try:
        d = json.loads(raw_body)
    except ValueError:
        return None
    task_id = d.get("id") if isinstance(d, dict) else None
    if isinstance(task_id, bool) or not isinstance(task_id, str | int | float):
        return None
    return str(task_id)


def _dead_entry(raw_body: str | bytes, raw_record: str) -> TaskBody:
    """One dead letter from the DLQ's text and its state record ('' if none): the
    body with the record applied, or the marker of an entry that cannot be read."""
    body = dead_body(_body_id(raw_body) if isinstance(raw_body, str) else None, raw_body)
    if isinstance(body, UnreadableBody) or not raw_record:
        return body
    try:
        return body_with_record(str(raw_body), parse_record(raw_record))
    except (KeyError, TypeError, ValueError):
        return body  # a record that cannot be read: the body as it was stored
