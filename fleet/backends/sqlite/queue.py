"""Task queue transactions of the SQLite backend.

Every function takes a connection that is already inside a transaction (the
caller opens ``BEGIN IMMEDIATE`` for writes) and the current time, so each is
one atomic step and can be tested without an event loop. Queue order lives in
``tasks(tier, seq)``: the tail of a tier is ``MAX(seq) + 1``, the head
``MIN(seq) - 1``, both one index probe.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from fleet.core.records import (
    FINISHED_RETENTION_SECONDS,
    TIERS,
    LeaseStatus,
    NackOutcome,
    PushRequest,
    PushResult,
    Reservation,
    TaskBody,
    refund_cap,
)

log = logging.getLogger("fleet.backends.sqlite")

LIVE_STATES = ("queued", "scheduled", "processing")
_TIER_NUM = {name: i for i, name in enumerate(TIERS)}


def tier_num(body: TaskBody) -> int:
    """The ``tasks.tier`` value of a body: 0 high, 1 normal, 2 low."""
    return _TIER_NUM[body.tier]


def merged(raw: str, attempt: int, max_attempts: int | None) -> TaskBody:
    """The task body of a row: its JSON with the ``attempt`` columns applied."""
    d = json.loads(raw)
    d["attempt"] = attempt
    d["max_attempts"] = max_attempts
    return TaskBody.from_dict(d)


def count(conn: sqlite3.Connection, automation_type: str, name: str, n: int = 1) -> None:
    """Add ``n`` to the type's counter ``name``."""
    if n:
        conn.execute(
            "INSERT INTO task_counters (type, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT (type, name) DO UPDATE SET value = value + excluded.value",
            (automation_type, name, n),
        )


def signal(conn: sqlite3.Connection, automation_type: str, n: int) -> int:
    """Bump the type's change counter by ``n`` (tasks became deliverable); its new value."""
    row = conn.execute(
        "INSERT INTO signals (type, n) VALUES (?, ?) "
        "ON CONFLICT (type) DO UPDATE SET n = n + excluded.n RETURNING n",
        (automation_type, n),
    ).fetchone()
    return int(row[0])


def read_signal(conn: sqlite3.Connection, automation_type: str) -> int:
    """The type's change counter (0 if never bumped)."""
    row = conn.execute("SELECT n FROM signals WHERE type = ?", (automation_type,)).fetchone()
    return int(row[0]) if row else 0


class _Ends:
    """Head and tail positions of each tier of one type, probed once per call."""

    def __init__(self, conn: sqlite3.Connection, automation_type: str) -> None:
        self._conn = conn
        self._type = automation_type
        self._tail: dict[int, int] = {}
        self._head: dict[int, int] = {}

    def tail(self, tier: int) -> int:
        if tier not in self._tail:
            row = self._conn.execute(
                "SELECT MAX(seq) FROM tasks WHERE type = ? AND state = 'queued' AND tier = ?",
                (self._type, tier),
            ).fetchone()
            self._tail[tier] = int(row[0]) if row[0] is not None else 0
        self._tail[tier] += 1
        return self._tail[tier]

    def head(self, tier: int) -> int:
        if tier not in self._head:
            row = self._conn.execute(
                "SELECT MIN(seq) FROM tasks WHERE type = ? AND state = 'queued' AND tier = ?",
                (self._type, tier),
            ).fetchone()
            self._head[tier] = int(row[0]) if row[0] is not None else 0
        self._head[tier] -= 1
        return self._head[tier]


def tail_of(conn: sqlite3.Connection, automation_type: str, tier: int) -> int:
    """A fresh ``seq`` at the tail of one tier."""
    return _Ends(conn, automation_type).tail(tier)


_UPSERT_TASK = (
    "INSERT INTO tasks (type, id, state, tier, seq, body, attempt, max_attempts, enqueued_at, "
    "ready_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (type, id) DO UPDATE SET state = excluded.state, tier = excluded.tier, "
    "seq = excluded.seq, body = excluded.body, attempt = excluded.attempt, "
    "max_attempts = excluded.max_attempts, enqueued_at = excluded.enqueued_at, "
    "ready_at = excluded.ready_at, deadline = NULL, token = NULL, cancel = 0, "
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
    """Enqueue ``requests`` (see :meth:`Backend.push`)."""
    ends = _Ends(conn, automation_type)
    results: list[PushResult] = []
    ready = scheduled = 0
    for req in requests:
        body = req.body
        key = req.idempotency_key
        if key is not None:
            row = conn.execute(
                "SELECT task_id FROM idempotency WHERE type = ? AND key = ? AND expires_at > ?",
                (automation_type, key, now),
            ).fetchone()
            if row is not None:
                results.append(PushResult(str(row[0]), queued=False, duplicate=True))
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
                0 if delayed else ends.tail(tier),
                body.to_json(),
                body.attempt,
                body.max_attempts,
                body.enqueued_at,
                now + req.delay_seconds if delayed else None,
            ),
        ).rowcount
        if not inserted:
            results.append(PushResult(body.id, queued=False, duplicate=True))
            continue
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
    count(conn, automation_type, "submitted", ready + scheduled)
    n = signal(conn, automation_type, ready + scheduled) if ready + scheduled else 0
    return Pushed(results, n, ready)


def promote_due(conn: sqlite3.Connection, automation_type: str, now: float) -> int:
    """Move scheduled tasks whose ``ready_at`` passed to the tail of their tier."""
    due = conn.execute(
        "SELECT id, tier FROM tasks WHERE type = ? AND state = 'scheduled' AND ready_at <= ? "
        "ORDER BY ready_at",
        (automation_type, now),
    ).fetchall()
    ends = _Ends(conn, automation_type)
    for task_id, tier in due:
        conn.execute(
            "UPDATE tasks SET state = 'queued', seq = ?, ready_at = NULL WHERE type = ? AND id = ?",
            (ends.tail(tier), automation_type, task_id),
        )
    return len(due)


def bury(conn: sqlite3.Connection, automation_type: str, body: TaskBody, now: float) -> None:
    """Move a task to the DLQ (``counters.dead`` += 1)."""
    conn.execute("DELETE FROM tasks WHERE type = ? AND id = ?", (automation_type, body.id))
    conn.execute(
        "INSERT INTO dead (type, id, body, dead_at) VALUES (?, ?, ?, ?)",
        (automation_type, body.id, body.to_json(), now),
    )
    count(conn, automation_type, "dead")


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


def reserve(
    conn: sqlite3.Connection,
    automation_type: str,
    *,
    k: int,
    visibility_seconds: float,
    default_max_attempts: int,
    now: float,
) -> Reserved:
    """Take up to ``k`` tasks (see :meth:`Backend.reserve`), never waiting."""
    promote_due(conn, automation_type, now)
    out: list[Reservation] = []
    expired: list[tuple[str, float, float | None]] = []
    deadline = now + visibility_seconds
    while len(out) < k:
        want = k - len(out)
        # One statement leases the whole batch; rows that must not be delivered
        # (cancelled, expired, out of attempts) are settled right after, in the
        # same transaction. The token is 12 random bytes, like new_token().
        taken = conn.execute(
            "UPDATE tasks SET state = 'processing', attempt = attempt + 1, "
            "max_attempts = COALESCE(NULLIF(max_attempts, 0), ?), "
            "token = lower(hex(randomblob(12))), deadline = ?, started = 0 "
            "WHERE rowid IN (SELECT rowid FROM tasks WHERE type = ? "
            "AND state = 'queued' ORDER BY tier, seq LIMIT ?) "
            "RETURNING tier, seq, id, body, attempt, max_attempts, token, cancel",
            (default_max_attempts, deadline, automation_type, want),
        ).fetchall()
        taken.sort()  # RETURNING order is unspecified; queue order is (tier, seq)
        for _tier, _seq, task_id, raw, attempt, limit, token, cancel in taken:
            try:
                body = merged(raw, attempt, limit)
                body.is_expired(now)  # a ttl_seconds that is not a number raises here
            except (KeyError, TypeError, ValueError) as exc:
                # A head row that cannot be read would fail every reserve: the DLQ.
                bury_unreadable(conn, automation_type, task_id, raw, limit, exc, now)
                continue
            if cancel:
                # Dropped, not delivered: no attempt is charged.
                conn.execute(
                    "UPDATE tasks SET attempt = attempt - 1 WHERE type = ? AND id = ?",
                    (automation_type, task_id),
                )
                _finish(conn, automation_type, task_id, "cancelled", now)
                count(conn, automation_type, "cancelled")
            elif body.is_expired(now):
                conn.execute(
                    "DELETE FROM tasks WHERE type = ? AND id = ?", (automation_type, task_id)
                )
                count(conn, automation_type, "expired")
                expired.append((task_id, now - body.enqueued_at, body.ttl_seconds))
            elif attempt > limit:
                error = (
                    f"attempt {attempt} exceeds max_attempts={limit}: "
                    "earlier attempts were lost with their worker"
                )
                # The DLQ records the attempts actually made.
                lost = body.evolve(attempt=attempt - 1, last_error=error, failed_at=now)
                bury(conn, automation_type, lost, now)
            else:
                out.append(Reservation(body=body, token=token, deadline=deadline))
        if len(taken) < want:
            break
    next_due = None
    if not out:
        row = conn.execute(
            "SELECT MIN(ready_at) FROM tasks WHERE type = ? AND state = 'scheduled'",
            (automation_type,),
        ).fetchone()
        next_due = row[0]
    return Reserved(out, read_signal(conn, automation_type), next_due, tuple(expired))


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
    conn: sqlite3.Connection, automation_type: str, leases: Sequence[tuple[str, str]], now: float
) -> list[bool]:
    """Finish owned tasks (see :meth:`Backend.ack`)."""
    out: list[bool] = []
    completed = cancelled = 0
    for task_id, token in leases:
        row = conn.execute(
            "UPDATE tasks SET state = CASE WHEN cancel THEN 'cancelled' ELSE 'done' END, "
            "finished_at = ?, token = NULL, deadline = NULL, "
            "body = json_remove(body, '$.payload', '$.traceback') "
            "WHERE type = ? AND id = ? AND state = 'processing' AND token = ? RETURNING cancel",
            (now, automation_type, task_id, token),
        ).fetchone()
        if row is None:
            out.append(False)
        elif row[0]:
            cancelled += 1
            out.append(True)
        else:
            completed += 1
            out.append(True)
    prune_finished(conn, now, 2 * len(leases))
    count(conn, automation_type, "completed", completed)
    count(conn, automation_type, "cancelled", cancelled)
    return out


def _owned(
    conn: sqlite3.Connection, automation_type: str, task_id: str, token: str
) -> tuple[TaskBody, int] | None:
    row = conn.execute(
        "SELECT body, attempt, max_attempts, tier FROM tasks WHERE type = ? AND id = ? "
        "AND state = 'processing' AND token = ?",
        (automation_type, task_id, token),
    ).fetchone()
    return None if row is None else (merged(row[0], row[1], row[2]), int(row[3]))


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
) -> NackOutcome:
    """Fail the current attempt of an owned task (see :meth:`Backend.nack`)."""
    owned = _owned(conn, automation_type, task_id, token)
    if owned is None:
        return "stale"
    body = owned[0].evolve(last_error=error, traceback=traceback, failed_at=now)
    limit = body.max_attempts if body.max_attempts is not None else 0
    if dead or body.attempt >= limit:
        bury(conn, automation_type, body, now)
        return "dead"
    conn.execute(
        "UPDATE tasks SET state = 'scheduled', ready_at = ?, body = ?, token = NULL, "
        "deadline = NULL WHERE type = ? AND id = ?",
        (now + max(delay_seconds, 0.0), body.to_json(), automation_type, task_id),
    )
    count(conn, automation_type, "failed")
    signal(conn, automation_type, 1)
    return "retry"


def release(
    conn: sqlite3.Connection, automation_type: str, task_id: str, token: str, now: float
) -> bool:
    """Give an owned task back at the head of its tier, refunding its attempt."""
    owned = _owned(conn, automation_type, task_id, token)
    if owned is None:
        return False
    conn.execute(
        "UPDATE tasks SET state = 'queued', seq = ?, attempt = MAX(attempt - 1, 0), "
        "token = NULL, deadline = NULL WHERE type = ? AND id = ?",
        (_Ends(conn, automation_type).head(owned[1]), automation_type, task_id),
    )
    signal(conn, automation_type, 1)
    return True


def extend(
    conn: sqlite3.Connection,
    automation_type: str,
    task_id: str,
    token: str,
    visibility_seconds: float,
    now: float,
) -> LeaseStatus:
    """Move an owned lease's deadline (see :meth:`Backend.extend`)."""
    row = conn.execute(
        "UPDATE tasks SET deadline = ? WHERE type = ? AND id = ? AND state = 'processing' "
        "AND token = ? RETURNING cancel",
        (now + visibility_seconds, automation_type, task_id, token),
    ).fetchone()
    if row is None:
        return LeaseStatus.STALE
    return LeaseStatus.CANCELLED if row[0] else LeaseStatus.OK


def mark_started(
    conn: sqlite3.Connection, automation_type: str, leases: Sequence[tuple[str, str]]
) -> list[bool]:
    """Mark owned reservations started (see :meth:`Backend.mark_started`)."""
    return [
        conn.execute(
            "UPDATE tasks SET started = 1 WHERE type = ? AND id = ? AND state = 'processing' "
            "AND token = ?",
            (automation_type, task_id, token),
        ).rowcount
        > 0
        for task_id, token in leases
    ]


def sweep(conn: sqlite3.Connection, automation_type: str, now: float) -> int:
    """Re-queue expired leases at the head of their tier (refunding the attempt
    of one never marked started, up to ``refund_cap`` refunds), promote due
    retries, and forget finished states and idempotency keys past their retention."""
    expired = conn.execute(
        "SELECT id, tier, started, attempt, COALESCE(max_attempts, 0), "
        "COALESCE(json_extract(body, '$.refunds'), 0) FROM tasks "
        "WHERE type = ? AND state = 'processing' AND deadline < ? ORDER BY deadline DESC",
        (automation_type, now),
    ).fetchall()
    ends = _Ends(conn, automation_type)
    # Latest deadline first, each at the head: the longest-lost task ends up first.
    for task_id, tier, started, attempt, limit, refunds in expired:
        if not started and attempt > 0 and int(refunds) < refund_cap(limit):
            # Lost unstarted with its worker: the attempt was never made.
            conn.execute(
                "UPDATE tasks SET state = 'queued', seq = ?, token = NULL, deadline = NULL, "
                "started = 0, attempt = attempt - 1, body = json_set(body, '$.refunds', ?) "
                "WHERE type = ? AND id = ?",
                (ends.head(tier), int(refunds) + 1, automation_type, task_id),
            )
            continue
        conn.execute(
            "UPDATE tasks SET state = 'queued', seq = ?, token = NULL, deadline = NULL, "
            "started = 0 WHERE type = ? AND id = ?",
            (ends.head(tier), automation_type, task_id),
        )
    promoted = promote_due(conn, automation_type, now)
    if expired or promoted:
        signal(conn, automation_type, len(expired) + promoted)
    prune_finished(conn, now, SWEEP_PRUNE_LIMIT)
    prune_idempotency(conn, now, SWEEP_PRUNE_LIMIT)
    return len(expired)


#: Rows of expired state one sweep deletes at most (keeps its transaction short).
SWEEP_PRUNE_LIMIT = 10_000


def prune_finished(conn: sqlite3.Connection, now: float, limit: int) -> int:
    """Forget up to ``limit`` done/cancelled states older than their retention.

    Acks call this with a small multiple of the tasks they finish, so the table
    sheds old states as fast as it gains new ones, with or without a sweeper.
    """
    return conn.execute(
        "DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks "
        "WHERE state IN ('done', 'cancelled') AND finished_at < ? LIMIT ?)",
        (now - FINISHED_RETENTION_SECONDS, limit),
    ).rowcount


def prune_idempotency(conn: sqlite3.Connection, now: float, limit: int) -> int:
    """Delete up to ``limit`` expired idempotency keys."""
    return conn.execute(
        "DELETE FROM idempotency WHERE (type, key) IN "
        "(SELECT type, key FROM idempotency WHERE expires_at <= ? LIMIT ?)",
        (now, limit),
    ).rowcount
