"""Task queue transactions of the SQLite backend.

Every function takes a connection that is already inside a transaction (the
caller opens ``BEGIN IMMEDIATE`` for writes) and the current time, so each is
one atomic step and can be tested without an event loop. Queue order lives in
``tasks(tier, seq)``: the tail of a tier is ``MAX(seq) + 1``, the head
``MIN(seq) - 1``, both one index probe; a task with a group queues in its
group's line of its tier instead (:mod:`fleet.backends.sqlite.group_book`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet.backends.sqlite import day_budget, records, runs
from fleet.backends.sqlite.group_book import Book
from fleet.backends.sqlite.idempotency import SWEEP_PRUNE_LIMIT, key_holder, prune_idempotency
from fleet.backends.sqlite.rows import is_live, merged, tier_num
from fleet.backends.sqlite.signals import count, read_signal, signal
from fleet.core import attempts
from fleet.core.delivery import (
    at_failure,
    at_take,
    duplicate_of,
    exhausted_error,
    refund_at_loss,
)
from fleet.core.flow import GroupLimits
from fleet.core.records import (
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    Reservation,
    TaskBody,
)
from fleet.core.runs import RunEvent

log = logging.getLogger("fleet.backends.sqlite")

#: A task that is still to run (``parked``: queued in a paused run, taken by a reserve
#: and set aside until the run resumes; reported as ``queued``).
LIVE_STATES = ("queued", "scheduled", "processing", "parked")
NO_LIMITS = GroupLimits()


def run_event(
    conn: sqlite3.Connection,
    run_id: str | None,
    automation_type: str,
    what: RunEvent,
    now: float,
    *,
    from_running: bool = False,
) -> None:
    """Move the counters of ``run_id`` (a task's run; nothing if None) by one event,
    in this transaction; if that ends the run, push its callback here too."""
    if run_id is None:
        return
    callback = runs.event(conn, run_id, automation_type, what, now, from_running=from_running)
    if callback is not None:
        push(conn, callback[0], [callback[1]], now)


class _Ends:
    """Head and tail positions of each tier (or group's tier) of a type, probed once."""

    def __init__(self, conn: sqlite3.Connection, automation_type: str) -> None:
        self._conn = conn
        self._type = automation_type
        self._ends: dict[tuple[str, int, str | None], int] = {}

    def _next(self, end: str, tier: int, grp: str | None, step: int) -> int:
        key = (end, tier, grp)
        if key not in self._ends:
            # The partial index of each kind of task answers in one probe.
            where = "grp IS NULL" if grp is None else "grp = ?"
            row = self._conn.execute(
                f"SELECT {end}(seq) FROM tasks WHERE type = ? AND state = 'queued' "
                f"AND {where} AND tier = ?",
                (self._type, tier) if grp is None else (self._type, grp, tier),
            ).fetchone()
            self._ends[key] = int(row[0]) if row[0] is not None else 0
        self._ends[key] += step
        return self._ends[key]

    def tail(self, tier: int, grp: str | None = None) -> int:
        return self._next("MAX", tier, grp, 1)

    def head(self, tier: int, grp: str | None = None) -> int:
        return self._next("MIN", tier, grp, -1)


def tail_of(conn: sqlite3.Connection, automation_type: str, tier: int, grp: str | None) -> int:
    """A fresh ``seq`` at the tail of one tier (of the group ``grp``'s, if not None)."""
    return _Ends(conn, automation_type).tail(tier, grp)


_UPSERT_TASK = (
    "INSERT INTO tasks (type, id, state, tier, seq, body, attempt, max_attempts, enqueued_at, "
    "ready_at, grp, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (type, id) DO UPDATE SET state = excluded.state, tier = excluded.tier, "
    "seq = excluded.seq, body = excluded.body, attempt = excluded.attempt, grp = excluded.grp, "
    "max_attempts = excluded.max_attempts, enqueued_at = excluded.enqueued_at, "
    "ready_at = excluded.ready_at, run = excluded.run, deadline = NULL, token = NULL, "
    "cancel = 0, "
    "finished_at = NULL WHERE tasks.state IN ('done', 'cancelled')"
)


@dataclass(frozen=True, slots=True)
class Pushed:
    """Result of :func:`push`: answers, the type's new signal, tasks ready now."""

    results: list[PushResult]
    signal: int
    ready: int


def push(
    conn: sqlite3.Connection, automation_type: str, requests: Sequence[PushRequest], now: float
) -> Pushed:
    """Enqueue ``requests`` (see :meth:`TaskQueues.push`)."""
    ends = _Ends(conn, automation_type)
    book = Book(conn, automation_type, now)
    tally = runs.RunTally()
    results: list[PushResult] = []
    ready = scheduled = 0
    for req in requests:
        body = req.body
        key = req.idempotency_key
        holder = None if key is None else key_holder(conn, automation_type, key, now)
        # A task of a run is checked for a live twin here, before its run is asked;
        # any other, by the upsert below (the same rule, one statement less).
        live = body.run is not None and is_live(conn, automation_type, body.id)
        dup = duplicate_of(body.id, key_holder=holder, live=live)
        if dup is not None:
            results.append(PushResult(dup, queued=False, duplicate=True))
            continue
        if body.run is not None:
            refusal = runs.admit(conn, req, automation_type, now)
            if refusal is not None:
                results.append(refusal)
                continue
        if not body.enqueued_at:
            body = body.evolve(enqueued_at=now)
        tier = tier_num(body)
        delayed = req.delay_seconds > 0
        # One upsert: a finished task of the same id is replaced, a live one
        # (queued, scheduled, processing) is left alone and makes this a duplicate.
        inserted = conn.execute(
            _UPSERT_TASK,
            (
                automation_type,
                body.id,
                "scheduled" if delayed else "queued",
                tier,
                0 if delayed else ends.tail(tier, body.group),
                body.to_json(),
                body.attempt,
                body.max_attempts,
                body.enqueued_at,
                now + req.delay_seconds if delayed else None,
                body.group,
                body.run,
            ),
        ).rowcount
        if not inserted:
            dup = duplicate_of(body.id, key_holder=None, live=True)
            results.append(PushResult(dup or body.id, queued=False, duplicate=True))
            continue
        tally.add(body.run, "queued")
        if not delayed:
            book.joined(body.group, tier)
        if key is not None:
            prune_idempotency(conn, now, 2)
            conn.execute(
                "INSERT OR REPLACE INTO idempotency (type, key, task_id, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (automation_type, key, body.id, now + req.idempotency_ttl),
            )
        if delayed:
            scheduled += 1
        else:
            ready += 1
        results.append(PushResult(body.id, queued=True, duplicate=False))
    tally.flush(conn, automation_type, now, push)
    count(conn, automation_type, "submitted", ready + scheduled)
    n = signal(conn, automation_type, ready + scheduled) if ready + scheduled else 0
    return Pushed(results, n, ready)


def promote_due(conn: sqlite3.Connection, automation_type: str, now: float) -> int:
    """Move scheduled tasks whose ``ready_at`` passed to the tail of their tier or group."""
    due = conn.execute(
        "SELECT id, tier, grp FROM tasks WHERE type = ? AND state = 'scheduled' "
        "AND ready_at <= ? ORDER BY ready_at",
        (automation_type, now),
    ).fetchall()
    ends = _Ends(conn, automation_type)
    book = Book(conn, automation_type, now)
    for task_id, tier, grp in due:
        conn.execute(
            "UPDATE tasks SET state = 'queued', seq = ?, ready_at = NULL WHERE type = ? AND id = ?",
            (ends.tail(tier, grp), automation_type, task_id),
        )
        book.joined(grp, tier)
    return len(due)


def bury(
    conn: sqlite3.Connection,
    automation_type: str,
    body: TaskBody,
    now: float,
    *,
    from_running: bool = False,
) -> None:
    """Move a task to the DLQ (``counters.dead`` += 1; its run's ``dead`` too). The
    DLQ keeps one dead letter per id: an earlier life's goes."""
    conn.execute("DELETE FROM tasks WHERE type = ? AND id = ?", (automation_type, body.id))
    conn.execute("DELETE FROM dead WHERE type = ? AND id = ?", (automation_type, body.id))
    conn.execute(
        "INSERT INTO dead (type, id, body, dead_at) VALUES (?, ?, ?, ?)",
        (automation_type, body.id, body.to_json(), now),
    )
    count(conn, automation_type, "dead")
    run_event(conn, body.run, automation_type, "dead", now, from_running=from_running)


def bury_unreadable(
    conn: sqlite3.Connection,
    automation_type: str,
    task_id: str,
    raw: str | bytes,
    max_attempts: int | None,
    error: Exception,
    now: float,
) -> None:
    """Dead-letter a task row whose stored body cannot be read, as a body that can
    be: its id, the stored text as its payload (nothing is lost), no attempt
    charged, and a ``last_error`` saying why (``counters.dead`` += 1)."""
    row = conn.execute(
        "SELECT attempt, enqueued_at FROM tasks WHERE type = ? AND id = ?",
        (automation_type, task_id),
    ).fetchone()
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    why = f"{type(error).__name__}: {error}"
    log.warning(
        "%s: task %s has a stored body that cannot be read (%s): dead-lettered",
        automation_type,
        task_id,
        why,
    )
    body = TaskBody(
        id=task_id,
        payload=text,
        attempt=max(int(row[0]) - 1, 0) if row else 0,
        max_attempts=max_attempts,
        enqueued_at=float(row[1]) if row else now,
        last_error=f"the stored body could not be read ({why}): dead-lettered at reserve",
        failed_at=now,
    )
    bury(conn, automation_type, body, now)


@dataclass(frozen=True, slots=True)
class Reserved:
    """Result of :func:`reserve`: the leases, the signal seen, the next due time,
    and the tasks dropped for their ttl as ``(task_id, age, ttl_seconds)``, for
    the backend to log once the transaction is over."""

    reservations: list[Reservation]
    signal: int
    next_due: float | None
    expired: tuple[tuple[str, float, float | None], ...] = ()


# Rows that must not be delivered (cancelled, expired, out of attempts) are settled
# right after by _deliver, in the same transaction. The token is like new_token().
_LEASE = (
    "UPDATE tasks SET state = 'processing', attempt = attempt + 1, "
    "max_attempts = COALESCE(NULLIF(max_attempts, 0), ?), "
    "token = lower(hex(randomblob(12))), deadline = ?, started = 0 WHERE {} "
    "RETURNING tier, seq, id, body, attempt, max_attempts, token, cancel"
)
_LEASE_BATCH = _LEASE.format(
    "rowid IN (SELECT rowid FROM tasks WHERE type = ? AND state = 'queued' AND grp IS NULL "
    "ORDER BY tier, seq LIMIT ?)"
)
_LEASE_ONE = _LEASE.format("type = ? AND id = ?")


def reserve(
    conn: sqlite3.Connection,
    automation_type: str,
    *,
    k: int,
    visibility_seconds: float,
    default_max_attempts: int,
    now: float,
) -> Reserved:
    """Take up to ``k`` tasks (see :meth:`TaskQueues.reserve`), never waiting: one at a
    time by the group rule (:meth:`Book.pick`) while some group is in the rotation,
    else a batch of tasks without a group in one statement, as before groups."""
    promote_due(conn, automation_type, now)
    held = day_budget.held_until(conn, automation_type, now)
    if held is not None:  # past its daily budget: nothing is dispatched until then
        return Reserved([], read_signal(conn, automation_type), held)
    book = Book(conn, automation_type, now)
    rotating = book.start()
    # The type's limits, read in this transaction (one value for the fleet); only
    # a reserve that serves groups pays for the read.
    group_limits = book.defaults()[0] if rotating else NO_LIMITS
    out: list[Reservation] = []
    expired: list[tuple[str, float, float | None]] = []
    paused = _Paused(conn)
    deadline = now + visibility_seconds
    while len(out) < k:
        if not rotating:
            want = k - len(out)
            taken = conn.execute(
                _LEASE_BATCH, (default_max_attempts, deadline, automation_type, want)
            ).fetchall()
            taken.sort()  # RETURNING order is unspecified; queue order is (tier, seq)
            for row in taken:
                res = _deliver(conn, automation_type, row, deadline, now, expired, paused)
                if res is not None:
                    out.append(res)
            if len(taken) < want:
                break
            continue
        picked = book.pick(group_limits)
        if picked is None:
            break
        row = conn.execute(
            _LEASE_ONE, (default_max_attempts, deadline, automation_type, picked.task_id)
        ).fetchone()
        res = _deliver(conn, automation_type, row, deadline, now, expired, paused)
        if picked.group is not None:
            book.served(picked.group, res is not None, picked.tat, group_limits)
        if res is not None:
            out.append(res)
        rotating = book.rotating()  # once no group is left in it: batches again
    book.save_turn()
    tally = runs.RunTally()
    for res in out:
        tally.add(res.body.run, "started")
    tally.flush(conn, automation_type, now, push)
    if book.wake:
        signal(conn, automation_type, book.wake)
    next_due = None
    if not out:
        row = conn.execute(
            "SELECT MIN(ready_at) FROM tasks WHERE type = ? AND state = 'scheduled'",
            (automation_type,),
        ).fetchone()
        dues = [d for d in (row[0], book.next_due()) if d is not None]
        next_due = min(dues) if dues else None
    return Reserved(out, read_signal(conn, automation_type), next_due, tuple(expired))


class _Paused:
    """Whether a run is paused, read once per run in a reserve."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._seen: dict[str, bool] = {}

    def __call__(self, run_id: str | None) -> bool:
        if run_id is None:
            return False
        found = self._seen.get(run_id)
        if found is None:
            found = self._seen[run_id] = runs.is_paused(self._conn, run_id)
        return found


def _deliver(
    conn: sqlite3.Connection,
    automation_type: str,
    row: tuple[Any, ...],
    deadline: float,
    now: float,
    expired: list[tuple[str, float, float | None]],
    paused: _Paused,
) -> Reservation | None:
    """The reservation of one leased row, or None if it was settled instead."""
    _tier, _seq, task_id, raw, attempt, limit, token, cancel = row
    try:
        body = merged(raw, attempt, limit)
        body.is_expired(now)  # a ttl_seconds that is not a number raises here
    except (KeyError, TypeError, ValueError) as exc:
        # A head row that cannot be read would fail every reserve: the DLQ.
        bury_unreadable(conn, automation_type, task_id, raw, limit, exc, now)
        return None
    verdict = at_take(body, cancel=bool(cancel), attempt=attempt, max_attempts=limit, now=now)
    if verdict == "cancelled":
        # Dropped, not delivered: no attempt is charged.
        conn.execute(
            "UPDATE tasks SET attempt = attempt - 1 WHERE type = ? AND id = ?",
            (automation_type, task_id),
        )
        _finish(conn, automation_type, task_id, "cancelled", now)
        count(conn, automation_type, "cancelled")
        run_event(conn, body.run, automation_type, "cancelled", now)
    elif verdict == "expired":
        conn.execute("DELETE FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id))
        count(conn, automation_type, "expired")
        run_event(conn, body.run, automation_type, "expired", now)
        expired.append((task_id, now - body.enqueued_at, body.ttl_seconds))
    elif verdict == "exhausted":
        # The DLQ records the attempts actually made.
        error = exhausted_error(attempt, limit)
        lost = body.evolve(attempt=attempt - 1, last_error=error, failed_at=now)
        bury(conn, automation_type, lost, now)
    elif paused(body.run):
        # Its run is paused: set aside, the attempt refunded, until the run resumes.
        conn.execute(
            "UPDATE tasks SET state = 'parked', attempt = attempt - 1, token = NULL, "
            "deadline = NULL WHERE type = ? AND id = ?",
            (automation_type, task_id),
        )
    else:
        return Reservation(body=body, token=token, deadline=deadline)
    return None


def _finish(
    conn: sqlite3.Connection, automation_type: str, task_id: str, state: str, now: float
) -> None:
    # Finished states keep only what task_state reports, not the payload.
    conn.execute(
        "UPDATE tasks SET state = ?, finished_at = ?, token = NULL, deadline = NULL, "
        "ready_at = NULL, body = json_remove(body, '$.payload', '$.traceback') "
        "WHERE type = ? AND id = ?",
        (state, now, automation_type, task_id),
    )


def ack(
    conn: sqlite3.Connection,
    automation_type: str,
    leases: Sequence[tuple[str, str]],
    now: float,
    worker_id: str | None = None,
) -> list[bool]:
    """Finish owned tasks (see :meth:`TaskQueues.ack`)."""
    out: list[bool] = []
    completed = cancelled = 0
    book = Book(conn, automation_type, now)
    tally = runs.RunTally()
    for task_id, token in leases:
        row = conn.execute(
            "UPDATE tasks SET state = CASE WHEN cancel THEN 'cancelled' ELSE 'done' END, "
            "finished_at = ?, token = NULL, deadline = NULL, "
            # the acking worker, else this reservation's mark's (as ack.lua keeps it)
            "worker = COALESCE(?, CASE WHEN started THEN worker END), "
            "body = json_remove(body, '$.payload', '$.traceback') "
            "WHERE type = ? AND id = ? AND state = 'processing' AND token = ? "
            "RETURNING cancel, grp, run",
            (now, worker_id, automation_type, task_id, token),
        ).fetchone()
        if row is None:
            out.append(False)
            continue
        book.ended(row[1])
        if row[0]:
            cancelled += 1
        else:
            completed += 1
        tally.add(row[2], "cancelled" if row[0] else "done", True)
        out.append(True)
    tally.flush(conn, automation_type, now, push)
    records.prune_finished(conn, now, 2 * len(leases))
    count(conn, automation_type, "completed", completed)
    count(conn, automation_type, "cancelled", cancelled)
    if book.wake:
        signal(conn, automation_type, book.wake)
    return out


def _owned(
    conn: sqlite3.Connection, automation_type: str, task_id: str, token: str
) -> tuple[TaskBody, int, tuple[float | None, str | None]] | None:
    """The body and tier of an owned lease, and its start mark (time and worker;
    None for a reservation not marked started)."""
    row = conn.execute(
        "SELECT body, attempt, max_attempts, tier, started, started_at, worker FROM tasks "
        "WHERE type = ? AND id = ? AND state = 'processing' AND token = ?",
        (automation_type, task_id, token),
    ).fetchone()
    if row is None:
        return None
    mark = (row[5], row[6]) if row[4] else (None, None)
    return merged(row[0], row[1], row[2]), int(row[3]), mark


def nack(
    conn: sqlite3.Connection,
    automation_type: str,
    task_id: str,
    token: str,
    *,
    delay_seconds: float,
    error: str | None,
    traceback: str | None,
    dead: bool,
    now: float,
    worker_id: str | None = None,
    started_at: float | None = None,
) -> NackOutcome:
    """Fail the current attempt of an owned task (see :meth:`TaskQueues.nack`)."""
    owned = _owned(conn, automation_type, task_id, token)
    if owned is None:
        return "stale"
    body, _tier, mark = owned
    verdict = at_failure(dead=dead, attempt=body.attempt, max_attempts=body.max_attempts)
    ran = attempts.entry(
        body.attempt,
        worker_id or mark[1],
        mark[0] if started_at is None else started_at,
        now,
        verdict if verdict == "dead" else "failed",
        error,
    )
    body = body.evolve(
        last_error=error,
        traceback=traceback,
        failed_at=now,
        attempts=tuple(attempts.appended(body.attempts, ran)),
    )
    book = Book(conn, automation_type, now)
    book.ended(body.group)
    if verdict == "dead":
        bury(conn, automation_type, body, now, from_running=True)
        if book.wake:
            signal(conn, automation_type, book.wake)
        return "dead"
    # Scheduled, then (when due) at the tail of its tier or group, like a new task.
    conn.execute(
        "UPDATE tasks SET state = 'scheduled', ready_at = ?, body = ?, token = NULL, "
        "deadline = NULL WHERE type = ? AND id = ?",
        (now + max(delay_seconds, 0.0), body.to_json(), automation_type, task_id),
    )
    count(conn, automation_type, "failed")
    run_event(conn, body.run, automation_type, "requeued", now)
    signal(conn, automation_type, 1 + book.wake)
    return "retry"


def release(
    conn: sqlite3.Connection, automation_type: str, task_id: str, token: str, now: float
) -> bool:
    """Give an owned task back at the head of its tier (or group), refunding its attempt."""
    owned = _owned(conn, automation_type, task_id, token)
    if owned is None:
        return False
    group, tier = owned[0].group, owned[1]
    conn.execute(
        "UPDATE tasks SET state = 'queued', seq = ?, attempt = MAX(attempt - 1, 0), "
        "token = NULL, deadline = NULL WHERE type = ? AND id = ?",
        (_Ends(conn, automation_type).head(tier, group), automation_type, task_id),
    )
    book = Book(conn, automation_type, now)
    book.ended(group)
    book.joined(group, tier)
    run_event(conn, owned[0].run, automation_type, "requeued", now)
    signal(conn, automation_type, 1 + book.wake)
    return True


def extend(
    conn: sqlite3.Connection,
    automation_type: str,
    task_id: str,
    token: str,
    visibility_seconds: float,
    now: float,
) -> LeaseStatus:
    """Move an owned lease's deadline (see :meth:`TaskQueues.extend`)."""
    row = conn.execute(
        "UPDATE tasks SET deadline = ? WHERE type = ? AND id = ? AND state = 'processing' "
        "AND token = ? RETURNING cancel",
        (now + visibility_seconds, automation_type, task_id, token),
    ).fetchone()
    if row is None:
        return LeaseStatus.STALE
    return LeaseStatus.CANCELLED if row[0] else LeaseStatus.OK


def mark_started(
    conn: sqlite3.Connection,
    automation_type: str,
    leases: Sequence[tuple[str, str]],
    now: float,
    worker_id: str | None = None,
) -> list[bool]:
    """Mark owned reservations started (see :meth:`Backend.mark_started`)."""
    return [
        conn.execute(
            "UPDATE tasks SET started = 1, started_at = ?, worker = ? WHERE type = ? AND id = ? "
            "AND state = 'processing' AND token = ?",
            (now, worker_id, automation_type, task_id, token),
        ).rowcount
        > 0
        for task_id, token in leases
    ]


def _with_attempt(
    conn: sqlite3.Connection, automation_type: str, task_id: str, ran: list[Any]
) -> str | bytes:
    """The task's stored body with ``ran`` added to its attempts (a body that cannot
    be read is kept as it is: the sweep never loses it)."""
    (raw,) = conn.execute(
        "SELECT body FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
    ).fetchone()
    try:
        body = TaskBody.from_json(raw)
    except (KeyError, TypeError, ValueError):
        return raw  # type: ignore[no-any-return]
    return body.evolve(attempts=tuple(attempts.appended(body.attempts, ran))).to_json()


def sweep(conn: sqlite3.Connection, automation_type: str, now: float) -> int:
    """Re-queue expired leases at the head of their tier (refunding the attempt
    of one never marked started, up to ``refund_cap`` refunds), promote due
    retries, and forget finished states and idempotency keys past their retention."""
    expired = conn.execute(
        "SELECT id, tier, grp, started, attempt, COALESCE(max_attempts, 0), "
        "COALESCE(json_extract(body, '$.refunds'), 0), run, started_at, worker FROM tasks "
        "WHERE type = ? AND state = 'processing' AND deadline < ? ORDER BY deadline DESC",
        (automation_type, now),
    ).fetchall()
    ends = _Ends(conn, automation_type)
    book = Book(conn, automation_type, now)
    # Latest deadline first, each at the head: the longest-lost task ends up first.
    for task_id, tier, grp, started, attempt, limit, refunds, run, began, worker in expired:
        refund = refund_at_loss(
            started=bool(started), attempt=attempt, refunds=int(refunds), max_attempts=limit
        )
        if refund:
            # Lost unstarted with its worker: the attempt was never made.
            conn.execute(
                "UPDATE tasks SET state = 'queued', seq = ?, token = NULL, deadline = NULL, "
                "started = 0, attempt = attempt - 1, body = json_set(body, '$.refunds', ?) "
                "WHERE type = ? AND id = ?",
                (ends.head(tier, grp), int(refunds) + 1, automation_type, task_id),
            )
        else:
            # Lost while it ran (or unmarked past its refunds): the attempt stays charged.
            lost = attempts.entry(attempt, worker, began if started else None, now, "lost", None)
            conn.execute(
                "UPDATE tasks SET state = 'queued', seq = ?, token = NULL, deadline = NULL, "
                "started = 0, body = ? WHERE type = ? AND id = ?",
                (ends.head(tier, grp), _with_attempt(conn, automation_type, task_id, lost),
                 automation_type, task_id),
            )  # fmt: skip
        book.ended(grp)
        book.joined(grp, tier)
        run_event(conn, run, automation_type, "requeued", now)
    promoted = promote_due(conn, automation_type, now)
    if expired or promoted or book.wake:
        signal(conn, automation_type, len(expired) + promoted + book.wake)
    records.prune(conn, automation_type, now, SWEEP_PRUNE_LIMIT)
    prune_idempotency(conn, now, SWEEP_PRUNE_LIMIT)
    runs.prune(conn, now, SWEEP_PRUNE_LIMIT)  # past their ttl, or idle past theirs
    return len(expired)
