"""Proxy health on Redis (``ctx.proxy``): one ``lua/proxies.lua`` call per operation,
over the script lane. Keys: ``ks.proxy_keys`` per proxy, ``ks.PROXIES`` (the index),
``ks.proxy_sticky`` and, for a take or report naming its type, ``ks.groups_meta``
(where the type's proxy policy is stored; see docs/redis-schema.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.backends.redis import keys
from fleet.backends.redis.core import RedisPart
from fleet.backends.redis.keys import KeySpace
from fleet.core.capabilities.proxies import (
    FORGET_SECONDS,
    MAX_REASON_LEN,
    PLACE_RETRY_SECONDS,
    ProxyHealth,
    ProxyInfo,
    ProxyPolicy,
    ProxyTake,
)
from fleet.core.records import now


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _meta(ks: KeySpace, automation_type: str | None) -> str:
    # The key holding the type's stored policy ('' for a caller naming no type).
    return "" if automation_type is None else ks.groups_meta(automation_type)


def _float(value: Any) -> float | None:
    text = _text(value) if value is not None else ""
    return float(text) if text else None


#: One script call: its keys and its arguments.
Call = tuple[list[str], list[Any]]


def take_call(
    ks: KeySpace,
    candidates: Sequence[str],
    token: str,
    *,
    held: str | None,
    cap: int | None,
    hold: float,
    sticky: str | None,
    sticky_seconds: float,
    spread: bool,
    automation_type: str | None,
    t: float,
) -> Call:
    """The ``take`` call of ``lua/proxies.lua`` at time ``t``."""
    names = list(candidates)
    k = [
        ks.PROXIES,
        "" if sticky is None else ks.proxy_sticky(sticky),
        "" if held is None else ks.proxy_keys(held)[1],
        _meta(ks, automation_type),
    ]
    for name in names:
        k += ks.proxy_keys(name)
    argv: list[Any] = [
        "take",
        repr(t),
        token,
        repr(float(hold)),
        "" if cap is None else str(int(cap)),
        "" if sticky is None else "1",
        repr(float(sticky_seconds)),
        repr(PLACE_RETRY_SECONDS),
        repr(FORGET_SECONDS),
        "1" if spread else "0",
        *names,
    ]
    return k, argv


def take_answer(raw: Any) -> ProxyTake:
    """What a ``take`` call answered."""
    picked, cooling, wait = raw
    name = _text(picked)
    if not name:
        return ProxyTake(None, wait=float(_text(wait)))
    return ProxyTake(name, cooling=bool(int(cooling)))


def renew_call(ks: KeySpace, key: str, token: str, hold: float, t: float) -> Call:
    """The ``renew`` call at time ``t`` (answers 1|0)."""
    argv = ["renew", repr(t), token, repr(float(hold)), repr(FORGET_SECONDS), key]
    return [ks.PROXIES, *ks.proxy_keys(key)], argv


def release_call(ks: KeySpace, key: str, token: str, t: float) -> Call:
    """The ``release`` call at time ``t`` (answers 1|0)."""
    return [ks.proxy_keys(key)[1]], ["release", repr(t), token]


def report_call(
    ks: KeySpace,
    key: str,
    *,
    ok: bool,
    threshold: int,
    cooldown: float,
    reason: str,
    automation_type: str | None,
    t: float,
) -> Call:
    """The ``report`` call at time ``t`` (answers the cool-down end or nil)."""
    argv = [
        "report",
        repr(t),
        "1" if ok else "0",
        str(int(threshold)),
        repr(float(cooldown)),
        reason[:MAX_REASON_LEN],
        repr(FORGET_SECONDS),
        key,
    ]
    return [ks.PROXIES, *ks.proxy_keys(key), _meta(ks, automation_type)], argv


class RedisProxies(RedisPart, ProxyHealth):
    """Proxy health: one ``lua/proxies.lua`` call each."""

    async def _proxies(self, k: list[str], argv: list[Any]) -> Any:
        with self._guard():
            return await self._scripts.proxies(self._lane, k, argv)

    async def take(
        self,
        candidates: Sequence[str],
        token: str,
        *,
        held: str | None = None,
        max_concurrency: int | None = None,
        hold_seconds: float = 30.0,
        sticky: str | None = None,
        sticky_seconds: float = 3600.0,
        spread: bool = False,
        automation_type: str | None = None,
    ) -> ProxyTake:
        self._not_on_cluster("proxy health (ctx.proxy)")
        k, argv = take_call(
            self._keys,
            candidates,
            token,
            held=held,
            cap=max_concurrency,
            hold=hold_seconds,
            sticky=sticky,
            sticky_seconds=sticky_seconds,
            spread=spread,
            automation_type=automation_type,
            t=now(),
        )
        return take_answer(await self._proxies(k, argv))

    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        return bool(
            int(await self._proxies(*renew_call(self._keys, key, token, hold_seconds, now())))
        )

    async def release(self, key: str, token: str) -> bool:
        return bool(int(await self._proxies(*release_call(self._keys, key, token, now()))))

    async def report(
        self,
        key: str,
        *,
        ok: bool,
        threshold: int = 1,
        cooldown_seconds: float = 300.0,
        reason: str = "",
        automation_type: str | None = None,
    ) -> float | None:
        self._not_on_cluster("proxy health (ctx.proxy)")
        k, argv = report_call(
            self._keys,
            key,
            ok=ok,
            threshold=threshold,
            cooldown=cooldown_seconds,
            reason=reason,
            automation_type=automation_type,
            t=now(),
        )
        return _float(await self._proxies(k, argv))

    async def policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        with self._guard():
            gen, threshold, cooldown, cap = await self._r.hmget(
                self._keys.groups_meta(automation_type), ["dg", "pb", "pc", "pm"]
            )
        if not gen:
            return None, -1
        try:
            if not threshold:
                return None, int(gen)
            stored = ProxyPolicy(int(threshold), float(cooldown), int(cap) if cap else None)
        except (TypeError, ValueError):  # not written by this Fleet: none stored
            return None, -1
        return stored, int(gen)

    async def listing(self, *, limit: int = 1000) -> list[ProxyInfo]:
        if self._core._cluster is not None:
            return []  # none can be taken there (take refuses)
        argv = [
            "list",
            repr(now()),
            str(max(0, int(limit))),
            self._keys.PROXY_PREFIX,
            keys.PROXY_STATS,
            keys.PROXY_PLACES,
        ]
        flat = await self._proxies([self._keys.PROXIES], argv)
        t = now()
        out = []
        for i in range(0, len(flat) - 8, 9):
            name, uses, oks, failures, score, until, reason, bad_at, in_use = flat[i : i + 9]
            cooling = _float(until)
            out.append(
                ProxyInfo(
                    key=_text(name),
                    uses=int(_float(uses) or 0),
                    oks=int(_float(oks) or 0),
                    failures=int(_float(failures) or 0),
                    score=int(_float(score) or 0),
                    cooling_until=cooling if cooling is not None and cooling > t else None,
                    in_use=int(in_use),
                    last_reason=_text(reason) if _text(reason) else None,
                    last_bad_at=_float(bad_at),
                )
            )
        return out

    async def sticky(self, name: str) -> str | None:
        with self._guard():
            raw = await self._r.get(self._keys.proxy_sticky(name))
        return None if raw is None else _text(raw)
