"""Error groups on Redis: five keys per type (``KeySpace.error_keys``, one hash tag per
type on Cluster): the zset ``fleet:errors:<type>`` (group -> last seen: pages and
expiry), the hash ``:g`` (group -> JSON), the zset ``:s`` (``<group>/<id>`` -> taken at:
the budget's order and expiry), the hash ``:m`` (descriptions) and the hash ``:b`` (the
HTML and PNG bodies). Every operation is one call of ``lua/errors.lua``, which runs
:func:`fleet.core.error_groups.merged` and :func:`~fleet.core.error_groups.evicted`
again; each write prunes expired entries and gives the five keys a TTL past it, so a
type nobody fails any more leaves nothing behind.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fleet.backends.redis.core import RedisCore, RedisPart
from fleet.backends.redis.scripts import LuaScript
from fleet.core.capabilities.errors import ErrorGroups
from fleet.core.error_docs import domains_of, meta_of, sample_doc, sample_of
from fleet.core.error_groups import (
    MAX_DOMAINS,
    PRUNE_PER_WRITE,
    SNAPSHOT_BUDGET,
    SNAPSHOTS_PER_GROUP,
    TTL_SECONDS,
    ErrorGroup,
    GroupDelta,
    GroupPage,
    Snapshot,
    check_group,
    check_limit,
    check_snapshot_id,
    cursor_of,
    parse_cursor,
)
from fleet.core.records import now


def _text(raw: Any) -> str:
    if raw is None or raw is False:
        return ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _num(raw: Any) -> float:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return 0.0


def group_of(group: str, raw: Any) -> ErrorGroup:
    """A group from its stored JSON (what cannot be read: defaults)."""
    try:
        doc = json.loads(_text(raw))
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    count = doc.get("count", 0)
    return ErrorGroup(
        group,
        str(doc.get("exc", "")),
        str(doc.get("message", "")),
        str(doc.get("location", "")),
        int(count) if isinstance(count, int | float) and not isinstance(count, bool) else 0,
        _num(doc.get("first")),
        _num(doc.get("last")),
        domains_of(json.dumps(doc.get("domains", []))),
        sample_of(doc.get("sample")),
    )


def record_argv(deltas: Sequence[GroupDelta], at: float) -> list[str]:
    """The ``ARGV`` of the script's ``record`` (times as ``repr``, read back exactly)."""
    argv = ["record", repr(at), repr(TTL_SECONDS), str(PRUNE_PER_WRITE), str(MAX_DOMAINS)]
    for d in deltas:
        argv += [
            d.group,
            d.exc,
            d.message,
            d.location,
            str(int(d.count)),
            repr(float(d.first_seen)),
            repr(float(d.last_seen)),
            sample_doc(d.sample),
            str(len(d.domains)),
            *d.domains,
        ]
    return argv


def meta_json(snapshot: Snapshot) -> str:
    """A snapshot's description as stored (its weight included: the budget reads it)."""
    m = snapshot.meta
    return json.dumps(
        {
            "label": m.label,
            "task_id": m.task_id,
            "url": m.url,
            "html_bytes": m.html_bytes,
            "truncated": m.truncated,
            "png_bytes": m.png_bytes,
            "bytes": m.bytes,
        }
    )


def put_argv(
    group: str,
    snapshot: Snapshot,
    at: float,
    per_group: int = SNAPSHOTS_PER_GROUP,
    budget: int = SNAPSHOT_BUDGET,
) -> list[Any]:
    """The ``ARGV`` of the script's ``put``."""
    m = snapshot.meta
    return [
        "put",
        repr(at),
        repr(TTL_SECONDS),
        str(PRUNE_PER_WRITE),
        str(per_group),
        str(budget),
        group,
        m.id,
        repr(float(m.taken_at)),
        str(m.bytes),
        meta_json(snapshot),
        _body(snapshot.html),
        _body(snapshot.png),
    ]


def _body(raw: bytes | None) -> str:
    # The lane decodes every reply as UTF-8: bodies are kept in base64 (a third more
    # memory than the bytes the budget counts).
    return "0" if raw is None else "1" + base64.b64encode(raw).decode("ascii")


def _unbody(raw: Any) -> bytes | None:
    if raw is None or raw is False:
        return None
    try:
        return base64.b64decode(_text(raw), validate=True)
    except ValueError:
        return None


class RedisErrors(RedisPart, ErrorGroups):
    """:class:`~fleet.core.capabilities.errors.ErrorGroups` on Redis."""

    def __init__(self, core: RedisCore) -> None:
        super().__init__(core)
        # Not in the set loaded at connect: its first call per server loads it.
        self.script = LuaScript("errors")

    async def _call(self, automation_type: str, argv: Sequence[Any]) -> Any:
        with self._guard():
            return await self.script(self._lane, self._keys.error_keys(automation_type), argv)

    async def record(self, automation_type: str, deltas: Sequence[GroupDelta]) -> None:
        for d in deltas:
            check_group(d.group)
        if deltas:
            await self._call(automation_type, record_argv(deltas, now()))

    async def put(self, automation_type: str, group: str, snapshot: Snapshot) -> bool:
        check_group(group)
        check_snapshot_id(snapshot.meta.id)
        return bool(await self._call(automation_type, put_argv(group, snapshot, now())))

    async def page(
        self, automation_type: str, *, cursor: str | None = None, limit: int = 50
    ) -> GroupPage:
        after, n = parse_cursor(cursor), check_limit(limit)
        at = now()
        argv = ["page", repr(at), repr(TTL_SECONDS)]
        argv += ["", ""] if after is None else [repr(after[0]), after[1]]
        raw = await self._call(automation_type, [*argv, str(n + 1)])
        rows = [group_of(_text(raw[i]), raw[i + 1]) for i in range(0, len(raw), 2)]
        items = tuple(rows[:n])
        return GroupPage(items, cursor_of(items[-1]) if len(rows) > n else None)

    async def get(self, automation_type: str, group: str) -> ErrorGroup | None:
        g = check_group(group)
        raw = await self._call(automation_type, ["get", repr(now()), repr(TTL_SECONDS), g])
        if not raw:
            return None
        found = group_of(g, raw[0])
        snaps = tuple(
            meta_of(_text(raw[i]), _num(_text(raw[i + 1])), _text(raw[i + 2]))
            for i in range(1, len(raw), 3)
        )
        return replace(found, snapshots=snaps)

    async def snapshot(self, automation_type: str, group: str, snapshot_id: str) -> Snapshot | None:
        g, s = check_group(group), check_snapshot_id(snapshot_id)
        raw = await self._call(
            automation_type, ["snap", repr(now()), repr(TTL_SECONDS), f"{g}/{s}"]
        )
        if not raw:
            return None
        html, png = _unbody(raw[2]), _unbody(raw[3])
        return Snapshot(meta_of(s, _num(_text(raw[0])), _text(raw[1])), html, png)

    async def forget(self, automation_type: str) -> None:
        await self._call(automation_type, ["forget", repr(now()), repr(TTL_SECONDS)])
