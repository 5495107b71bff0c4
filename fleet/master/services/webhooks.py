"""Webhook subscriptions over REST (docs/webhooks.md): create (the secret shown once),
list and read (the secret masked), change, delete, a test delivery, the delivery log.

Pure checks raise :class:`~fleet.core.errors.InvalidInput` naming the field; the
dispatcher (:mod:`~fleet.master.services.webhook_dispatch`) turns events into the
deliveries.
"""

from __future__ import annotations

import secrets
import time
from typing import Any
from urllib.parse import urlsplit

from fleet.backends.base import Backend
from fleet.core.errors import InvalidInput, NotFound
from fleet.core.redact import mask_credentials
from fleet.core.webhooks import EVENTS, Hook, clock
from fleet.master.services.webhook_dispatch import dispatch
from fleet.webhooks.events import webhook_test_event
from fleet.webhooks.signing import key_of, looks_masked, masked, new_secret

#: Subscriptions a fleet may hold (each event is read against all of them).
MAX_HOOKS = 100
#: The longest URL accepted.
MAX_URL = 2000
#: Deliveries a page of the log shows at most.
MAX_PAGE = 100


def _bad(field: str, msg: str, value: Any = None) -> InvalidInput:
    error: dict[str, Any] = {"type": "value_error", "loc": ["body", field], "msg": msg}
    if value is not None:
        error["input"] = value
    return InvalidInput([error])


def check_url(url: str) -> str:
    """The URL if deliveries may go there: http or https, with a host.

    Raises:
        InvalidInput: naming ``url``.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise _bad("url", "url is not a URL") from None
    if parts.scheme not in ("http", "https"):
        raise _bad("url", f"url must be http or https, not {parts.scheme or 'no scheme'!r}")
    if not host:
        raise _bad("url", "url has no host")
    if len(url) > MAX_URL or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise _bad("url", f"url must be at most {MAX_URL} characters, without spaces")
    return url


def check_events(events: list[str]) -> tuple[str, ...]:
    """The events, each known, at least one.

    Raises:
        InvalidInput: naming ``events`` (and the unknown one's index).
    """
    if not events:
        raise _bad("events", f"events must name at least one of {', '.join(EVENTS)}")
    for i, name in enumerate(events):
        if name not in EVENTS:
            raise InvalidInput(
                [
                    {
                        "type": "value_error",
                        "loc": ["body", "events", i],
                        "msg": f"unknown event {name!r}: use {', '.join(EVENTS)}",
                        "input": name,
                    }
                ]
            )
    return tuple(dict.fromkeys(events))


def check_secret(secret: str) -> str:
    """A secret the caller chose: ``whsec_`` and the base64 of 24 to 64 bytes, not
    the mask an answer showed.

    Raises:
        InvalidInput: naming ``secret``.
    """
    if looks_masked(secret):
        raise _bad("secret", "secret is masked: send the secret itself, or none to get a new one")
    try:
        key_of(secret)
    except ValueError as exc:
        raise _bad("secret", f"secret: {exc}") from None
    return secret


def shown(hook: Hook) -> dict[str, Any]:
    """A subscription as answers show it: the secret masked, URL credentials masked."""
    out = hook.to_dict()
    out["secret"] = masked(hook.secret)
    out["url"] = mask_credentials(hook.url)
    return out


async def create(backend: Backend, body: dict[str, Any]) -> dict[str, Any]:
    """A new subscription; the answer holds its secret, the only time it is shown.

    Raises:
        InvalidInput: A field does not validate (named); or the fleet holds
            :data:`MAX_HOOKS` already.
    """
    url = check_url(body["url"])
    events = check_events(body["events"])
    secret = new_secret() if body.get("secret") is None else check_secret(body["secret"])
    if len(await backend.webhooks.all()) >= MAX_HOOKS:
        raise _bad("url", f"a fleet holds at most {MAX_HOOKS} webhooks: delete one first")
    types, runs = body.get("types"), body.get("runs")
    hook = Hook(
        id="wh_" + secrets.token_hex(8),
        url=url,
        events=events,
        secret=secret,
        created_at=clock(time.time()),
        types=None if types is None else tuple(dict.fromkeys(types)),
        runs=None if runs is None else tuple(dict.fromkeys(runs)),
        description=body.get("description") or "",
        enabled=bool(body.get("enabled", True)),
    )
    await backend.webhooks.put(hook)
    return {**shown(hook), "secret": hook.secret}


async def _hook(backend: Backend, hook_id: str) -> Hook:
    hook = await backend.webhooks.get(hook_id)
    if hook is None:
        raise NotFound(f"no webhook {hook_id!r}", resource="webhook", key=hook_id)
    return hook


async def listing(backend: Backend) -> dict[str, Any]:
    """Every subscription, oldest first, secrets masked."""
    return {"webhooks": [shown(h) for h in await backend.webhooks.all()]}


async def one(backend: Backend, hook_id: str) -> dict[str, Any]:
    """One subscription, its secret masked (404 if unknown)."""
    return shown(await _hook(backend, hook_id))


async def change(backend: Backend, hook_id: str, patch: dict[str, Any]) -> dict[str, Any]:
    """Change ``enabled``, ``events``, ``types``, ``runs`` or ``description`` (the
    fields given); the URL and secret stay (a new URL is a new subscription).

    Raises:
        NotFound: Unknown id.
        InvalidInput: A field does not validate (named).
    """
    hook = await _hook(backend, hook_id)
    fields = hook.to_dict()
    if "events" in patch:
        fields["events"] = list(check_events(patch["events"]))
    if patch.get("enabled") is not None:
        fields["enabled"] = bool(patch["enabled"])
    for name in ("types", "runs"):
        if name in patch:  # null: no filter
            fields[name] = None if patch[name] is None else list(dict.fromkeys(patch[name]))
    if "description" in patch:
        fields["description"] = patch["description"] or ""
    updated = Hook.from_dict(fields)
    await backend.webhooks.put(updated)
    return shown(updated)


async def delete(backend: Backend, hook_id: str) -> dict[str, Any]:
    """Forget a subscription and its log (deliveries still queued are dropped)."""
    if not await backend.webhooks.delete(hook_id):
        raise NotFound(f"no webhook {hook_id!r}", resource="webhook", key=hook_id)
    return {"id": hook_id, "deleted": True}


async def deliveries(
    backend: Backend, hook_id: str, *, cursor: str | None, limit: int
) -> dict[str, Any]:
    """A page of the subscription's delivery log, newest first; ``next`` the cursor
    of the next page (None: the last)."""
    await _hook(backend, hook_id)
    try:
        offset = int(cursor or 0)
    except ValueError:
        raise InvalidInput(
            [{"type": "value_error", "loc": ["query", "cursor"], "msg": "cursor is a `next`"}]
        ) from None
    found = await backend.webhooks.deliveries(hook_id, offset=max(offset, 0), limit=limit + 1)
    more = len(found) > limit
    return {
        "webhook": hook_id,
        "deliveries": [d.to_dict() for d in found[:limit]],
        "next": str(offset + limit) if more else None,
    }


async def send_test(backend: Backend, hook_id: str) -> dict[str, Any]:
    """Queue a ``webhook.test`` delivery to this subscription (even if disabled)."""
    hook = await _hook(backend, hook_id)
    event = webhook_test_event(hook.id)
    await dispatch(backend, event, [hook], force=True)
    return {"webhook": hook.id, "event_id": event.id, "queued": True}
