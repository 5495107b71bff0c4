"""Browse on Redis: ``lua/browse.lua`` ranks the state records of the type
(``:tasks`` for live tasks, ``:dead:info`` for the DLQ) by ``(submitted_at, id)``,
which every record carries (the ``d`` field: the body's ``enqueued_at``), so a page
reads no body; the records' JSON tail holds the group (``g``), the run (``rn``) and
the last error (``e``). One script call per page, O(N) in the type's tasks of the hash
walked (a few milliseconds for 10,000). A DLQ selection is one ``lua/dead.lua`` call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fleet.backends.redis import keys
from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.records import parse_record
from fleet.backends.redis.scripts import LuaScript
from fleet.core.capabilities.browse import (
    Browse,
    BrowseState,
    DeadSelection,
    TaskPage,
    TaskSummary,
    check_page_args,
    decode_cursor,
    page_of,
)
from fleet.core.records import now

_LETTER = {"pending": "q", "scheduled": "s", "processing": "p", "dead": "*"}
# Indexes in keys.QUEUE_KEY_PARTS.
_PROCESSING, _SCHEDULED, _TASKS, _DEADINFO = 3, 5, 7, 11


def _tail(raw: str) -> dict[str, Any]:
    parts = raw.split("|", 8)
    if len(parts) > 8 and parts[8]:
        try:
            extra = json.loads(parts[8])
        except ValueError:
            return {}
        return extra if isinstance(extra, dict) else {}
    return {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def summary(state: BrowseState, task_id: str, raw: str, time: str) -> TaskSummary | None:
    """One page item from a state record (None if the record cannot be read)."""
    try:
        rec = parse_record(raw)
    except (ValueError, TypeError):
        return None
    extra = _tail(raw)
    at = float(time) if time else None
    return TaskSummary(
        id=task_id,
        state=state,
        priority=rec.priority,
        group=_text(extra.get("g")),
        run=_text(extra.get("rn")),
        attempt=rec.attempt or 0,
        enqueued_at=rec.submitted_at or 0.0,
        ready_at=at if state == "scheduled" else None,
        deadline=at if state == "processing" else None,
        last_error=rec.last_error,
        failed_at=rec.failed_at,
    )


class RedisBrowse(RedisPart, Browse):
    """:class:`~fleet.core.capabilities.browse.Browse` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self._page_script = LuaScript("browse")

    async def page(
        self, automation_type: str, state: BrowseState, limit: int, cursor: str | None
    ) -> TaskPage:
        check_page_args(state, limit)
        pos = None if cursor is None else decode_cursor(cursor)
        qkeys = keys.queue_keys(automation_type, now())
        if state == "dead":
            script_keys = [qkeys[_DEADINFO], qkeys[_DEADINFO]]
        else:
            zset = qkeys[_PROCESSING] if state == "processing" else qkeys[_SCHEDULED]
            script_keys = [qkeys[_TASKS], zset]
        argv: list[Any] = [_LETTER[state], limit + 1]
        if pos is not None:
            argv += [repr(pos.enqueued_at), pos.task_id]
        with self._guard():
            raw = await self._page_script(self._lane, script_keys, argv)
        found = [
            s
            for i in range(0, len(raw), 3)
            if (s := summary(state, str(raw[i]), str(raw[i + 1]), str(raw[i + 2] or "")))
            is not None
        ]
        return page_of(found, limit)

    async def dead_select(
        self, automation_type: str, task_ids: Sequence[str], *, replay: bool
    ) -> DeadSelection:
        wanted = list(dict.fromkeys(task_ids))
        if not wanted:
            return DeadSelection((), (), ())
        op = "pick_replay" if replay else "pick_delete"
        with self._guard():
            raw = await self._scripts.dead(
                self._lane, keys.queue_keys(automation_type, now()), [op, *wanted]
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
