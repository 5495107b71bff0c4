"""Browse on Redis: a page reads its page. Every state has an index, the zset
``fleet:queue:<type>:browse:<state>`` of task_id -> submitted time (``IDX_SUFFIX`` in
``lua/queue_common.lua``); ``lua/browse.lua`` finds the cursor's rank in it (O(log N))
and reads the next members' records (the group ``g``, the run ``rn`` and the last error
``e`` are in their JSON tail), one script call per page.

The DLQ's index is always kept (a death adds, a replay or delete removes: off the hot
path). The live states' indexes cost the hot path nothing while nobody browses the
type: the scripts keep them only while the marker ``fleet:queue:<type>:browse`` exists.
The first page of a live state after ``KEEP_SECONDS`` without one sets the marker and
builds the indexes from the records (``_build``: calls of ``_BUILD_BUCKETS`` buckets
and one ``HSCAN`` step of ``:tasks`` each, O(tasks) once); every page renews the
marker's TTL, and the indexes expire with it. Dead letters a Fleet before the indexes
buried are indexed by the first DLQ page that counts fewer entries than letters.

A DLQ selection is one ``lua/dead.lua`` call. A task's body (the task page's payload)
is read from where its state keeps it: the lease hash, the scheduled or dead record, or
a bounded chunked search of its lists (pending)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.backends.redis import keys
from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.records import parse_record
from fleet.backends.redis.scripts import LuaScript
from fleet.core.capabilities.browse import (
    BODY_SCAN_LIMIT,
    Browse,
    BrowseState,
    DeadSelection,
    Position,
    TaskPage,
    TaskSummary,
    check_page_args,
    decode_cursor,
    page_of,
)
from fleet.core.records import TaskBody, now
from fleet.core.stored import Unreadable, read_body

_LETTER = {"pending": "q", "scheduled": "s", "processing": "p", "dead": "*", "done": "D"}
#: How long (s) the live states' indexes are kept after the last page of a type.
KEEP_SECONDS = 900
# Record buckets one index-building call reads (~700 records each at 700,000 waiting
# tasks: a call of ~5 ms).
_BUILD_BUCKETS = 2
# Builds one page call may ask for (another process's build under way, a marker
# expired in between): then the page is read as the index stands.
_BUILD_TRIES = 3
# Indexes in keys.QUEUE_KEY_PARTS.
_NORMAL, _HIGH, _LOW, _PROCESSING, _PROCESSING_BODY = 0, 1, 2, 3, 4
_SCHEDULED, _DEAD, _TASKS, _DEADINFO = 5, 6, 7, 11


def _body(raw: Any) -> TaskBody | None:
    if raw is None:
        return None
    try:
        return read_body(raw)
    except Unreadable:
        return None


def _submitted(body: TaskBody | None, raw_record: Any) -> TaskBody | None:
    """``body`` with its submitted time from the record: Fleet's pushes keep
    ``enqueued_at`` in the record only (``TaskBody.to_json``)."""
    if body is None or body.enqueued_at:
        return body
    try:
        at = parse_record(str(raw_record)).submitted_at
    except (ValueError, TypeError):
        return body
    return body if at is None else body.evolve(enqueued_at=at)


def summary(state: BrowseState, task_id: str, raw: str, time: str) -> TaskSummary | None:
    """One page item from a state record (None if the record cannot be read)."""
    try:
        rec = parse_record(raw)
    except (ValueError, TypeError):
        return None
    at = float(time) if time else None
    if state == "done":
        finished = rec.finished_at if rec.finished_at is not None else at
    else:
        finished = None
    return TaskSummary(
        id=task_id,
        state=state,
        priority=rec.priority,
        group=rec.group,
        run=rec.run,
        attempt=rec.attempt or 0,
        enqueued_at=rec.submitted_at or 0.0,
        ready_at=at if state == "scheduled" else None,
        deadline=at if state == "processing" else None,
        last_error=rec.last_error,
        failed_at=rec.failed_at,
        finished_at=finished,
    )


def _stopped(text: str) -> Position | None:
    """Where ``lua/browse.lua`` stopped reading (``"<score> <id>"``), if it says."""
    at, _, task_id = text.partition(" ")
    try:
        return Position(float(at), task_id) if task_id else None
    except ValueError:
        return None


class RedisBrowse(RedisPart, Browse):
    """:class:`~fleet.core.capabilities.browse.Browse` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self._script = LuaScript("browse")

    async def page(
        self,
        automation_type: str,
        state: BrowseState,
        limit: int,
        cursor: str | None,
        run: str | None = None,
    ) -> TaskPage:
        check_page_args(state, limit, run)
        pos = None if cursor is None else decode_cursor(cursor)
        qkeys = self._keys.queue_keys(automation_type, now())
        argv: list[Any] = ["page", _LETTER[state], limit + 1, int(KEEP_SECONDS * 1000)]
        argv += ["", ""] if pos is None else [repr(pos.at), pos.task_id]
        argv.append(run or "")
        with self._guard():
            raw = await self._script(self._lane, qkeys, argv)
            for _ in range(_BUILD_TRIES):
                if len(raw) != 1:
                    break
                await self._build(qkeys, dead=state == "dead")
                raw = await self._script(self._lane, qkeys, argv)
            if len(raw) == 1:
                raw = []
        stopped = None
        if len(raw) >= 3 and not raw[-3]:
            stopped = _stopped(str(raw[-1]))
            raw = raw[:-3]
        found = [
            s
            for i in range(0, len(raw), 3)
            if (s := summary(state, str(raw[i]), str(raw[i + 1]), str(raw[i + 2] or "")))
            is not None
        ]
        return page_of(found, limit, stopped)

    async def _build(self, qkeys: list[str], *, dead: bool) -> None:
        """Build the DLQ's index (``dead``) or the live states' (then mark them
        ready), in calls of two record buckets and one ``HSCAN`` step of ``:tasks`` each
        (the longest 5.6 ms at 300,000 tasks). The scripts keep the indexes meanwhile
        (see ``lua/browse.lua``)."""
        if dead:
            cursor = "0"
            while True:
                cursor = str(await self._script(self._lane, qkeys, ["dead_build", cursor]))
                if cursor == "0":
                    return
        cursor = "0"
        for first in range(0, keys.RECORD_BUCKETS, _BUILD_BUCKETS):
            last = min(first + _BUILD_BUCKETS, keys.RECORD_BUCKETS) - 1
            step = cursor if cursor != "0" or first == 0 else ""
            cursor = str(await self._script(self._lane, qkeys, ["build", first, last, step]))
        while cursor not in ("0", ""):
            cursor = str(await self._script(self._lane, qkeys, ["build", 0, -1, cursor]))
        await self._script(self._lane, qkeys, ["ready"])

    async def body(self, automation_type: str, task_id: str) -> TaskBody | None:
        q = self._keys.queue_keys(automation_type, now())
        with self._guard():
            raw = (await self._live_records(q[_TASKS], [task_id]))[0]
            if raw is None:
                info = await self._lane.execute("HGET", q[_DEADINFO], task_id)
                if info is None:
                    return None
                return _submitted(await self._dead_body(task_id, str(info), q), str(info))
            return _submitted(await self._live_body(automation_type, q, task_id, str(raw)), raw)

    async def _live_body(
        self, automation_type: str, q: list[str], task_id: str, raw: str
    ) -> TaskBody | None:
        with self._guard():
            try:
                rec = parse_record(raw)
            except (ValueError, TypeError):
                return None
            if rec.state == "p":
                return _body(await self._lane.execute("HGET", q[_PROCESSING_BODY], task_id))
            if rec.state == "s":
                if rec.scheduled_body is not None:
                    return _body(rec.scheduled_body)
                return await self._find_scheduled(task_id, q[_SCHEDULED])
            if rec.state != "q":
                return None  # finished: no body is kept
            group = rec.group
            if group is not None:
                base = f"{self._keys.queue(automation_type)}:g:{group}:"
                lists = [base + tier for tier in ("high", "normal", "low")]
            else:
                lists = [q[_HIGH], q[_NORMAL], q[_LOW]]
            return await self._find_in_lists(task_id, lists)

    async def _dead_body(self, task_id: str, info: str, q: list[str]) -> TaskBody | None:
        # The dead record keeps the body (bury in queue_common.lua); one buried by a
        # Fleet before that is searched for in :dead.
        try:
            kept = parse_record(info).scheduled_body
        except (ValueError, TypeError):
            kept = None
        if kept is not None:
            return _body(kept)
        return await self._find_in_lists(task_id, [q[_DEAD]])

    async def _find_in_lists(self, task_id: str, lists: list[str]) -> TaskBody | None:
        # No index by id: read the lists a chunk at a time (never one long call),
        # at most BODY_SCAN_LIMIT entries in all.
        budget = BODY_SCAN_LIMIT
        for key in lists:
            start = 0
            while budget > 0:
                chunk = await self._lane.execute("LRANGE", key, start, start + 999)
                for raw in chunk:
                    if task_id in raw and (b := _body(raw)) is not None and b.id == task_id:
                        return b
                budget -= len(chunk)
                if len(chunk) < 1000:
                    break
                start += 1000
        return None

    async def _find_scheduled(self, task_id: str, zset: str) -> TaskBody | None:
        cursor, budget = "0", BODY_SCAN_LIMIT
        pattern = f"*{keys._glob_escape(task_id)}*"
        while budget > 0:
            cursor, flat = await self._lane.execute(
                "ZSCAN", zset, cursor, "MATCH", pattern, "COUNT", 1000
            )
            for raw in flat[::2]:
                if (b := _body(raw)) is not None and b.id == task_id:
                    return b
            budget -= 1000
            if str(cursor) == "0":
                break
        return None

    async def dead_select(
        self, automation_type: str, task_ids: Sequence[str], *, replay: bool
    ) -> DeadSelection:
        wanted = list(dict.fromkeys(task_ids))
        if not wanted:
            return DeadSelection((), (), ())
        op = "pick_replay" if replay else "pick_delete"
        with self._guard():
            raw = await self._scripts.dead(
                self._lane, self._keys.queue_keys(automation_type, now()), [op, *wanted]
            )
        status: dict[str, bool] = {}
        if replay:
            for i in range(0, len(raw), 2):
                status[str(raw[i])] = int(raw[i + 1]) == 1
        else:
            status = {str(tid): True for tid in raw}
        return DeadSelection(
            done=tuple(t for t in wanted if status.get(t) is True),
            skipped=tuple(t for t in wanted if status.get(t) is False),
            unknown=tuple(t for t in wanted if t not in status),
        )
