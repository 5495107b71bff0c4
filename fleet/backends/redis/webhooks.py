"""Webhooks on Redis: the subscriptions in one hash (``KeySpace.webhooks``), each
one's log in a hash and a zset (``KeySpace.webhook_keys``); a log update is one call
of ``lua/webhooks.lua``, a delete one MULTI."""

from __future__ import annotations

import json
from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.scripts import LuaScript
from fleet.core.capabilities.webhooks import Webhooks
from fleet.core.records import dumps
from fleet.core.webhooks import LOG_KEEP, Delivery, Hook


def _text(raw: Any) -> str | None:
    if raw is None or raw is False:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _hook(raw: Any) -> Hook | None:
    text = _text(raw)
    try:
        return None if text is None else Hook.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None


def _delivery(raw: Any) -> Delivery | None:
    text = _text(raw)
    try:
        return None if text is None else Delivery.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None


class RedisWebhooks(RedisPart, Webhooks):
    """:class:`~fleet.core.capabilities.webhooks.Webhooks` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self._script = LuaScript("webhooks")

    async def put(self, hook: Hook) -> None:
        with self._guard():
            await self._r.hset(self._keys.webhooks, hook.id, dumps(hook.to_dict()))

    async def get(self, hook_id: str) -> Hook | None:
        with self._guard():
            return _hook(await self._r.hget(self._keys.webhooks, hook_id))

    async def all(self) -> list[Hook]:
        with self._guard():
            raw = await self._r.hgetall(self._keys.webhooks)
        found = [h for h in map(_hook, raw.values()) if h is not None]
        return sorted(found, key=lambda h: (h.created_at, h.id))

    async def delete(self, hook_id: str) -> bool:
        subs, log, order = self._keys.webhook_keys(hook_id)
        with self._guard():
            async with self._pipeline(transaction=True) as pipe:
                pipe.hdel(subs, hook_id)
                pipe.delete(log, order)
                removed, _ = await pipe.execute()
        return bool(removed)

    async def log(self, hook_id: str, update: Delivery, keep: int = LOG_KEEP) -> Delivery | None:
        argv = [hook_id, dumps(update.to_dict()), str(int(keep))]
        with self._guard():
            raw = await self._script(self._lane, self._keys.webhook_keys(hook_id), argv)
        return _delivery(raw)

    async def deliveries(self, hook_id: str, *, offset: int = 0, limit: int = 50) -> list[Delivery]:
        if limit <= 0:
            return []
        _, log, order = self._keys.webhook_keys(hook_id)
        start = max(offset, 0)
        with self._guard():
            ids = await self._r.zrevrange(order, start, start + limit - 1)
            if not ids:
                return []
            found = await self._r.hmget(log, ids)
        return [d for d in map(_delivery, found) if d is not None]
