"""The catalog entry of an automation, built by a pure function from its class.

:class:`CatalogEntry` names the fields an entry has (contracts.md): what the master
reads from the catalog, typed. The backends store and return entries as plain JSON
objects (``dict[str, Any]``); :func:`as_entry` gives one its type, without a copy.
An entry the backend could not decode (:func:`fleet.core.stored.catalog_entry_of`)
has only ``type``, ``unreadable`` and ``raw``.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from fleet.core.automation import Automation, BatchAutomation
from fleet.core.config import BaseConfig

#: A JSON schema (``model_json_schema()`` of a pydantic model).
JsonSchema = dict[str, Any]


class ChannelEntry(TypedDict):
    """A batch type's task queue, or a type's output stream: its name and the JSON
    schema of what it carries (``TaskPayload``, ``Output``)."""

    name: str
    payload: JsonSchema


class PoolEntry(TypedDict):
    """A pool an automation declares: its fleet-wide name and its schemas."""

    name: str
    payload: JsonSchema
    tags: JsonSchema


class CatalogEntry(TypedDict, total=False):
    """One automation's catalog entry.

    Attributes:
        type: The automation type.
        kind: ``BatchAutomation`` or ``ContinuousAutomation``.
        config: The JSON schema of its ``Config``.
        queue: Its task queue (batch types), else None.
        stream: Its output stream (when ``Output`` is declared), else None.
        pools: Local pool name -> the pool it declares.
        browser: Its ``BrowserNeeds`` declaration, or None.
        unreadable: Only in an entry that could not be read: why.
        raw: Only in an entry that could not be read: its stored text, cut.
    """

    type: str
    kind: str
    config: JsonSchema
    queue: ChannelEntry | None
    stream: ChannelEntry | None
    pools: dict[str, PoolEntry]
    browser: dict[str, Any] | None
    unreadable: str
    raw: str


def as_entry(stored: dict[str, Any]) -> CatalogEntry:
    """A catalog entry as a backend returns it, typed (the same object)."""
    return cast(CatalogEntry, stored)


def as_entries(stored: dict[str, dict[str, Any]]) -> dict[str, CatalogEntry]:
    """Entries by type as a backend returns them (``catalog_all``), typed (the same
    object)."""
    return cast(dict[str, CatalogEntry], stored)


def as_stored(entry: CatalogEntry) -> dict[str, Any]:
    """A typed entry as the backends store it (the same object)."""
    return cast(dict[str, Any], entry)


def describe(cls: type[Automation[Any]]) -> CatalogEntry:
    """Describe an automation class as contracts.md's catalog entry.

    Returns:
        ``{type, kind, config, queue, stream, pools, browser}`` where ``config`` is the
        JSON schema of ``Config``, ``queue`` is ``{name, payload}`` for batch types
        (else None), ``stream`` is ``{name, payload}`` when ``Output`` is declared
        (else None), ``pools`` maps each local pool name to ``{name, payload, tags}``
        schemas, and ``browser`` describes a ``BrowserNeeds`` declaration or is None.
    """
    name = cls.automation_type
    config_model: type[BaseConfig] = getattr(cls, "Config", BaseConfig)
    entry: CatalogEntry = {
        "type": name,
        "kind": cls.kind,
        "config": config_model.model_json_schema(),
        "queue": None,
        "stream": None,
        "pools": {},
        "browser": cls.Browser.describe() if cls.Browser is not None else None,
    }
    if issubclass(cls, BatchAutomation):
        entry["queue"] = {"name": name, "payload": cls.TaskPayload.model_json_schema()}
    if cls.Output is not None:
        entry["stream"] = {"name": name, "payload": cls.Output.model_json_schema()}
    pools: dict[str, PoolEntry] = {}
    for local, pool in cls.Pools.items():
        pools[local] = {
            "name": pool.name,
            "payload": pool.payload.model_json_schema(),
            "tags": pool.tags.model_json_schema(),
        }
    entry["pools"] = pools
    return entry


def catalog_entry(cls: type[Automation[Any]]) -> dict[str, Any]:
    """:func:`describe` as the backends store it (a JSON object, ``catalog_put``)."""
    return as_stored(describe(cls))
