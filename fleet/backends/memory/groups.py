"""Task groups of the memory backend (``backend.groups``) over each type's
:class:`~fleet.backends.memory.group_book.GroupBook`."""

from __future__ import annotations

import asyncio

from fleet.backends.memory.store import MemoryStore
from fleet.core.capabilities import TaskGroups
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings
from fleet.core.records import now


class MemoryGroups(TaskGroups):
    """Each method one synchronous step on the type's queue and its groups."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def throttle(
        self, automation_type: str, task_id: str, token: str, *, retry_after: float
    ) -> bool:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.throttle(task_id, token, retry_after, now())

    async def page(
        self, automation_type: str, *, after: str | None = None, limit: int = 1000
    ) -> GroupPage:
        await asyncio.sleep(0)
        return self._store.queue(automation_type).state.groups.page(after, limit, now())

    async def info(self, automation_type: str, group: str) -> GroupInfo:
        await asyncio.sleep(0)
        book = self._store.queue(automation_type).state.groups
        found = book.groups.get(group)
        if found is None:
            return GroupInfo(group, 0, 0, None, None)
        return book.info(found, now())

    async def set(self, automation_type: str, group: str, settings: GroupSettings) -> None:
        await self._configure(automation_type, group, settings)

    async def reset(self, automation_type: str, group: str) -> None:
        await self._configure(automation_type, group, None)

    async def set_defaults(
        self,
        automation_type: str,
        limits: GroupLimits,
        *,
        gen: int,
        proxy: ProxyPolicy | None = None,
    ) -> bool:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        stored, woke = queue.state.groups.set_defaults(limits, gen, proxy)
        if woke:
            queue.state.on_ready(woke)
        return stored

    async def defaults(self, automation_type: str) -> tuple[GroupLimits, int]:
        await asyncio.sleep(0)
        book = self._store.queue(automation_type).state.groups
        return book.defaults, book.defaults_gen

    def proxy_policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        """The type's stored proxy policy and its generation (``(None, -1)``: none),
        read without creating the type's queue (a proxy call may name a type that
        never stored anything)."""
        queue = self._store.queues.get(automation_type)
        if queue is None:
            return None, -1
        return queue.state.groups.proxy, queue.state.groups.defaults_gen

    async def _configure(
        self, automation_type: str, group: str, settings: GroupSettings | None
    ) -> None:
        await asyncio.sleep(0)
        queue = self._store.queue(automation_type)
        if queue.state.groups.configure(group, settings, now()):
            queue.state.on_ready(1)
