"""Identity pools as the REST API serves them (docs/identities.md).

**Creating.** A create is explicit identities or a generate plan
(:mod:`fleet.core.fingerprints`), at most :data:`MAX_CREATE` of them. Every identity is
checked before anything is written (a 422 names the field, ``identities.3.cookies.0.domain``),
then all are put in one atomic backend step: nothing is ever half-written. An id that
exists has its documents replaced (its state and stats stay).

**Masking.** Every answer shows the secrets of an identity masked, to every token, as
the configs show a proxy URL: the password of its proxy URL (the user name kept, so
accounts stay apart), every cookie's value, the values of its account under keys that
name a secret (``password``, ``token``...) and URL credentials in it, and the values of
``Cookie`` and ``Authorization`` headers of its fingerprint. The admin token asks for
them whole with ``reveal=true``.

A pool *exists* while it holds an identity: an unknown pool is a 404 naming the
closest pools that exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fleet.backends.base import Backend
from fleet.core.errors import ContractValueError, InvalidInput, NotFound, TooLarge
from fleet.core.fingerprints import check_plan, generate_identities
from fleet.core.identities import Identity, check_pool_name, parse_identity
from fleet.core.identity import IDENTITIES_TOPIC, IdentityEventName, identity_event
from fleet.core.redact import MASK, mask_credentials
from fleet.master.services.catalog import did_you_mean
from fleet.master.services.secrets import mask_value

#: Most identities one create may carry or generate (a 413 above).
MAX_CREATE = 1000
#: Most refusals a 422 lists (one per identity).
MAX_ERRORS = 20
#: Fingerprint headers whose value is a credential.
_SECRET_HEADERS = frozenset({"cookie", "authorization", "proxy-authorization"})


# ------------------------------------------------------------------ masking
def mask_identity(shown: dict[str, Any]) -> dict[str, Any]:
    """An identity's JSON with its secrets masked (see the module)."""
    out = dict(shown)
    if isinstance(out.get("proxy"), str):
        out["proxy"] = mask_credentials(out["proxy"], keep_user=True, url_list=True)
    out["cookies"] = [
        {**c, "value": MASK} if c.get("value") else dict(c) for c in out.get("cookies") or []
    ]
    if out.get("account") is not None:
        out["account"] = mask_value(out["account"])
    fingerprint = out.get("fingerprint")
    if isinstance(fingerprint, dict):
        fingerprint = dict(fingerprint)
        fingerprint["headers"] = [
            [name, MASK if name.lower() in _SECRET_HEADERS else value]
            for name, value in fingerprint.get("headers") or []
        ]
        out["fingerprint"] = fingerprint
    stats = out.get("stats")
    if isinstance(stats, dict) and isinstance(stats.get("last_reason"), str):
        out["stats"] = {**stats, "last_reason": mask_credentials(stats["last_reason"])}
    return out


def shown(identity: Identity, *, reveal: bool) -> dict[str, Any]:
    """An identity as an answer shows it: masked unless ``reveal``."""
    body = identity.to_dict()
    return body if reveal else mask_identity(body)


# ------------------------------------------------------------------ reading
async def unknown_pool(backend: Backend, pool: str) -> NotFound:
    """The 404 of a pool that holds no identity, naming the closest pools that do."""
    return NotFound(
        f"unknown identity pool {pool!r}: it holds no identity",
        resource="identity pool",
        key=pool,
        hint=did_you_mean(pool, await backend.identities.pools()),
    )


async def _require_pool(backend: Backend, pool: str) -> None:
    if pool not in await backend.identities.pools():
        raise await unknown_pool(backend, pool)


async def pool_list(backend: Backend) -> dict[str, Any]:
    """``{"pools": [{"pool", "total", "counts"}]}``: every pool by name, with its counts
    by state."""
    out = []
    for pool in await backend.identities.pools():
        page = await backend.identities.page(pool, limit=1)
        out.append({"pool": pool, "total": sum(page.counts.values()), "counts": page.counts})
    return {"pools": out}


async def pool_page(
    backend: Backend, pool: str, *, after: str | None, limit: int, reveal: bool
) -> dict[str, Any]:
    """A page of ``pool`` by id: ``{"pool", "items", "next", "counts"}``.

    Raises:
        NotFound: the pool holds no identity.
    """
    await _require_pool(backend, pool)
    page = await backend.identities.page(pool, after=after, limit=limit)
    return {
        "pool": pool,
        "items": [shown(i, reveal=reveal) for i in page.items],
        "next": page.next,
        "counts": page.counts,
    }


async def _identity(backend: Backend, pool: str, identity_id: str) -> Identity:
    found = await backend.identities.get(pool, identity_id)
    if found is None:
        await _require_pool(backend, pool)
        raise NotFound(
            f"unknown identity {identity_id!r} in pool {pool!r}",
            resource="identity",
            key=identity_id,
        )
    return found


async def one_identity(
    backend: Backend, pool: str, identity_id: str, *, reveal: bool
) -> dict[str, Any]:
    """One identity with its state and stats.

    Raises:
        NotFound: an unknown pool (with did-you-mean) or id.
    """
    return shown(await _identity(backend, pool, identity_id), reveal=reveal)


# ------------------------------------------------------------------ changing
def checked_identities(raw: Sequence[Any]) -> list[Identity]:
    """Every identity of ``raw`` checked (``identities.N.<field>``), ids unique.

    Raises:
        TooLarge: more than :data:`MAX_CREATE`.
        InvalidInput: one error per bad identity (up to :data:`MAX_ERRORS`).
    """
    if len(raw) > MAX_CREATE:
        raise TooLarge(
            f"at most {MAX_CREATE} identities per request; got {len(raw)}: send them in parts",
            resource="identities",
        )
    made: list[Identity] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        try:
            identity = parse_identity(item, where=f"identities.{i}")
        except ContractValueError as exc:
            errors.append(_error(exc.field or f"identities.{i}", exc.message))
            continue
        if identity.id in seen:
            errors.append(_error(f"identities.{i}.id", f"id {identity.id!r} is given twice"))
        seen.add(identity.id)
        made.append(identity)
    if errors:
        raise InvalidInput(errors[:MAX_ERRORS])
    return made


def _error(field: str, msg: str) -> dict[str, Any]:
    return {"type": "value_error", "loc": ["body", *field.split(".")], "msg": msg}


def generated(spec: dict[str, Any]) -> list[Identity]:
    """The identities of a generate plan (``spec``: the body's ``generate``), made off
    the event loop's thread by the caller.

    Raises:
        TooLarge: a count over :data:`MAX_CREATE`.
        ContractValueError: a field of the plan (``generate.countries.0``).
        Unsupported: browserforge is not installed (501).
    """
    if spec["count"] > MAX_CREATE:
        raise TooLarge(
            f"at most {MAX_CREATE} identities per request; asked {spec['count']}",
            resource="identities",
        )
    return generate_identities(check_plan(**spec))


async def create(
    backend: Backend,
    pool: str,
    *,
    identities: Sequence[Any] | None = None,
    generate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Put explicit ``identities`` or ``generate`` new ones, in one atomic step:
    ``{"pool", "created", "replaced", "ids"}``.

    Raises:
        ContractValueError: a bad pool name; neither or both of the two given.
        InvalidInput, TooLarge, Unsupported: see :func:`checked_identities`, :func:`generated`.
    """
    check_pool_name(pool)
    if (identities is None) == (generate is None):
        raise ContractValueError("give either identities or generate", field="identities")
    if identities is not None:
        made = checked_identities(identities)
    else:
        assert generate is not None
        made = await asyncio.to_thread(generated, generate)
    created = await backend.identities.put(pool, made)
    return {
        "pool": pool,
        "created": created,
        "replaced": len(made) - created,
        "ids": [i.id for i in made],
    }


async def _publish(
    backend: Backend, pool: str, identity: Identity, event: IdentityEventName, reason: str | None
) -> None:
    """Publish what an operator did to ``identity`` on the identities topic (the event
    stream's ``identity``)."""
    message = identity_event(pool, identity.id, event, reason, identity.cooling_until)
    await backend.events.publish(IDENTITIES_TOPIC, message)


async def retire(
    backend: Backend, pool: str, identity_id: str, reason: str | None
) -> dict[str, Any]:
    """Retire an identity for good (until revived), published as a ``retired`` event;
    the identity, masked."""
    await _identity(backend, pool, identity_id)
    await backend.identities.retire(pool, identity_id, reason)
    now = await _identity(backend, pool, identity_id)
    await _publish(backend, pool, now, "retired", now.stats.last_reason)
    return shown(now, reveal=False)


async def revive(backend: Backend, pool: str, identity_id: str) -> dict[str, Any]:
    """A retired or cooling identity back to ready, published as a ``revived`` event;
    the identity, masked."""
    await _identity(backend, pool, identity_id)
    await backend.identities.revive(pool, identity_id)
    now = await _identity(backend, pool, identity_id)
    await _publish(backend, pool, now, "revived", None)
    return shown(now, reveal=False)


async def delete(backend: Backend, pool: str, identity_id: str) -> dict[str, Any]:
    """Remove an identity (its leases and sticky keys go with it)."""
    await _identity(backend, pool, identity_id)
    if not await backend.identities.delete(pool, identity_id):
        raise NotFound(
            f"unknown identity {identity_id!r} in pool {pool!r}",
            resource="identity",
            key=identity_id,
        )
    return {"pool": pool, "id": identity_id, "deleted": True}
