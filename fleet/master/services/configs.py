"""Configs as the REST API shows and takes them: secrets masked on the way out, masks
sent back put back in their place on the way in, around the generation writes of
:mod:`fleet.master.services.config_ops`."""

from __future__ import annotations

from typing import Any

from fleet.backends.base import Backend
from fleet.core.config import merge_config
from fleet.master.services.catalog import require_entry, require_readable_entry
from fleet.master.services.config_ops import patch_type_config, patch_worker_config
from fleet.master.services.secrets import mask_config, mask_schema, unmask_patch
from fleet.master.services.validation import config_errors, schema_defaults, split_missing


async def type_config(backend: Backend, automation_type: str, *, reveal: bool) -> dict[str, Any]:
    """The stored type-wide config, the defaults, the effective result, required fields
    still unset, and the ``Config`` schema; secrets masked unless ``reveal``.

    Raises:
        NotFound: 404 for an unknown type.
    """
    entry = await require_entry(backend, automation_type)
    schema = entry.get("config") or {}
    stored = await backend.configs.get(automation_type)
    effective = merge_config(schema_defaults(schema), stored)
    missing, _errors = split_missing(config_errors(automation_type, entry, stored))
    shown = {"config": stored, "defaults": schema_defaults(schema), "effective": effective}
    if not reveal:
        shown = {k: mask_config(v, schema) for k, v in shown.items()}
    return {
        "type": automation_type,
        **shown,
        "missing": missing,
        "schema": schema if reveal else mask_schema(schema),
    }


async def patch_type(
    backend: Backend, automation_type: str, patch: dict[str, Any], *, replace: bool
) -> dict[str, Any]:
    """Write a type-wide PATCH (masks sent back keep the stored secrets) and answer
    what it did, the stored config masked.

    Raises:
        NotFound: 404 for an unknown type, 503 while its entry cannot be read.
        InvalidInput: The result does not fit ``Config``, or a mask cannot be placed.
    """
    entry = await require_readable_entry(backend, automation_type)
    # The client was shown the stored config over the defaults (the dashboard's form
    # edits ``effective``): a mask it sends back stands for a secret of either.
    schema = entry.get("config") or {}
    shown = merge_config(schema_defaults(schema), await backend.configs.get(automation_type))
    patch = unmask_patch(patch, shown)
    result = await patch_type_config(backend, automation_type, entry, patch, replace=replace)
    answer = result.to_dict()
    answer["config"] = mask_config(answer["config"], schema)
    return {"type": automation_type, **answer}


async def patch_worker(
    backend: Backend, automation_type: str, worker_id: str, patch: dict[str, Any], *, replace: bool
) -> dict[str, Any]:
    """Write one worker's override (masks sent back keep the stored secrets) and
    answer what it did, the stored override masked.

    Raises:
        NotFound: 404 for an unknown type, 503 while its entry cannot be read.
        InvalidInput: The merged result does not fit ``Config``, or a mask cannot be
            placed.
    """
    entry = await require_readable_entry(backend, automation_type)
    # A worker's masks may stand for its override or the type-wide value it was shown
    # merged with it (``GET .../workers/{id}``: ``merged``).
    schema = entry.get("config") or {}
    type_wide = merge_config(schema_defaults(schema), await backend.configs.get(automation_type))
    override = await backend.configs.get(automation_type, worker_id)
    patch = unmask_patch(patch, merge_config(type_wide, override))
    result = await patch_worker_config(
        backend, automation_type, worker_id, entry, patch, replace=replace
    )
    answer = result.to_dict()
    answer["config"] = mask_config(answer["config"], schema)
    return {"type": automation_type, "worker_id": worker_id, **answer}
