"""Runs on the SQLite backend (``runs``, ``run_keys``; ``tasks.run``).

Every function takes a connection already inside the write transaction of the
task operation that moves the run, so a run's counters, its end and its
callback push commit together with that operation or not at all. The rule is the
pure one of :mod:`fleet.core.runs`. A run's counters live as JSON in its row
(``{"*": totals, "<type>": per type}``): one read and one write per event, and
nothing at all for a task without a run. ``unique_key`` sets are exact
(``run_keys``, per run and task type), deleted when the run ends. A running run
expires at ``idle_until``, pushed forward by every event of it: a read does not see
it past that, and the sweep (``queue.sweep``) deletes it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from fleet.backends.sqlite.conn import SQLiteDB
from fleet.backends.sqlite.events import publish
from fleet.backends.sqlite.watch import Watcher
from fleet.core.budgets import check_budget, over
from fleet.core.capabilities.runs import Runs
from fleet.core.records import PushRequest, PushResult, TaskBody, dumps, new_id, now
from fleet.core.runs import (
    COUNTERS,
    DEFAULT_MAX_DELAY,
    OPEN_STATES,
    RunCancel,
    RunEvent,
    RunPage,
    RunRecord,
    callback_payload,
    callback_task_id,
    check_reason,
    check_run,
    deltas,
    ends_now,
    idle_until,
    is_run_id,
    run_idle_ttl,
    run_ttl,
    zero_counters,
)

_COLUMNS = (
    "id, name, on_complete, state, created_at, finished_at, counters, types, max_delay, "
    "budget, paused_reason, paused_at"
)
#: A run that a read still sees: ended within the run ttl, or running and not idle
#: past its ``idle_until`` (the parameters: now - run ttl, now).
_KEPT = "(CASE WHEN finished_at IS NULL THEN idle_until > ? ELSE finished_at > ? END)"
_LEAVES = frozenset(("done", "dead", "cancelled", "expired"))


def _record(row: tuple[Any, ...]) -> RunRecord:
    (run_id, name, on_complete, state, created_at, finished_at, counters, types, max_delay,
     budget, paused_reason, paused_at) = row  # fmt: skip
    data: dict[str, dict[str, int]] = json.loads(counters)
    total = zero_counters()
    total.update(data.pop("*", {}))
    by_type = {t: {n: int(c.get(n, 0)) for n in COUNTERS} for t, c in data.items()}
    return RunRecord(
        id=run_id,
        name=name,
        on_complete=None if on_complete is None else json.loads(on_complete),
        state=state,
        created_at=float(created_at),
        finished_at=None if finished_at is None else float(finished_at),
        counters=total,
        by_type=by_type,
        types=None if types is None else tuple(json.loads(types)),
        max_delay_seconds=float(max_delay),
        budget=None if budget is None else json.loads(budget),
        paused_reason=paused_reason,
        paused_at=None if paused_at is None else float(paused_at),
    )


def prune(conn: sqlite3.Connection, now: float, limit: int = 100) -> int:
    """Forget up to ``limit`` runs that ended more than ``FLEET_RUN_TTL_SECONDS`` ago,
    and up to ``limit`` running ones idle past their ``idle_until`` (with their
    ``unique_key`` sets); how many."""
    gone = conn.execute(
        "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE finished_at IS NOT NULL "
        "AND finished_at <= ? LIMIT ?)",
        (now - run_ttl(), limit),
    ).rowcount
    idle = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM runs WHERE finished_at IS NULL AND idle_until <= ? LIMIT ?",
            (now, limit),
        )
    ]
    for run_id in idle:
        conn.execute("DELETE FROM run_keys WHERE run = ?", (run_id,))
        conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    return gone + len(idle)


def create(
    conn: sqlite3.Connection,
    name: str | None,
    on_complete: dict[str, Any] | None,
    now: float,
    types: tuple[str, ...] | None = None,
    max_delay: float = DEFAULT_MAX_DELAY,
    budget: dict[str, float] | None = None,
) -> str:
    prune(conn, now)
    run_id = new_id()
    conn.execute(
        "INSERT INTO runs (id, seq, name, on_complete, state, created_at, counters, types, "
        "max_delay, idle_until, budget) VALUES ("
        "?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs), ?, ?, 'running', ?, '{}', ?, ?, ?, ?)",
        (
            run_id,
            name,
            None if on_complete is None else dumps(on_complete),
            now,
            None if types is None else dumps(list(types)),
            max_delay,
            idle_until(now),
            None if budget is None else dumps(budget),
        ),
    )
    return run_id


def get(conn: sqlite3.Connection, run_id: str, now: float) -> RunRecord | None:
    if not is_run_id(run_id):
        return None
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM runs WHERE id = ? AND {_KEPT}", (run_id, now, now - run_ttl())
    ).fetchone()
    return None if row is None else _record(row)


def page(conn: sqlite3.Connection, after: str | None, limit: int, now: float) -> RunPage:
    limit = max(limit, 1)
    cut = None
    if after is not None:
        found = conn.execute("SELECT seq FROM runs WHERE id = ?", (after,)).fetchone()
        cut = None if found is None else int(found[0])
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM runs WHERE seq < ? AND {_KEPT} ORDER BY seq DESC LIMIT ?",
        (cut if cut is not None else 2**62, now, now - run_ttl(), limit + 1),
    ).fetchall()
    runs = [_record(r) for r in rows[:limit]]
    return RunPage(runs, runs[-1].id if len(rows) > limit else None)


def admit(
    conn: sqlite3.Connection, req: PushRequest, automation_type: str, now: float
) -> PushResult | None:
    """None if ``req`` (of a task with a run) may be queued, else what its push
    answers: a duplicate (its ``unique_key`` was seen in this type: counted), or
    not queued (``refused="delay"`` past the run's ``max_delay_seconds``; else the
    run is not running, or expired)."""
    verdict = _admit(conn, req.body, req.unique_key, automation_type, now, req.delay_seconds)
    if verdict == "ok":
        return None
    refused = "delay" if verdict == "delay" else None
    return PushResult(req.body.id, False, duplicate=verdict == "duplicate", refused=refused)


def _admit(
    conn: sqlite3.Connection,
    body: TaskBody,
    unique_key: str | None,
    automation_type: str,
    now: float,
    delay: float,
) -> str:
    row = conn.execute(
        "SELECT state, max_delay, idle_until FROM runs WHERE id = ?", (body.run,)
    ).fetchone()
    if row is None or row[0] not in OPEN_STATES or row[2] <= now:
        return "refused"
    if delay > row[1]:
        return "delay"
    if unique_key is not None:
        added = conn.execute(
            "INSERT OR IGNORE INTO run_keys (run, type, key) VALUES (?, ?, ?)",
            (body.run, automation_type, unique_key),
        ).rowcount
        if not added:
            event(conn, str(body.run), automation_type, "duplicate", now)
            return "duplicate"
    if delay > 0:
        # The task counts as moving when it is due: the run lives at least that long.
        conn.execute(
            "UPDATE runs SET idle_until = MAX(idle_until, ?) WHERE id = ?",
            (idle_until(now, delay), body.run),
        )
    return "ok"


#: The callback a finishing event asks the caller to push: ``(type, request)``.
Callback = tuple[str, PushRequest]


def event(
    conn: sqlite3.Connection,
    run_id: str | None,
    automation_type: str,
    what: RunEvent,
    now: float,
    *,
    from_running: bool = False,
) -> Callback | None:
    """One task event of the run ``run_id`` (nothing if None or gone). When the rule
    ends the run, it is ended here and its callback returned, for the caller to push
    in this same transaction (``queue.run_event`` does)."""
    if run_id is None:
        return None
    return events(conn, run_id, automation_type, [(what, from_running)], now)


def events(
    conn: sqlite3.Connection,
    run_id: str,
    automation_type: str,
    moves: list[tuple[RunEvent, bool]],
    now: float,
) -> Callback | None:
    """Several task events of one run in one step (``(event, from_running)`` each):
    one read and one write of its row, the rule checked once after all of them.
    The same as one :func:`event` after another when no intermediate state could end
    the run: what a push (``queued``), a reserve (``started``) or an ack (``done``,
    ``cancelled``) moves."""
    row = conn.execute(
        "SELECT state, counters, on_complete, finished_at, idle_until FROM runs WHERE id = ?",
        (run_id,),
    ).fetchone()
    if row is None or (row[3] is None and row[4] <= now):
        return None  # unknown, or running and expired (as if the sweep had deleted it)
    state, raw, on_complete, _, _ = row
    data: dict[str, dict[str, int]] = json.loads(raw)
    total = data.setdefault("*", {})
    per_type = data.setdefault(automation_type, {})
    for what, from_running in moves:
        for name, delta in deltas(what, from_running=from_running):
            total[name] = total.get(name, 0) + delta
            per_type[name] = per_type.get(name, 0) + delta
    if not ends_now(state, total):
        conn.execute(
            "UPDATE runs SET counters = ?, idle_until = CASE WHEN finished_at IS NULL "
            "THEN MAX(idle_until, ?) ELSE idle_until END WHERE id = ?",
            (dumps(data), now + run_idle_ttl(), run_id),
        )
        return None
    conn.execute(
        "UPDATE runs SET counters = ?, state = 'done', finished_at = ? WHERE id = ?",
        (dumps(data), now, run_id),
    )
    return ended(conn, run_id, now, None if on_complete is None else json.loads(on_complete))


class RunTally:
    """The ``queued`` events of one push, or the ``started``, ``done`` and ``cancelled``
    events of one reserve or ack, applied together before its transaction ends
    (:func:`events`): one read and one write of each run's row however many of its
    tasks moved."""

    def __init__(self) -> None:
        self.moves: dict[str, list[tuple[RunEvent, bool]]] = {}

    def add(self, run_id: str | None, what: RunEvent, from_running: bool = False) -> None:
        if run_id is not None:
            self.moves.setdefault(run_id, []).append((what, from_running))

    def flush(
        self,
        conn: sqlite3.Connection,
        automation_type: str,
        now: float,
        push: Callable[[sqlite3.Connection, str, list[PushRequest], float], Any],
    ) -> None:
        """Apply the events; ``push`` (``queue.push``) queues a callback in this
        transaction when one of the runs ends."""
        for run_id, moves in self.moves.items():
            callback = events(conn, run_id, automation_type, moves, now)
            if callback is not None:
                push(conn, callback[0], [callback[1]], now)
        self.moves.clear()


def ended(
    conn: sqlite3.Connection, run_id: str, now: float, on_complete: dict[str, Any] | None
) -> Callback | None:
    """What follows a run's end: its keys go, the ``runs`` event is published, and
    its callback (if it ended done with one) is returned."""
    conn.execute("DELETE FROM run_keys WHERE run = ?", (run_id,))
    record = get(conn, run_id, now)
    if record is None:
        return None
    publish(conn, "runs", {"event": "ended", **record.to_dict()}, now)
    if record.state != "done" or on_complete is None:
        return None
    body = TaskBody(
        id=callback_task_id(run_id),
        payload=callback_payload(on_complete, record),
        enqueued_at=now,
    )
    return str(on_complete["type"]), PushRequest(body)


def pause(conn: sqlite3.Connection, run_id: str, reason: str, now: float) -> RunRecord | None:
    """Pause a running run (its queued tasks wait, parked at their next reserve); the
    ``runs`` event ``paused`` says why. A run in another state is answered as it is."""
    record = get(conn, run_id, now)
    if record is None or record.state != "running":
        return record
    conn.execute(
        "UPDATE runs SET state = 'paused', paused_reason = ?, paused_at = ? WHERE id = ?",
        (reason, now, run_id),
    )
    after = get(conn, run_id, now)
    if after is not None:
        publish(conn, "runs", {"event": "paused", **after.to_dict()}, now)
    return after


def mark_running(
    conn: sqlite3.Connection, run_id: str, budget: dict[str, float] | None, now: float
) -> tuple[RunRecord | None, bool]:
    """A paused run runs again (and a running one keeps running), with ``budget`` if
    given; the record, and whether it was paused (the caller,
    ``queue_admin.run_resume``, queues its parked tasks again in this transaction)."""
    record = get(conn, run_id, now)
    if record is None or record.state not in OPEN_STATES:
        return record, False
    conn.execute(
        "UPDATE runs SET state = 'running', paused_reason = NULL, paused_at = NULL, "
        "budget = COALESCE(?, budget) WHERE id = ?",
        (None if budget is None else dumps(budget), run_id),
    )
    after = get(conn, run_id, now)
    if after is not None and record.state == "paused":
        publish(conn, "runs", {"event": "resumed", **after.to_dict()}, now)
    return after, record.state == "paused"


def is_paused(conn: sqlite3.Connection, run_id: str) -> bool:
    """True if the run is paused (its tasks are parked, not delivered)."""
    row = conn.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchone()
    return row is not None and row[0] == "paused"


def spent(conn: sqlite3.Connection, run_id: str, meters: dict[str, float], now: float) -> None:
    """The run's meters are now ``meters``: a running run past its budget pauses
    (:func:`fleet.core.budgets.over`), in the transaction that added them."""
    row = conn.execute("SELECT state, budget FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None or row[0] != "running" or row[1] is None:
        return
    reason = over(json.loads(row[1]), meters)
    if reason is not None:
        pause(conn, run_id, reason, now)


def mark_cancelled(conn: sqlite3.Connection, run_id: str, now: float) -> list[tuple[str, str]]:
    """End a running run ``cancelled``; its live tasks as ``(type, id)`` (the caller,
    ``queue_admin.run_cancel``, cancels them in this transaction)."""
    conn.execute(
        "UPDATE runs SET state = 'cancelled', finished_at = ?, paused_reason = NULL, "
        "paused_at = NULL WHERE id = ?",
        (now, run_id),
    )
    ended(conn, run_id, now, None)
    rows = conn.execute(
        "SELECT type, id FROM tasks WHERE run = ? AND state IN ('queued', 'scheduled', "
        "'processing', 'parked')",
        (run_id,),
    ).fetchall()
    return [(str(t), str(i)) for t, i in rows]


class SQLiteRuns(Runs):
    """The :class:`Runs` capability on SQLite: one transaction each."""

    def __init__(
        self,
        db: SQLiteDB,
        watcher: Watcher,
        cancel_tasks: Callable[[sqlite3.Connection, str, float], RunCancel | None],
        resume_tasks: Callable[
            [sqlite3.Connection, str, dict[str, float] | None, float], RunRecord | None
        ],
    ) -> None:
        self._db = db
        self._watcher = watcher
        # queue_admin.run_cancel and run_resume: they move the run's tasks (and import
        # this module).
        self._cancel_tasks = cancel_tasks
        self._resume_tasks = resume_tasks

    async def create(
        self,
        *,
        name: str | None = None,
        on_complete: dict[str, Any] | None = None,
        types: tuple[str, ...] | None = None,
        max_delay_seconds: float = DEFAULT_MAX_DELAY,
        budget: dict[str, float] | None = None,
    ) -> str:
        checked, types, max_delay = check_run(on_complete, types, max_delay_seconds)
        caps = check_budget(budget)
        return await self._db.write(
            lambda c: create(c, name, checked, now(), types, max_delay, caps)
        )

    async def get(self, run_id: str) -> RunRecord | None:
        return await self._db.read(lambda c: get(c, run_id, now()))

    async def page(self, *, after: str | None = None, limit: int = 50) -> RunPage:
        return await self._db.read(lambda c: page(c, after, limit, now()))

    async def cancel(self, run_id: str) -> RunCancel | None:
        found = await self._db.write(lambda c: self._cancel_tasks(c, run_id, now()))
        self._watcher.kick()  # reservers see the cancelled tasks gone
        return found

    async def pause(self, run_id: str, reason: str = "paused by an operator") -> RunRecord | None:
        why = check_reason(reason)
        return await self._db.write(lambda c: pause(c, run_id, why, now()))

    async def resume(self, run_id: str, budget: dict[str, float] | None = None) -> RunRecord | None:
        caps = check_budget(budget)
        found = await self._db.write(lambda c: self._resume_tasks(c, run_id, caps, now()))
        self._watcher.kick()  # reservers see the parked tasks back
        return found


__all__ = [
    "SQLiteRuns", "admit", "event", "is_paused", "mark_cancelled", "mark_running", "pause",
    "spent",
]  # fmt: skip
