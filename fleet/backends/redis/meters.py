"""Meters on Redis: one hash per scope ``fleet:meters:<scope>`` (meter -> sum), the
zset ``fleet:meter-scopes`` (scope -> 0: every scope but the hour scopes, pages by
``ZRANGE BYLEX``) and the zset ``fleet:meter-hours`` (hour scope -> when it is gone);
an hour scope's hash also expires then (``EXPIREAT``), the prune of each add deletes it
at the backend's now, and reads leave it out from then on.

An add is one call of ``lua/meters.lua`` over every key of the batch: the whole batch
lands or none of it, as on SQLite. The script adds in doubles and stores ``"%.17g"``
text (read back exactly), not ``HINCRBYFLOAT``: that one adds in long doubles and
formats the sum again, so its sums drift from SQLite's in the last bits.

On Redis Cluster every meters key carries the hash tag ``{meters}``: all of them live
in one slot, so a batch over many scopes is still one atomic script (at the cost of
one node holding every sum). A get is one call of the script (its sums checked, as
the add reads them); a page is one ``ZRANGE BYLEX``; ``forget`` walks the index by
name and the hour zset with ``ZSCAN MATCH``, deleting in pieces of
:data:`FORGET_CHUNK` (not one atomic step: an add meanwhile may keep a scope).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.keys import _glob_escape
from fleet.backends.redis.scripts import LuaScript
from fleet.core.budgets import day_scopes, next_day
from fleet.core.capabilities.meters import Meters
from fleet.core.meter_store import (
    PRUNE_PER_ADD,
    check_batch,
    check_page,
    check_prefix,
    check_scopes,
    expires,
    gone,
    prefix_end,
)
from fleet.core.meters import (
    MAX_METERS_PER_SCOPE,
    DayHold,
    MeterBatch,
    hour_start,
    type_scope,
)
from fleet.core.records import now

#: Scopes deleted per script call by ``forget``.
FORGET_CHUNK = 500


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _members(flat: Any) -> list[str]:
    """The members of a ``ZSCAN`` page: flat ``member, score, ...`` from the script lane,
    ``(member, score)`` pairs from redis-py's cluster client (which parses the reply)."""
    if flat and isinstance(flat[0], list | tuple):
        return [_text(pair[0]) for pair in flat]
    return [_text(flat[i]) for i in range(0, len(flat), 2)]


def add_argv(
    rows: dict[str, list[tuple[str, float]]],
    at: float,
    run_prefix: str = "",
    days: Sequence[list[str]] = (),
    events: str = "",
) -> list[str]:
    """The ``ARGV`` tail of the script's ``add`` after the prefix and now: the cap, the
    prune's bound, the prefix of the run hashes ('' checks no budget), the event channel
    prefix a pause is published under ('' none), the day checks
    (:meth:`RedisMeters._days`), then each scope's name, end ('' never), count, meters
    and amounts (``repr``, which Lua's ``tonumber`` reads back exactly)."""
    argv = [str(MAX_METERS_PER_SCOPE), str(PRUNE_PER_ADD), run_prefix, events, str(len(days))]
    for check in days:
        argv += check
    for scope, row in rows.items():
        end = expires(scope)
        argv += [scope, "" if end is None else str(int(end)), str(len(row))]
        for meter, amount in row:
            argv += [meter, repr(amount)]
    return argv


class RedisMeters(RedisPart, Meters):
    """:class:`~fleet.core.capabilities.meters.Meters` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self.script = LuaScript("meters")

    async def _call(self, op: str, scopes: Sequence[str], argv: Sequence[str], at: float) -> Any:
        k = self._keys
        with self._guard():
            return await self.script(
                self._lane, k.meter_keys(list(scopes)), [op, k.METER_PREFIX, repr(at), *argv]
            )

    async def add(self, batch: MeterBatch) -> None:
        rows = check_batch(batch)
        if not rows:
            return
        at = now()
        rows = {scope: row for scope, row in rows.items() if not gone(scope, at)}
        # Runs, configs and queues live outside the meters' slot: no budgets on Cluster.
        if self._core._cluster is not None:
            await self._call("add", list(rows), add_argv(rows, at), at)
            return
        days = self._days(rows, at)
        events = self._keys.event_prefix(self._core._endpoint.db)
        argv = add_argv(rows, at, self._keys.RUN_PREFIX, days, events)
        await self._call("add", list(rows), argv, at)

    def _days(self, rows: dict[str, list[tuple[str, float]]], at: float) -> list[list[str]]:
        """A day check per type whose current hour the batch adds to: its config key,
        its hold key, the next day's start, the type, and its day's hour keys."""
        out: list[list[str]] = []
        for scope in rows:
            if not scope.startswith("hour:"):
                continue
            automation_type, _, start = scope[5:].rpartition(":")
            if not start.isdigit() or int(start) != hour_start(at):
                continue
            hours = [self._keys.METER_PREFIX + s for s in day_scopes(automation_type, at)]
            out.append(
                [self._keys.config(automation_type), self._hold_key(automation_type),
                 repr(next_day(at)), automation_type, str(len(hours)), *hours]
            )  # fmt: skip
        return out

    def _hold_key(self, automation_type: str) -> str:
        """``fleet:queue:<type>:budget``: the type's daily-budget hold (reserve.lua)."""
        return self._keys.queue_keys(automation_type, 0.0)[0] + ":budget"

    async def held(self, automation_type: str) -> DayHold | None:
        with self._guard():
            found = await self._lane.execute(
                "HMGET", self._hold_key(automation_type), "until", "reason"
            )
        if not found or found[0] is None:
            return None
        until = float(_text(found[0]))
        if until <= now():
            return None
        return DayHold(until, _text(found[1]))

    async def unhold(self, automation_type: str) -> bool:
        with self._guard():
            gone = await self._lane.execute("DEL", self._hold_key(automation_type))
            if gone:  # a reserver blocked on the type looks again
                wake = self._keys.queue_keys(automation_type, now())[10]
                await self._lane.execute("LPUSH", wake, "1")
        return bool(gone)

    async def get(self, scopes: Sequence[str]) -> dict[str, dict[str, float]]:
        at = now()
        names = [s for s in check_scopes(scopes) if not gone(s, at)]
        if not names:
            return {}
        raw = await self._call("get", names, [], at)
        out: dict[str, dict[str, float]] = {}
        for scope, flat in zip(names, raw, strict=True):
            if flat:
                out[scope] = {
                    _text(flat[i]): float(_text(flat[i + 1])) for i in range(0, len(flat), 2)
                }
        return out

    async def scopes(self, prefix: str, *, after: str | None = None, limit: int = 50) -> list[str]:
        p, a, n = check_page(prefix, after, limit)
        return await self._page(p, a, n)

    async def _page(self, prefix: str, after: str, limit: int) -> list[str]:
        # names past ``after`` and from ``prefix`` on: whichever starts later
        low = "(" + after if after and after >= prefix else "[" + prefix if prefix else "-"
        end = prefix_end(prefix)
        high = "+" if end is None else "(" + end
        with self._guard():
            raw = await self._lane.execute(
                "ZRANGE", self._keys.METER_SCOPES, low, high, "BYLEX", "LIMIT", 0, limit
            )
        return [_text(s) for s in raw]

    async def _drop(self, scopes: Sequence[str]) -> int:
        if not scopes:
            return 0
        return int(await self._call("drop", scopes, list(scopes), now()))

    async def forget(self, prefix: str) -> int:
        p = check_prefix(prefix)
        dropped = 0
        while True:
            # from the first name each time: the last call deleted the ones before
            names = await self._page(p, "", FORGET_CHUNK)
            dropped += await self._drop(names)
            if len(names) < FORGET_CHUNK:
                break
        if not ("hour:".startswith(p) or p.startswith("hour:")):
            return dropped  # no hour scope starts with it
        match = _glob_escape(p) + "*"
        cursor: Any = 0
        while True:
            with self._guard():
                cursor, flat = await self._lane.execute(
                    "ZSCAN", self._keys.METER_HOURS, cursor, "MATCH", match, "COUNT", FORGET_CHUNK
                )
            names = list(dict.fromkeys(_members(flat)))
            dropped += await self._drop(names)
            if int(cursor) == 0:
                return dropped

    async def purge_type(self, automation_type: str) -> None:
        """A purged type's meters: ``type:<type>`` by its exact name, its
        ``domain:<type>:`` and ``hour:<type>:`` scopes (type names hold no ``:``)."""
        await self._drop([type_scope(automation_type)])
        await self.forget(f"domain:{automation_type}:")
        await self.forget(f"hour:{automation_type}:")
