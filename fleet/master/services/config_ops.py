"""Config writes with generations (docs/protocol.md "Config and generations").

A PATCH validates every distinct merged result it would produce, stores the
partial config at the type's next generation (one backend call, whatever the
number of workers) and publishes ``config.<type>``; each worker merges it with
its override and writes its own desired config. Writes of one type are
serialised by a short backend lock so that, across masters, a later generation
always carries the later config and no merge of a PATCH is lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from fleet.backends.base import Backend
from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.catalog import CatalogEntry
from fleet.core.config import FLEET_WIDE_FIELDS, merge_config
from fleet.core.config_book import ConfigBook
from fleet.core.errors import InvalidInput
from fleet.core.flow import GroupLimits
from fleet.core.records import new_token
from fleet.master.services import budgets
from fleet.master.services.monitors import unknown_fields
from fleet.master.services.validation import (
    config_errors,
    non_finite_errors,
    schema_defaults,
    split_missing,
)
from fleet.protocol import config_topic

LOCK_HOLD_SECONDS = 15.0
LOCK_WAIT_SECONDS = 10.0


@dataclass
class ConfigWrite:
    """What a config PATCH did.

    Attributes:
        config: The stored partial config (type-wide or the worker's override).
        gen: The generation it was stored at (0: an override of a worker not
            registered yet, kept for when it does).
        workers: Ids of the registered workers that apply it.
        missing: Required fields still unset somewhere (the affected workers stay
            in ``ERROR`` until they are set).
    """

    config: dict[str, Any]
    gen: int
    workers: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "gen": self.gen,
            "workers": self.workers,
            "missing": self.missing,
        }


class _TypeLock:
    """The per-type config lock (waits a bounded time, then proceeds: a stuck
    lock of a dead master must not block config changes for ever)."""

    def __init__(self, backend: Backend, automation_type: str) -> None:
        self.backend = backend
        self.name = f"config:{automation_type}"
        self.token = new_token()
        self.held = False

    async def __aenter__(self) -> None:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            self.held = await self.backend.locks.acquire(self.name, self.token, LOCK_HOLD_SECONDS)
            if self.held or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.02)

    async def __aexit__(self, *exc: object) -> None:
        if self.held:
            await self.backend.locks.release(self.name, self.token)


def _apply_patch(current: dict[str, Any], patch: dict[str, Any], replace: bool) -> dict[str, Any]:
    return dict(patch) if replace else merge_config(current, patch)


def _check(
    automation_type: str, entry: CatalogEntry, merged: dict[str, Any], where: str | None
) -> list[str]:
    missing, errors = split_missing(config_errors(automation_type, entry, merged))
    errors += unknown_fields(entry, merged)
    if errors:
        if where is not None:
            for e in errors:
                e["msg"] = f"{e['msg']} (in the merged config of worker {where!r})"
        raise InvalidInput(errors)
    return missing


def fleet_wide_errors(patch: dict[str, Any]) -> list[dict[str, Any]]:
    """422 details for fields a per-worker override may not set: their value is one
    for the fleet (read by the backend's atomic step), so a worker's own copy
    would be ignored, or worse, enforced differently on each worker."""
    return [
        {
            "type": "fleet_wide",
            "loc": ["body", name],
            "msg": f"{name} is fleet-wide ({FLEET_WIDE_FIELDS[name]}); set it for the "
            "whole type (PATCH /api/v1/automations/{type}/config), not per worker",
            "input": patch[name],
        }
        for name in FLEET_WIDE_FIELDS
        if name in patch
    ]


async def patch_type_config(
    backend: Backend,
    automation_type: str,
    entry: CatalogEntry,
    patch: dict[str, Any],
    *,
    replace: bool = False,
) -> ConfigWrite:
    """Merge ``patch`` into the type-wide config and push it to every worker.

    Args:
        backend: The backend.
        automation_type: The type.
        entry: Its catalog entry (for the ``Config`` schema).
        patch: Partial config; keys it sets win.
        replace: Replace the stored type-wide config instead of merging.

    Raises:
        InvalidInput: The result (bare, or merged with any worker's override)
            does not validate; nothing is stored.
    """
    bad = non_finite_errors(patch, ("body",))
    if bad:
        raise InvalidInput(bad)
    async with _TypeLock(backend, automation_type):
        worker_ids = await backend.workers.ids(automation_type)
        book = await backend.configs.book(automation_type, worker_ids)
        new = _apply_patch(book.type_wide, patch, replace)
        missing = set(_check(automation_type, entry, new, None))
        # Each worker merges the new config with its override itself; what it will
        # merge is checked here, once per distinct result.
        after = ConfigBook(new, book.type_gen, book.overrides)
        for wid, merged in after.distinct(worker_ids).items():
            missing.update(_check(automation_type, entry, merged, wid))
        gen = await backend.configs.publish(automation_type, new)
        # Before the 200: the next reserve and proxy call anywhere, blocked or not,
        # reads them (a continuous type has no queue: only its proxy policy counts).
        effective = merge_config(schema_defaults(entry.get("config") or {}), new)
        batch = entry.get("kind") != "ContinuousAutomation"
        await backend.groups.set_defaults(
            automation_type,
            GroupLimits.of_config(effective) if batch else GroupLimits(),
            gen=gen,
            proxy=ProxyPolicy.of_config(effective),
        )
        # A raised (or removed) daily budget ends the type's hold before the 200.
        await budgets.recheck(backend, automation_type, effective.get("daily_budget"))
    await backend.events.publish(config_topic(automation_type), {"worker_id": None, "gen": gen})
    return ConfigWrite(config=new, gen=gen, workers=worker_ids, missing=sorted(missing))


async def patch_worker_config(
    backend: Backend,
    automation_type: str,
    worker_id: str,
    entry: CatalogEntry,
    patch: dict[str, Any],
    *,
    replace: bool = False,
) -> ConfigWrite:
    """Merge ``patch`` into one worker's override and push its merged config.

    A worker that has not registered yet keeps the override for when it does
    (it merges type-wide + override itself at start); nothing is pushed then.

    Raises:
        InvalidInput: The merged config does not validate; nothing is stored.
    """
    bad = non_finite_errors(patch, ("body",)) + fleet_wide_errors(patch)
    if bad:
        raise InvalidInput(bad)
    async with _TypeLock(backend, automation_type):
        book = await backend.configs.book(automation_type, [worker_id])
        override = _apply_patch(book.override(worker_id), patch, replace)
        merged = merge_config(book.type_wide, override)
        missing = _check(automation_type, entry, merged, None)
        registered = worker_id in await backend.workers.ids(automation_type)
        gen = 0
        if registered:
            gen = await backend.configs.publish(automation_type, override, worker_id)
        else:
            # Kept for when it registers (it merges its layers itself at start).
            await backend.configs.set(automation_type, override, worker_id)
    if registered:
        await backend.events.publish(
            config_topic(automation_type), {"worker_id": worker_id, "gen": gen}
        )
    written = [worker_id] if registered else []
    return ConfigWrite(config=override, gen=gen, workers=written, missing=missing)
