"""The history of the Redis backend: one ``lua/history_record.lua`` call per record
(keys: ``KeySpace.history_keys``), one HMGET per read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities.history import History
from fleet.core.history import (
    HOUR_KEEP_SECONDS,
    MINUTE,
    MINUTE_KEEP_SECONDS,
    QUEUE_COUNTERS,
    VECTOR_LEN,
    Reported,
    decode,
    encode,
    totals,
)

#: The keys' TTL, refreshed by every write: a type that stops for good is forgotten
#: once its newest hour bucket would have expired anyway.
TTL_SECONDS = HOUR_KEEP_SECONDS + 3600


def record_argv(reported: Reported, t: float) -> list[Any]:
    """The arguments of ``lua/history_record.lua`` for a record at time ``t``."""
    workers = totals({}, reported)[len(QUEUE_COUNTERS) :]
    return [
        repr(float(t)),
        encode(workers),
        str(MINUTE_KEEP_SECONDS),
        str(HOUR_KEEP_SECONDS),
        str(TTL_SECONDS),
        *QUEUE_COUNTERS,
    ]


def bucket_field(resolution: int, start: int) -> str:
    """The hash field of a bucket: ``m:<start>`` (a minute) or ``h:<start>`` (an hour)."""
    return f"{'m' if resolution == MINUTE else 'h'}:{start}"


class RedisHistory(RedisPart, History):
    """Per-type history: a script call to record, an HMGET to read."""

    async def record(self, automation_type: str, at: float, reported: Reported) -> bool:
        argv = record_argv(reported, at)
        with self._guard():
            raw = await self._scripts.history_record(
                self._lane, self._keys.history_keys(automation_type), argv
            )
        return bool(int(raw))

    async def buckets(
        self, automation_type: str, resolution: int, starts: Sequence[int]
    ) -> dict[int, list[int]]:
        if not starts:
            return {}
        fields = [bucket_field(resolution, s) for s in starts]
        with self._guard():
            raw = await self._r.hmget(self._keys.history_keys(automation_type)[1], fields)
        out: dict[int, list[int]] = {}
        for start, value in zip(starts, raw, strict=True):
            vector = decode(value)
            if vector is not None and len(vector) == VECTOR_LEN:
                out[start] = vector
        return out
