"""Schedules on Redis: ``lua/schedules.lua``, one call per operation over the script
lane. Keys: ``fleet:schedules:<type>`` (hash id -> record) and
``fleet:schedules:due`` (zset ``[type, id]`` -> next run), see redis-schema.md."""

from __future__ import annotations

from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities.schedules import ScheduleStore


def _due(due: float | None) -> str:
    return "" if due is None else repr(float(due))


class RedisSchedules(RedisPart, ScheduleStore):
    """``ScheduleStore`` primitives."""

    async def _call(self, automation_type: str, *argv: Any) -> Any:
        k = [
            self._keys.SCHEDULES_DUE,
            self._keys.schedules(automation_type),
            self._keys.SCHEDULES_PREFIX,
        ]
        with self._guard():
            return await self._scripts.schedules(self._lane, k, list(argv))

    async def put_raw(
        self, automation_type: str, schedule_id: str, raw: str, due: float | None
    ) -> None:
        await self._call(automation_type, "put", schedule_id, raw, _due(due))

    async def swap_raw(
        self, automation_type: str, schedule_id: str, expected: str, raw: str, due: float | None
    ) -> bool:
        got = await self._call(automation_type, "swap", schedule_id, expected, raw, _due(due))
        return bool(int(got))

    async def get_raw(self, automation_type: str, schedule_id: str) -> str | None:
        with self._guard():
            raw = await self._r.hget(self._keys.schedules(automation_type), schedule_id)
        return None if raw is None else _text(raw)

    async def listing_raw(self, automation_type: str) -> dict[str, str]:
        with self._guard():
            found = await self._r.hgetall(self._keys.schedules(automation_type))
        return {_text(k): _text(v) for k, v in found.items()}

    async def delete(self, automation_type: str, schedule_id: str) -> bool:
        return bool(int(await self._call(automation_type, "delete", schedule_id)))

    async def due_raw(self, now: float, limit: int = 100) -> list[tuple[str, str, str]]:
        flat = await self._call("", "due", repr(now), max(1, int(limit)))
        return [
            (_text(flat[i]), _text(flat[i + 1]), _text(flat[i + 2]))
            for i in range(0, len(flat) - 2, 3)
        ]

    async def next_due(self) -> float | None:
        raw = await self._call("", "next")
        return float(raw) if raw not in ("", b"", None) else None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
