"""Masking secrets in what the master shows, and keeping them when a mask comes back.

A config may hold secrets: fields a plugin declares as ``SecretStr`` (their JSON
schema says ``"format": "password"`` or ``"writeOnly": true``), values under keys
that name one (``password``, ``secret``, ``token``, ``api_key``...), and credentials
inside URLs, in every form Fleet accepts (``http://user:password@proxy:8080``,
``user:password@proxy:8080``, ``http://apikey@proxy:8080``, a password holding ``@``
or ``:``). Every answer shows them masked, to every token; an admin asks for them
explicitly (``?reveal=true`` on the config routes). URL credentials are masked by
:func:`fleet.core.redact.mask_credentials`, as in every log line.

A client that edits what it was shown (the dashboard's config form) sends masks
back; :func:`unmask_patch` puts the stored secrets in their place, entry by entry
in a list of URLs, and refuses (422) a mask it cannot place rather than store it.
Pure functions: no I/O.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

from fleet.core.errors import InvalidInput
from fleet.core.redact import MASK, mask_credentials

__all__ = [
    "MASK",
    "mask_config",
    "mask_credentials",
    "mask_schema",
    "mask_task",
    "mask_value",
    "unmask_patch",
]

_SECRET_KEY = re.compile(r"pass(word|wd|phrase)?|secret|token|api[_-]?key|credential", re.I)
#: Config keys whose string value is a list of URLs (the worker adds ``http://`` to an
#: entry without a scheme), so every entry's credentials are masked, with or without one.
URL_LIST_KEYS = frozenset({"proxy_url"})
# Entries of a string as the worker splits proxy_url (commas, newlines), separators kept.
_ENTRIES = re.compile(r"([,\n])")


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


def _is_secret_key(key: Any, secret_keys: set[str] | frozenset[str]) -> bool:
    return isinstance(key, str) and (key in secret_keys or bool(_SECRET_KEY.search(key)))


def _mask_string(value: str, key: Any) -> str:
    # The user name stays in front of a masked password: the admin's form must tell
    # accounts apart, and a masked entry sent back is matched by it.
    return mask_credentials(value, keep_user=True, url_list=key in URL_LIST_KEYS)


def mask_value(
    value: Any, secret_keys: set[str] | frozenset[str] = frozenset(), *, key: Any = None
) -> Any:
    """A copy of ``value`` with secrets masked: entries under ``secret_keys`` or a key
    that names a secret, and URL credentials in every string (``key``: the key
    ``value`` sits under, which tells a list of URLs such as ``proxy_url``)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if _is_secret_key(name, secret_keys) and item is not None and item != "":
                out[name] = MASK
            else:
                out[name] = mask_value(item, key=name)
        return out
    if isinstance(value, list):
        return [mask_value(v, key=key) for v in value]
    if isinstance(value, str):
        return _mask_string(value, key)
    return value


def mask_task(shown: dict[str, Any]) -> dict[str, Any]:
    """A task's JSON (a dead letter, a task's state) with the credentials in its
    ``last_error`` and ``traceback`` masked: a plugin's exception often names the URL
    it failed through, proxy password included."""
    out = dict(shown)
    for field in ("last_error", "traceback"):
        if isinstance(out.get(field), str):
            out[field] = mask_credentials(out[field])
    if isinstance(out.get("attempts"), list):
        out["attempts"] = [_masked_attempt(a) for a in out["attempts"]]
    return out


def _masked_attempt(attempt: Any) -> Any:
    """An attempt's error masked, as a record shows it (a dict) or a dead letter's body
    stores it (``[n, worker, started, ended, outcome, error]``)."""
    if isinstance(attempt, dict) and isinstance(attempt.get("error"), str):
        return {**attempt, "error": mask_credentials(attempt["error"])}
    if isinstance(attempt, list) and len(attempt) > 5 and isinstance(attempt[5], str):
        return [*attempt[:5], mask_credentials(attempt[5]), *attempt[6:]]
    return attempt


def mask_schema(schema: Any, key: Any = None) -> Any:
    """A JSON schema (a catalog entry, a ``Config`` schema) as every answer shows it: a
    plugin may write a proxy URL, password included, as a field's default. URL
    credentials in every string are masked, and the default and examples of a field
    that is secret (``SecretStr``, a name naming a secret); property names and the
    rest of the structure are kept, or forms could not be built from it."""
    if isinstance(schema, list):
        return [mask_schema(v, key) for v in schema]
    if isinstance(schema, str):
        return _mask_string(schema, key)
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    secret = secret_fields(schema)
    for name, value in schema.items():
        if name == "properties" and isinstance(value, dict):
            out[name] = {
                prop: _mask_property(item, prop, prop in secret) for prop, item in value.items()
            }
        else:
            out[name] = mask_schema(value, key)
    return out


def _mask_property(prop: Any, name: str, secret: bool) -> Any:
    shown = mask_schema(prop, name)
    if isinstance(shown, dict) and (secret or _is_secret_key(name, frozenset())):
        # Only text: a secret-sounding name such as max_tokens keeps its number.
        if isinstance(shown.get("default"), str) and shown["default"]:
            shown["default"] = MASK
        if isinstance(shown.get("examples"), list):
            shown["examples"] = [MASK if isinstance(x, str) else x for x in shown["examples"]]
    return shown


def mask_config(config: Any, schema: dict[str, Any] | None) -> Any:
    """A config (or any JSON of configs) as every answer shows it."""
    return mask_value(config, secret_fields(schema or {}))


def unmask_patch(patch: Any, stored: Any) -> Any:
    """``patch`` with every masked value a client sent back (a form showing masked
    secrets saves them as they were shown) replaced by the stored secret, so a save
    never overwrites a secret with its mask.

    A whole masked value (``"********"``, or a string shown masked) takes the stored
    one. In a string or list of URLs that changed (an entry added, removed or moved),
    each masked entry takes the stored entry with the same scheme, user name, host
    and port; entries without a mask are kept as sent.

    Args:
        patch: What the client sent (a partial config).
        stored: What it was shown from: the stored config, merged over the defaults.

    Raises:
        InvalidInput: (422) A mask that matches no stored secret, naming where (the
            entry's index within a list of URLs): it is never stored as the secret.
    """
    return _unmask(patch, stored, ["body"], None)


def _unmask(patch: Any, stored: Any, loc: list[str | int], key: Any) -> Any:
    if isinstance(patch, dict):
        base = stored if isinstance(stored, dict) else {}
        return {k: _unmask(v, base.get(k), [*loc, k], k) for k, v in patch.items()}
    if isinstance(patch, list):
        base_list = stored if isinstance(stored, list) else []
        pool = _Pool([v for v in base_list if isinstance(v, str)], key)
        out = []
        for i, item in enumerate(patch):
            here = base_list[i] if i < len(base_list) else None
            if isinstance(item, str) and item != MASK:
                out.append(_unmask_string(item, pool, [*loc, i], key))
            else:  # a nested value, or a whole mask: the stored item at its place
                out.append(_unmask(item, here, [*loc, i], key))
        return out
    if isinstance(patch, str) and MASK in patch:
        if patch == MASK:
            if stored is None or stored == "":
                raise _refused(loc, "is a mask and no secret is stored here; send the value")
            return stored
        if isinstance(stored, str) and _mask_string(stored, key) == patch:
            return stored
        pool = _Pool([stored] if isinstance(stored, str) else [], key)
        return _unmask_string(patch, pool, loc, key)
    return patch


class _Pool:
    """The stored URL entries a masked entry may stand for, each given out once."""

    def __init__(self, values: list[str], key: Any) -> None:
        self.entries: list[tuple[tuple[Any, ...] | None, str]] = []
        for value in values:
            for entry in _ENTRIES.split(value)[::2]:
                if entry.strip():
                    shown = _mask_string(entry.strip(), key)
                    self.entries.append((_identity(shown), entry.strip()))

    def take(self, shown: str) -> str | None:
        wanted = _identity(shown)
        if wanted is None:
            return None
        for i, (identity, entry) in enumerate(self.entries):
            if identity == wanted:
                del self.entries[i]
                return entry
        return None


def _unmask_string(patch: str, pool: _Pool, loc: list[str | int], key: Any) -> str:
    if MASK not in patch:
        return patch
    parts = _ENTRIES.split(patch)
    for n, i in enumerate(range(0, len(parts), 2)):
        entry = parts[i]
        if MASK not in entry:
            continue
        stripped = entry.strip()
        found = pool.take(stripped)
        if found is None:
            where = f"entry {n} ({mask_credentials(stripped, keep_user=True)!r})"
            raise _refused(
                loc,
                f"{where} holds a mask that matches no stored URL with the same scheme, "
                "user, host and port; send its password",
                index=n,
            )
        parts[i] = entry.replace(stripped, found, 1)
    return "".join(parts)


def _identity(shown: str) -> tuple[Any, ...] | None:
    # What a masked URL still shows of itself: scheme, user name as shown (the mask
    # itself for a user-name-only credential), host, port and the rest. None: not a
    # URL with credentials, so no mask in it can stand for a stored secret.
    parts: SplitResult = urlsplit(shown if "://" in shown else f"http://{shown}")
    if "@" not in parts.netloc:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    user = parts.netloc.rpartition("@")[0].partition(":")[0]
    return (parts.scheme.lower(), user, parts.hostname, port, parts.path, parts.query)


def _refused(loc: list[str | int], msg: str, *, index: int | None = None) -> InvalidInput:
    error: dict[str, Any] = {"type": "masked_secret", "loc": loc, "msg": msg}
    if index is not None:
        error["ctx"] = {"index": index}
    return InvalidInput([error])
