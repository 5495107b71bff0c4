"""Task groups on Redis (``backend.groups``): throttle a lease, list and configure groups.

Reserve, push and the lease ends move tasks in and out of groups inside their own
scripts (``lua/queue_groups.lua``); these are the operator's and the slot's calls:
``lua/throttle.lua`` and ``lua/groups.lua``, one script call each.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.backends.redis.core import RedisPart
from fleet.core.capabilities import TaskGroups
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings
from fleet.core.records import dumps, now


def _settings(raw: Any) -> GroupSettings | None:
    # A stored value this Fleet cannot read counts as no settings (the type's
    # values apply) rather than breaking every listing.
    if not raw:
        return None
    try:
        return GroupSettings.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError):
        return None


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw or "")


def _info(name: str, state: Any, pending: Any, conf: Any, t: float) -> GroupInfo:
    fields = str(state or "").split("|")
    running = tat = until = 0.0
    place = ""
    if len(fields) == 5:
        try:
            running, tat, until = float(fields[0]), float(fields[1]), float(fields[2])
        except ValueError:
            pass
        place = fields[3]
    held = max(until, tat if place == "D" else 0.0)
    return GroupInfo(
        name=name,
        pending=int(pending),
        running=int(running),
        settings=_settings(conf),
        throttled_until=held if held > t else None,
    )


class RedisGroups(RedisPart, TaskGroups):
    """``TaskGroups`` over the queue keys of ``KeySpace.queue_keys``."""

    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        argv = [repr(now()), task_id, token, repr(float(retry_after))]
        with self._guard():
            raw = await self._scripts.throttle(
                self._lane, self._keys.queue_keys(automation_type, now()), argv
            )
        return bool(int(raw))

    async def _groups(self, automation_type: str, *args: Any) -> Any:
        t = now()
        with self._guard():
            return await self._scripts.groups(
                self._lane, self._keys.queue_keys(automation_type, t), [args[0], repr(t), *args[1:]]
            )

    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        limit = max(1, int(limit))
        raw = await self._groups(automation_type, "list", after or "", limit)
        t = now()
        out = [
            _info(str(raw[i]), raw[i + 1], raw[i + 2], raw[i + 3], t)
            for i in range(0, len(raw) - 3, 4)
        ]
        more = len(raw) % 4 == 1
        return GroupPage(out, out[-1].name if more and out else None)

    async def info(self, automation_type: str, group: str) -> GroupInfo:
        state, pending, conf = await self._groups(automation_type, "info", group)
        return _info(group, state, pending, conf, now())

    async def set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        stored = "" if settings.empty else dumps(settings.stored())
        await self._groups(automation_type, "set", group, stored)

    async def reset(self, automation_type: str, group: str) -> None:
        await self._groups(automation_type, "reset", group)

    async def set_defaults(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        policy = (
            ("", "", "")
            if proxy is None
            else (
                str(int(proxy.bad_threshold)),
                repr(float(proxy.cooldown_seconds)),
                "" if proxy.max_concurrency is None else str(int(proxy.max_concurrency)),
            )
        )
        raw = await self._groups(
            automation_type,
            "defaults",
            int(gen),
            "" if limits.concurrency is None else str(limits.concurrency),
            "" if limits.interval is None else repr(limits.interval),
            limits.rate or "",
            *policy,
        )
        return bool(int(raw))

    async def defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        gen, conc, interval, rate = await self._groups(automation_type, "getdefaults")
        if not gen:
            return GroupLimits(), -1
        try:
            return GroupLimits(
                int(conc) if conc else None,
                float(interval) if interval else None,
                _text(rate) or None,
            ), int(gen)
        except ValueError:  # not written by this Fleet: limits nothing
            return GroupLimits(), -1
