"""The catalog as the master sees it: its own plugins' entries, merged with
the entries workers publish, all in the backend's ``fleet:catalog`` hash."""

from __future__ import annotations

import asyncio
import difflib
import importlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fleet.backends.base import Backend
from fleet.core.automation import registered
from fleet.core.catalog import CatalogEntry, as_entries, as_entry, as_stored, describe
from fleet.core.errors import BackendError, Conflict, NotFound, RetryLater
from fleet.core.outage import OutageLog, is_outage
from fleet.core.stored import entry_unreadable
from fleet.master.services.secrets import mask_schema

log = logging.getLogger(__name__)


def load_plugins(specs: Sequence[str] = ()) -> None:
    """Import the installed plugins (entry points ``fleet.automations``,
    ``FLEET_PLUGINS`` and ``specs``) so their classes register themselves.

    A plugin that fails to import is logged and skipped: the master must come
    up for the rest of the fleet, and workers publish their own entries anyway.
    """
    try:
        plugins: Any = importlib.import_module("fleet.plugins")
    except ImportError:
        return
    discover = getattr(plugins, "discover", None)
    if not callable(discover):
        return
    try:
        found = discover(list(specs))
    except Exception as exc:  # a broken plugin must not keep the master down
        log.warning("plugin discovery failed: %s", exc)
        return
    for error in getattr(found, "errors", []):
        log.warning("plugin not loaded: %s: %s", error.source, error.error)


def local_entries() -> dict[str, CatalogEntry]:
    """Catalog entries of every automation class registered in this process."""
    out: dict[str, CatalogEntry] = {}
    for name, cls in registered().items():
        try:
            out[name] = describe(cls)
        except Exception as exc:  # one malformed schema must not hide the others
            log.warning("cannot describe automation %r: %s", name, exc)
    return out


async def publish_local_entries(backend: Backend) -> list[str]:
    """Write this process's entries into the backend's catalog.

    Returns:
        The types written.
    """
    entries = local_entries()
    for name, entry in entries.items():
        await backend.catalog.put(name, as_stored(entry))
    return sorted(entries)


async def all_entries(backend: Backend) -> dict[str, CatalogEntry]:
    """Every catalog entry, by type (some perhaps unreadable: :func:`entry_unreadable`)."""
    return as_entries(await backend.catalog.all())


async def find_entry(backend: Backend, automation_type: str) -> CatalogEntry | None:
    """The catalog entry of a type, or None (perhaps unreadable)."""
    entry = await backend.catalog.get(automation_type)
    return None if entry is None else as_entry(entry)


def summary(automation_type: str, entry: CatalogEntry | None, **extra: Any) -> dict[str, Any]:
    """A type as the lists of types show it (``GET /automations``, the ``types``
    frame): its kind, whether it is catalogued, has a queue, has a stream, then
    ``extra``; an entry that cannot be read adds ``unreadable`` (why)."""
    shown = entry or {}
    row: dict[str, Any] = {
        "type": automation_type,
        "kind": shown.get("kind"),
        "catalogued": entry is not None,
        "has_queue": bool(shown.get("queue")),
        "has_stream": bool(shown.get("stream")),
        **extra,
    }
    why = entry_unreadable(shown)
    if why is not None:
        row["unreadable"] = why
    return row


def declared_pools(entries: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Names of the pools the catalogued automations declare (their ``Pools``)."""
    names: set[str] = set()
    for entry in entries.values():
        pools = entry.get("pools")
        for pool in pools.values() if isinstance(pools, dict) else ():
            if isinstance(pool, dict) and isinstance(pool.get("name"), str):
                names.add(pool["name"])
    return names


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the ``known`` names closest to ``name`` (up to
    three), or ``""`` when none is close: the tail of a 404's message."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


async def unknown_type(backend: Backend, automation_type: str) -> NotFound:
    """The 404 of a type the catalog does not hold, naming the closest known types."""
    hint = did_you_mean(automation_type, await backend.catalog.all())
    if not hint:
        # Most often a worker that is starting: its types appear once it registers.
        hint = "; no worker or master has registered it yet (start one with its plugin)"
    return NotFound(
        f"unknown automation type {automation_type!r}",
        resource="automation type",
        key=automation_type,
        hint=hint,
        automation_type=automation_type,
    )


async def require_entry(backend: Backend, automation_type: str) -> CatalogEntry:
    """The catalog entry of a type (perhaps one that cannot be read: see
    :func:`require_readable_entry`).

    Raises:
        NotFound: 404 if no plugin or worker ever published the type.
    """
    entry = await find_entry(backend, automation_type)
    if entry is None:
        raise await unknown_type(backend, automation_type)
    return entry


async def require_readable_entry(backend: Backend, automation_type: str) -> CatalogEntry:
    """The catalog entry of a type, for the routes that need its schemas.

    Raises:
        NotFound: 404 for an unknown type.
        RetryLater: 503 while its stored entry cannot be read (its workers publish
            it again within a heartbeat).
    """
    entry = await require_entry(backend, automation_type)
    why = entry_unreadable(entry)
    if why is not None:
        raise RetryLater(
            f"the catalog entry of {automation_type!r} cannot be read ({why}); a worker "
            "of the type publishes it again within a heartbeat, retry then",
            resource="catalog entry",
            key=automation_type,
            automation_type=automation_type,
        )
    return entry


async def require_batch_entry(backend: Backend, automation_type: str) -> CatalogEntry:
    """The catalog entry of a batch type.

    Raises:
        NotFound: 404 for an unknown type.
        Conflict: 409 for a type without a task queue.
        RetryLater: 503 while its stored entry cannot be read.
    """
    entry = await require_readable_entry(backend, automation_type)
    if not entry.get("queue"):
        kind = entry.get("kind", "automation")
        raise Conflict(
            f"automation type {automation_type!r} is a {kind}: it has no task queue, "
            "so tasks cannot be submitted to it",
            resource="automation type",
            key=automation_type,
            automation_type=automation_type,
        )
    return entry


async def shown_catalog(
    backend: Backend, sees_type: Callable[[str], bool]
) -> dict[str, dict[str, Any]]:
    """Every entry ``sees_type`` lets through, by type, as answers show them: secrets
    in schema defaults (a proxy URL a plugin wrote down) masked."""
    entries = await backend.catalog.all()
    return {t: mask_schema(e) for t, e in sorted(entries.items()) if sees_type(t)}


async def shown_entry(backend: Backend, automation_type: str) -> dict[str, Any]:
    """One type's entry as answers show it (secrets masked); 404 for an unknown type."""
    return dict(mask_schema(await require_entry(backend, automation_type)))


async def keep_local_entries(backend: Backend, period: float) -> None:
    """Re-write this process's entries whenever they are missing from the catalog
    (a Redis restart without persistence, a ``DELETE /automations/{type}``
    while the plugin is still installed) or cannot be read. Runs until cancelled."""
    outages = OutageLog(log)
    while True:
        await asyncio.sleep(period)
        try:
            present = await backend.catalog.all()
            for name, entry in local_entries().items():
                if name not in present or entry_unreadable(present[name]) is not None:
                    await backend.catalog.put(name, as_stored(entry))
                    log.info("catalog: re-published %s", name)
            outages.recovered("catalog keeper")
        except BackendError as exc:
            if is_outage(exc):
                outages.failed("catalog keeper", exc)
            else:
                log.warning("catalog keeper: %s", exc)
