"""The catalog entry of an automation, built by a pure function from its class."""

from __future__ import annotations

from typing import Any

from fleet.core.automation import Automation, BatchAutomation
from fleet.core.config import BaseConfig


def catalog_entry(cls: type[Automation[Any]]) -> dict[str, Any]:
    """Describe an automation class as contracts.md's catalog entry.

    Returns:
        ``{type, kind, config, queue, stream, pools}`` where ``config`` is the JSON
        schema of ``Config``, ``queue`` is ``{name, payload}`` for batch types (else
        None), ``stream`` is ``{name, payload}`` when ``Output`` is declared (else
        None), ``pools`` maps each local pool name to ``{name, payload, tags}``
        schemas, and ``browser`` describes a ``BrowserNeeds`` declaration or is None.
    """
    name = cls.automation_type
    config_model: type[BaseConfig] = getattr(cls, "Config", BaseConfig)
    entry: dict[str, Any] = {
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
    for local, pool in cls.Pools.items():
        entry["pools"][local] = {
            "name": pool.name,
            "payload": pool.payload.model_json_schema(),
            "tags": pool.tags.model_json_schema(),
        }
    return entry
