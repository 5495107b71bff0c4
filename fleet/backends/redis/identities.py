"""Identity pools on Redis: one script, ``lua/identities.lua``, for every change and
every read that must first end expired leases. The keys of a pool are
``fleet:identity:<pool>:{docs,meta,ids,ready,leases,owner,sticky}`` (one hash tag per
pool on Cluster) and the pool names are the set ``fleet:identity-pools``. A release that
brings cookies or an account merges them in Python (:func:`fleet.core.identities.
merged_cookies`, the one copy of that rule) and writes the result only if the document
is still the one it read (else it reads and merges again)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.scripts import LuaScript
from fleet.core.capabilities.identities import Identities
from fleet.core.errors import BackendError
from fleet.core.identities import (
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RETIRE_AFTER,
    IDENTITY_STATES,
    Identity,
    IdentityLease,
    IdentityPage,
    IdentityState,
    IdentityStats,
    LeaseOutcome,
    merged_cookies,
    parse_identity,
    state_at,
)
from fleet.core.records import dumps, new_token, now

#: How often a release merges again when the document changed under it.
_MERGE_TRIES = 8


def _num(value: Any, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _text(raw: Any) -> str | None:
    if raw is None or raw is False:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _meta(raw: Any) -> dict[str, Any]:
    text = _text(raw)
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def _cooling(m: dict[str, Any]) -> float | None:
    return _num(m.get("c")) if m.get("c") is not None else None


def _state(m: dict[str, Any], at: float) -> IdentityState:
    """The state a meta says at ``at`` (:func:`fleet.core.identities.state_at`)."""
    return state_at(
        retired=m.get("r") == 1, cooling_until=_cooling(m), leases=int(m.get("l") or 0), now=at
    )


def decode(identity_id: str, doc: Any, meta: Any, at: float) -> Identity:
    """An identity from its stored document and meta (``lua/identities.lua``)."""
    text = _text(doc)
    try:
        base = parse_identity(json.loads(text or "{}"))
    except (ValueError, TypeError):  # a document something else wrote: shown bare
        base = Identity(id=identity_id)
    m = _meta(meta)
    cooling = _cooling(m)
    leases = int(m.get("l") or 0)
    return base.evolve(
        state=_state(m, at),
        leases=leases,
        cooling_until=cooling if cooling is not None and cooling > at else None,
        stats=IdentityStats(
            int(m.get("u") or 0),
            int(m.get("o") or 0),
            int(m.get("b") or 0),
            int(m.get("w") or 0),
            _num(m.get("t")),
            m.get("why") if isinstance(m.get("why"), str) else None,
        ),
        created_at=_num(m.get("at")),
    )


class RedisIdentities(RedisPart, Identities):
    """:class:`~fleet.core.capabilities.identities.Identities` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self._script = LuaScript("identities")

    async def _call(self, pool: str, op: str, *args: Any, at: float | None = None) -> Any:
        t = now() if at is None else at
        with self._guard():
            return await self._script(
                self._lane, self._keys.identity_keys(pool), [op, repr(t), *args]
            )

    async def put(self, pool: str, identities: Sequence[Identity]) -> int:
        if not identities:
            return 0
        flat: list[str] = []
        for ident in identities:
            flat += [ident.id, dumps(ident.doc())]
        added = int(await self._call(pool, "put", *flat))
        with self._guard():
            await self._lane.execute("SADD", self._keys.identity_pools, pool)
        return added

    async def get(self, pool: str, identity_id: str) -> Identity | None:
        at = now()
        doc, meta = await self._call(pool, "read", identity_id, at=at)
        if not meta:
            return None
        return decode(identity_id, doc, meta, at)

    async def page(self, pool: str, *, after: str | None = None, limit: int = 50) -> IdentityPage:
        at = now()
        raw = await self._call(pool, "page", after or "", limit + 1, at=at)
        n = int(raw[0])
        rows = [(_text(raw[i]) or "", raw[i + 1], raw[i + 2]) for i in range(1, 3 * n + 1, 3)]
        counts: dict[str, int] = dict.fromkeys(IDENTITY_STATES, 0)
        blocks = 0
        for text in raw[3 * n + 1 :]:
            m = _meta(text)
            blocks += int(m.get("b") or 0)
            counts[_state(m, at)] += 1
        items = tuple(decode(i, doc, meta, at) for i, doc, meta in rows[:limit] if _text(meta))
        more = len(rows) > limit and items
        return IdentityPage(items, items[-1].id if more else None, counts, blocks)

    async def pools(self) -> list[str]:
        with self._guard():
            names = await self._lane.execute("SMEMBERS", self._keys.identity_pools)
        ordered = sorted(n for n in (_text(x) for x in names) if n)
        if not ordered:
            return []
        # One HLEN of each pool's meta hash (a pipeline): a pool whose identities were all
        # deleted stays in the set, holding none.
        with self._guard():
            async with self._pipeline(transaction=False) as pipe:
                for name in ordered:
                    pipe.hlen(self._keys.identity_keys(name)[1])
                sizes = await pipe.execute()
        return [name for name, size in zip(ordered, sizes, strict=True) if int(size) > 0]

    async def lease(
        self,
        pool: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_concurrency: int = 1,
        key: str | None = None,
    ) -> IdentityLease | None:
        at = now()
        token = new_token()
        got = await self._call(
            pool, "lease", repr(float(lease_seconds)), max_concurrency, key or "", token, at=at
        )
        if not got:
            return None
        ident_id = _text(got[0]) or ""
        return IdentityLease(
            pool=pool,
            identity=decode(ident_id, got[1], got[2], at),
            token=token,
            deadline=at + lease_seconds,
            key=key,
        )

    async def renew(self, pool: str, identity_id: str, token: str, lease_seconds: float) -> bool:
        return bool(
            int(await self._call(pool, "renew", identity_id, token, repr(float(lease_seconds))))
        )

    async def release(
        self,
        pool: str,
        identity_id: str,
        token: str,
        *,
        outcome: LeaseOutcome = "none",
        reason: str | None = None,
        cookies: Sequence[dict[str, Any]] | None = None,
        account: dict[str, Any] | None = None,
        cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS,
        retire_after: int = DEFAULT_RETIRE_AFTER,
    ) -> bool:
        for _ in range(_MERGE_TRIES):
            at = now()
            before, after = "", ""
            if cookies is not None or account is not None:
                doc, meta = await self._call(pool, "read", identity_id, at=at)
                if not meta:
                    return False
                before = _text(doc) or ""
                current = decode(identity_id, doc, meta, at)
                if cookies is not None:
                    current = current.evolve(
                        cookies=tuple(merged_cookies(current.cookies, cookies, at))
                    )
                if account is not None:
                    current = current.evolve(account=dict(account))
                after = dumps(current.doc())
            answer = int(
                await self._call(
                    pool,
                    "release",
                    identity_id,
                    token,
                    outcome,
                    reason or "",
                    before,
                    after,
                    repr(float(cooldown_seconds)),
                    retire_after,
                    at=at,
                )
            )
            if answer >= 0:
                return answer == 1
        raise BackendError(
            f"identity {identity_id!r} of pool {pool!r}: its document kept changing during "
            f"{_MERGE_TRIES} releases' merges"
        )

    async def retire(self, pool: str, identity_id: str, reason: str | None = None) -> bool:
        return bool(int(await self._call(pool, "retire", identity_id, reason or "")))

    async def revive(self, pool: str, identity_id: str) -> bool:
        return bool(int(await self._call(pool, "revive", identity_id, "")))

    async def delete(self, pool: str, identity_id: str) -> bool:
        return bool(int(await self._call(pool, "delete", identity_id)))
