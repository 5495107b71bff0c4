"""Validating payloads and configs against the catalog's JSON schemas.

The master must work for automation types whose plugins it has never
installed, so the JSON schema from the catalog is the primary validator
(``jsonschema``, draft 2020-12, which is what pydantic emits). When the plugin
*is* installed in the master process, its pydantic model is used instead for
pydantic's own messages. Either way errors come out in FastAPI's shape:
``{"type", "loc", "msg", "input"}`` with ``loc`` starting at the request body.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from fleet.core.automation import BatchAutomation, get_automation
from fleet.core.catalog import CatalogEntry
from fleet.core.config import slot_bounds_problem, slots_problem
from fleet.master.services.safe_regex import SafeValidator

Loc = tuple[str | int, ...]
ErrorList = list[dict[str, Any]]

#: Longest message kept from jsonschema (its messages quote the whole instance).
MAX_MSG = 300


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    # Regular expressions of catalog schemas run on RE2 (fleet/master/services/safe_regex.py).
    validator: Draft202012Validator = SafeValidator(json.loads(schema_json))
    return validator


def _short(text: str) -> str:
    return text if len(text) <= MAX_MSG else text[: MAX_MSG - 3] + "..."


def _schema_error_items(error: SchemaError, loc: Loc) -> ErrorList:
    path: Loc = (*loc, *error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
        return [
            {"type": "missing", "loc": [*path, name], "msg": "Field required", "input": instance}
            for name in required
            if name not in instance
        ]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = set(schema.get("properties", {}))
        extra = [k for k in instance if k not in known] or [None]
        return [
            {
                "type": "extra_forbidden",
                "loc": [*path, k] if k is not None else list(path),
                "msg": "Extra inputs are not permitted",
                "input": instance.get(k) if k is not None else instance,
            }
            for k in extra
        ]
    message = error.message
    if error.validator in ("anyOf", "oneOf") and error.context:
        # "is not valid under any of the given schemas" says little; the closest
        # alternative's complaint says what was expected.
        message = best_match(error.context).message
    return [
        {
            "type": f"schema_{error.validator}",
            "loc": list(path),
            "msg": _short(message),
            "input": instance,
        }
    ]


def schema_errors(schema: dict[str, Any], instance: Any, loc: Loc = ()) -> ErrorList:
    """Validate ``instance`` against a JSON schema.

    Args:
        schema: The JSON schema (as pydantic's ``model_json_schema`` produces).
        instance: The decoded JSON value.
        loc: Prefix of every error's ``loc`` (e.g. ``("body", "payload")``).

    Returns:
        FastAPI-shaped errors, sorted by location; empty if valid.
    """
    return validator_errors(_validator(json.dumps(schema, sort_keys=True)), instance, loc)


def validator_errors(validator: Draft202012Validator, instance: Any, loc: Loc = ()) -> ErrorList:
    """As :func:`schema_errors` with an already built validator."""
    out: ErrorList = []
    for error in validator.iter_errors(instance):
        out.extend(_schema_error_items(error, loc))
    out.sort(key=lambda e: [str(p) for p in e["loc"]])
    return out


def model_errors(model: type[BaseModel], instance: Any, loc: Loc = ()) -> ErrorList:
    """Validate ``instance`` with a pydantic model; errors as :func:`schema_errors`."""
    try:
        model.model_validate(instance)
    except PydanticError as exc:
        return [
            {
                "type": e["type"],
                "loc": [*loc, *e["loc"]],
                "msg": e["msg"],
                "input": e.get("input"),
            }
            for e in exc.errors(include_url=False, include_context=False)
        ]
    return []


def local_payload_model(automation_type: str) -> type[BaseModel] | None:
    """The ``TaskPayload`` of a batch type registered in this process, else None."""
    cls = get_automation(automation_type)
    if cls is not None and issubclass(cls, BatchAutomation):
        return cls.TaskPayload
    return None


def local_config_model(automation_type: str) -> type[BaseModel] | None:
    """The ``Config`` of a type registered in this process, else None."""
    cls = get_automation(automation_type)
    config: type[BaseModel] | None = getattr(cls, "Config", None) if cls is not None else None
    return config


class PayloadChecker:
    """Validates the payloads of one type, choosing the validator once (a batch
    checks up to 10,000 payloads with it).

    Args:
        automation_type: The type.
        entry: Its catalog entry.
    """

    def __init__(self, automation_type: str, entry: CatalogEntry) -> None:
        self.model = local_payload_model(automation_type)
        self.validator: Draft202012Validator | None = None
        queue: Mapping[str, Any] = entry.get("queue") or {}
        schema = queue.get("payload")
        if self.model is None and isinstance(schema, dict):
            self.validator = _validator(json.dumps(schema, sort_keys=True))

    def errors(self, payload: Any, loc: Loc = ("body", "payload")) -> ErrorList:
        """Errors of one payload (empty if valid, or if the type declares no schema)."""
        if self.model is not None:
            return model_errors(self.model, payload, loc)
        if self.validator is not None:
            return validator_errors(self.validator, payload, loc)
        return []


def config_errors(
    automation_type: str, entry: CatalogEntry, config: dict[str, Any], loc: Loc = ("body",)
) -> ErrorList:
    """Errors of a (merged) config against the type's ``Config`` (empty if valid)."""
    model = local_config_model(automation_type)
    if model is not None:
        return model_errors(model, config, loc)
    schema = entry.get("config")
    if not isinstance(schema, dict):
        return []
    errors = schema_errors(schema, config, loc)
    if "slots" in config and (problem := slots_problem(config["slots"])) is not None:
        # The schema's own answer names only one member of the union.
        where = [*loc, "slots"]
        errors = [e for e in errors if list(e["loc"]) != where]
        errors.append(
            {"type": "value_error", "loc": where, "msg": problem, "input": config["slots"]}
        )
    bounds = slot_bounds_problem(config)
    if bounds is not None:
        errors.append(
            {
                "type": "value_error",
                "loc": [*loc, "min_slots"],
                "msg": bounds,
                "input": config.get("min_slots"),
            }
        )
    return errors


def split_missing(errors: Sequence[dict[str, Any]]) -> tuple[list[str], ErrorList]:
    """Separate "field required" errors (returned as dotted field names) from the rest.

    A config may legitimately be built in several PATCHes, or get its required
    plugin fields from per-worker overrides, so missing fields are reported as
    warnings rather than refused; workers of a type with missing fields stay in
    ``ERROR`` until they are set (docs/protocol.md).
    """
    missing: list[str] = []
    others: ErrorList = []
    for e in errors:
        if e.get("type") == "missing":
            fields = [str(p) for p in e["loc"] if p != "body"]
            missing.append(".".join(fields))
        else:
            others.append(e)
    return missing, others


def schema_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """The top-level ``default`` values declared by a JSON schema's properties."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


def _has_non_finite(value: Any) -> bool:
    # Iterative (a deeply nested payload must not hit the recursion limit) and
    # without building locations: this runs on every submitted task.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def non_finite_errors(value: Any, loc: Loc) -> ErrorList:
    """Errors for NaN/Infinity anywhere in a decoded JSON value.

    Python's JSON decoder accepts ``NaN`` and ``Infinity``, which no JSON
    schema rejects and no standard JSON encoder can write back, so they are
    refused at the door instead of being stored.
    """
    if not _has_non_finite(value):
        return []
    out: ErrorList = []
    stack: list[tuple[Any, Loc]] = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            out.append(
                {
                    "type": "finite_number",
                    "loc": list(where),
                    "msg": "Input should be a finite number",
                    "input": str(item),
                }
            )
        elif isinstance(item, dict):
            stack.extend((v, (*where, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(item))
    return out
