"""Masking secrets in what the master shows.

A config may hold secrets: fields a plugin declares as ``SecretStr`` (their JSON
schema says ``"format": "password"`` or ``"writeOnly": true``), values under keys
that name one (``password``, ``secret``, ``token``, ``api_key``...), and credentials
inside URLs (``http://user:password@proxy:8080``). Every answer shows them masked, to
every token; an admin asks for them explicitly (``?reveal=true`` on the config
routes). Pure functions: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.core.redact import MASK, mask_url_credentials

__all__ = ["MASK", "mask_config", "mask_url_credentials", "mask_value", "unmask_patch"]

_SECRET_KEY = re.compile(r"pass(word|wd|phrase)?|secret|token|api[_-]?key|credential", re.I)


def secret_fields(schema: dict[str, Any]) -> set[str]:
    """Top-level properties a JSON schema marks as secret (pydantic's ``SecretStr``)."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return set()
    found = set()
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        options = [prop, *[p for p in prop.get("anyOf", []) if isinstance(p, dict)]]
        if any(p.get("format") == "password" or p.get("writeOnly") is True for p in options):
            found.add(name)
    return found


def mask_value(value: Any, secret_keys: set[str] | frozenset[str] = frozenset()) -> Any:
    """A copy of ``value`` with secrets masked: entries under ``secret_keys`` or a key
    that names a secret, and URL credentials in every string."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            named = isinstance(key, str) and (key in secret_keys or _SECRET_KEY.search(key))
            if named and item is not None and item != "":
                out[key] = MASK
            else:
                out[key] = mask_value(item)
        return out
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    if isinstance(value, str) and "@" in value and "://" in value:
        return mask_url_credentials(value)
    return value


def mask_config(config: Any, schema: dict[str, Any] | None) -> Any:
    """A config (or any JSON of configs) as every answer shows it."""
    return mask_value(config, secret_fields(schema or {}))


def unmask_patch(patch: Any, stored: Any) -> Any:
    """``patch`` with every masked value a client sent back (a form showing masked
    secrets saves them as they were shown) replaced by the stored secret, so a save
    never overwrites a secret with its mask."""
    if isinstance(patch, dict):
        base = stored if isinstance(stored, dict) else {}
        return {key: unmask_patch(value, base.get(key)) for key, value in patch.items()}
    if isinstance(patch, list):
        base_list = stored if isinstance(stored, list) else []
        return [
            unmask_patch(v, base_list[i] if i < len(base_list) else None)
            for i, v in enumerate(patch)
        ]
    if isinstance(patch, str) and MASK in patch and stored is not None:
        if patch == MASK or (isinstance(stored, str) and mask_url_credentials(stored) == patch):
            return stored
    return patch
