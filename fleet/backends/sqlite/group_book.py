"""Task groups of the SQLite backend: the rule of :mod:`fleet.core.capabilities.groups`
in tables, move for move the memory backend's ``GroupBook``.

Layout (schema version 4):

* ``tasks.grp``: a queued task with a group waits in the index ``tasks_grouped``
  ``(type, grp, tier, seq)``, so a group's next task (best tier, then FIFO) is one
  probe; tasks without a group keep ``tasks_queued`` to themselves.
* ``task_groups``: one row per group of a type: its running count, rate state
  (``tat``), throttle (``until``), own settings (JSON of :meth:`GroupSettings.stored`)
  and its place: ``R`` (ready, in the line of its best tier by ``turn``: index
  ``task_groups_ready``), ``D`` (delayed until ``due``: index ``task_groups_due``),
  ``S`` (saturated: back to ``R`` when one of its tasks ends) or ``''`` (nothing
  pending, or paused).
* ``group_turn``: per type, whether the tasks without a group or the groups go next
  in a tier where both wait (kept across reserves).

Every step is a few primary-key or index probes, O(log G) in the number of groups G:
nothing here scans the groups or a group's tasks (only listing counts a listed
group's pending tasks). Queries by place name their index (``INDEXED BY``): left to
itself the planner may walk the primary key ``(type, name)`` instead, through every
saturated or delayed group of the type. A row that holds nothing any more (nothing pending or
running, no settings, no throttle or rate state in force) is deleted when its group
empties and when listing.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings, admit
from fleet.core.records import TIERS

log = logging.getLogger("fleet.backends.sqlite")

_NO_LIMITS = GroupLimits()
_COLUMNS = "name, running, tat, until, place, key_tier, settings"
# The groups in line (R) and the held ones (D), each by its own index.
_READY = "task_groups INDEXED BY task_groups_ready WHERE type = ? AND place = 'R'"
_HELD = "task_groups INDEXED BY task_groups_due WHERE type = ? AND place = 'D'"


@dataclass(slots=True)
class Group:
    """One ``task_groups`` row, as read in the current transaction."""

    name: str
    running: int = 0
    tat: float = 0.0
    until: float = 0.0
    place: str = ""
    key_tier: int = 0
    settings: GroupSettings | None = None


@dataclass(frozen=True, slots=True)
class Picked:
    """The next task by the reserve rule, its group (None: it has none) and the
    group's rate state (``tat``) to charge if the task is delivered."""

    task_id: str
    group: Group | None
    tat: float


def _settings(raw: str | None, name: str) -> GroupSettings | None:
    if raw is None:
        return None
    try:
        return GroupSettings.from_dict(json.loads(raw))
    except (AttributeError, TypeError, ValueError) as exc:
        # A corrupt record affects only itself: the group runs on the type's values.
        log.warning("group %r has settings that cannot be read (%s): ignored", name, exc)
        return None


def _group(row: Sequence[Any]) -> Group:
    name, running, tat, until, place, key_tier, raw = row
    return Group(
        str(name),
        int(running),
        float(tat),
        float(until),
        str(place),
        int(key_tier),
        _settings(raw, str(name)),
    )


class Book:
    """The groups of one type within the caller's transaction.

    Args:
        conn: A connection inside the caller's transaction.
        automation_type: The type.
        now: The current time.

    ``wake`` counts the blocked reservers the changes made so far should wake (a
    group rejoined the rotation, or the earliest time a held group may go again
    moved earlier); the caller adds it to the type's signal before committing.
    """

    def __init__(self, conn: sqlite3.Connection, automation_type: str, now: float) -> None:
        self._conn = conn
        self._type = automation_type
        self._now = now
        self.wake = 0
        self._plain: bool | None = None  # whose turn it is (None: not read yet)
        self._saved_plain: bool | None = None

    # ------------------------------------------------------------ rows
    def find(self, name: str) -> Group | None:
        """The group's row, or None if it has none."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM task_groups WHERE type = ? AND name = ?", (self._type, name)
        ).fetchone()
        return None if row is None else _group(row)

    def get(self, name: str) -> Group:
        """The group's row, created empty if it has none."""
        group = self.find(name)
        if group is None:
            self._conn.execute(
                "INSERT INTO task_groups (type, name) VALUES (?, ?)", (self._type, name)
            )
            group = Group(name)
        return group

    def _head(self, name: str) -> tuple[str, int] | None:
        """The group's next task as ``(id, tier)`` (best tier, then FIFO)."""
        row = self._conn.execute(
            "SELECT id, tier FROM tasks WHERE type = ? AND grp = ? AND state = 'queued' "
            "ORDER BY tier, seq LIMIT 1",
            (self._type, name),
        ).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def _pending(self, name: str) -> int:
        return int(
            self._conn.execute(
                "SELECT COUNT(*) FROM tasks WHERE type = ? AND grp = ? AND state = 'queued'",
                (self._type, name),
            ).fetchone()[0]
        )

    def _save_counts(self, group: Group) -> None:
        self._conn.execute(
            "UPDATE task_groups SET running = ?, tat = ?, until = ? WHERE type = ? AND name = ?",
            (group.running, group.tat, group.until, self._type, group.name),
        )

    def _tidy(self, group: Group, empty: bool | None = None) -> bool:
        """Delete a row that holds nothing any more; True if it did."""
        if (
            group.running
            or group.settings is not None
            or group.until > self._now
            or group.tat > self._now
        ):
            return False
        if not (self._head(group.name) is None if empty is None else empty):
            return False
        self._conn.execute(
            "DELETE FROM task_groups WHERE type = ? AND name = ?", (self._type, group.name)
        )
        return True

    # ------------------------------------------------------------ places
    def _place(
        self, group: Group, place: str, key_tier: int = 0, turn: int = 0, due: float = 0.0
    ) -> None:
        self._conn.execute(
            "UPDATE task_groups SET place = ?, key_tier = ?, turn = ?, due = ? "
            "WHERE type = ? AND name = ?",
            (place, key_tier, turn, due, self._type, group.name),
        )
        group.place = place
        group.key_tier = key_tier

    def _to_ready(self, group: Group, tier: int) -> None:
        """At the back of the line of groups whose best tier is ``tier``."""
        last = self._conn.execute(
            f"SELECT MAX(turn) FROM {_READY} AND key_tier = ?",
            (self._type, tier),
        ).fetchone()[0]
        self._place(group, "R", tier, (last or 0) + 1)

    def _rejoin(self, group: Group) -> bool:
        """Into the rotation under its best tier, unchecked (reserve checks its budget
        at its turn), or nowhere if nothing of it is pending; True if it is in ``R``."""
        head = self._head(group.name)
        if head is None:
            if group.place != "":
                self._place(group, "")
            return False
        self._to_ready(group, head[1])
        return True

    def _set_aside(self, group: Group, place: str, due: float = 0.0) -> None:
        if place == "D":
            first = self._conn.execute(
                f"SELECT due FROM {_HELD} AND name != ? ORDER BY due LIMIT 1",
                (self._type, group.name),
            ).fetchone()
            if first is None or due < first[0]:
                # Blocked reservers (of every process) wait for a later time: re-plan.
                self.wake += 1
        self._place(group, place, due=due)

    def joined(self, name: str | None, tier: int) -> None:
        """A task of ``tier`` was queued in the group (None: it has none): a group out
        of the rotation joins it; one in line under a worse tier moves to this
        tier's line."""
        if name is None:
            return
        group = self.get(name)
        if group.place == "":
            self._rejoin(group)
        elif group.place == "R" and tier < group.key_tier:
            self._to_ready(group, tier)

    def ended(self, name: str | None) -> None:
        """A reservation of the group (None: it has none) ended: its running count
        falls, and a group saturated until now rejoins the rotation (and wakes a
        reserver)."""
        group = None if name is None else self.find(name)
        if group is None:
            return
        group.running = max(group.running - 1, 0)
        self._save_counts(group)
        if group.place == "S":
            self.wake += self._rejoin(group)
        elif group.place == "":
            self._tidy(group)

    def throttle(self, task_id: str, token: str, retry_after: float) -> bool:
        """End an owned reservation uncharged (see :meth:`TaskGroups.throttle`): a
        task with a group goes back to the head of its group, which is held until
        ``now + retry_after`` (a later throttle in place is kept); one without is
        scheduled then. Not counted as failed; False if the token is stale."""
        owned = self._conn.execute(
            "SELECT tier, grp FROM tasks WHERE type = ? AND id = ? AND state = 'processing' "
            "AND token = ?",
            (self._type, task_id, token),
        ).fetchone()
        if owned is None:
            return False
        tier, name = int(owned[0]), owned[1]
        refund = "attempt = MAX(attempt - 1, 0), token = NULL, deadline = NULL"
        until = self._now + retry_after
        if name is None:
            self._conn.execute(
                f"UPDATE tasks SET state = 'scheduled', ready_at = ?, {refund} "
                "WHERE type = ? AND id = ?",
                (until, self._type, task_id),
            )
            self.wake += 1  # blocked reservers re-plan around its due time
            return True
        first = self._conn.execute(
            "SELECT MIN(seq) FROM tasks WHERE type = ? AND state = 'queued' AND grp = ? "
            "AND tier = ?",
            (self._type, name, tier),
        ).fetchone()[0]
        self._conn.execute(
            f"UPDATE tasks SET state = 'queued', seq = ?, {refund} WHERE type = ? AND id = ?",
            ((first or 0) - 1, self._type, task_id),
        )
        group = self.get(str(name))
        group.running = max(group.running - 1, 0)
        group.until = max(group.until, until)
        self._save_counts(group)
        self._set_aside(group, "D", group.until)
        return True

    def start(self) -> bool:
        """Before a reserve: promote the groups that came due; True if some group is
        in the rotation. One statement when none came due (the ungrouped hot path)."""
        ready, due = self._conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM {_READY}), EXISTS (SELECT 1 FROM {_HELD} AND due <= ?)",
            (self._type, self._type, self._now),
        ).fetchone()
        if not due:
            return bool(ready)
        self.promote_due()
        return self.rotating()

    def promote_due(self) -> None:
        """Groups whose rate or throttle let them go again rejoin the rotation."""
        due = self._conn.execute(
            f"SELECT {_COLUMNS} FROM {_HELD} AND due <= ? ORDER BY due",
            (self._type, self._now),
        ).fetchall()
        for row in due:
            group = _group(row)
            if not self._rejoin(group):
                self._tidy(group, empty=True)

    def next_due(self) -> float | None:
        """The earliest time a held group may go again (None if none is held)."""
        row = self._conn.execute(
            f"SELECT MIN(due) FROM {_HELD}",
            (self._type,),
        ).fetchone()
        return None if row[0] is None else float(row[0])

    def rotating(self) -> bool:
        """True if some group is in the rotation (else reserve serves plain tasks only)."""
        return (
            self._conn.execute(
                f"SELECT 1 FROM {_READY} LIMIT 1",
                (self._type,),
            ).fetchone()
            is not None
        )

    # ------------------------------------------------------------ reserve
    def _verdict(self, group: Group, limits: GroupLimits) -> tuple[str, float]:
        return admit(
            group.settings,
            limits,
            running=group.running,
            tat=group.tat,
            throttled_until=group.until,
            now=self._now,
        )

    def _refuse(self, group: Group, verdict: str, until: float) -> None:
        if verdict == "delayed":
            self._set_aside(group, "D", until)
        else:
            self._set_aside(group, "S" if verdict == "saturated" else "")

    def _ready_head(self, tier: int) -> Group | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM {_READY} AND key_tier = ? ORDER BY turn LIMIT 1",
            (self._type, tier),
        ).fetchone()
        return None if row is None else _group(row)

    def pick(self, limits: GroupLimits) -> Picked | None:
        """The next task by the reserve rule: tier by tier, tasks without a group and
        groups with budget taking turns; a group without budget is set aside on the
        way. None if nothing can be served now."""
        for tier in range(len(TIERS)):
            while True:
                plain = self._conn.execute(
                    "SELECT id FROM tasks WHERE type = ? AND state = 'queued' AND grp IS NULL "
                    "AND tier = ? ORDER BY seq LIMIT 1",
                    (self._type, tier),
                ).fetchone()
                group = self._ready_head(tier)
                head = None if group is None else self._head(group.name)
                if group is not None and (head is None or head[1] != tier):
                    # Its better tasks left: back in line under its best tier (or out).
                    if not self._rejoin(group):
                        self._tidy(group, empty=True)
                    continue
                if group is None or head is None or (plain is not None and self._plain_turn()):
                    if plain is None:
                        break
                    if group is not None:
                        self._plain = False
                    return Picked(str(plain[0]), None, 0.0)
                verdict, value = self._verdict(group, limits)
                if verdict != "serve":
                    self._refuse(group, verdict, value)
                    continue
                if plain is not None:
                    self._plain = True
                return Picked(head[0], group, value)
        return None

    def served(self, group: Group, delivered: bool, tat: float, limits: GroupLimits) -> None:
        """After a group's turn: charge it if its task was delivered (not dropped at
        the pop), then to the back of its line if it can go again, else aside."""
        if delivered:
            group.running += 1
            group.tat = tat
            self._save_counts(group)
        head = self._head(group.name)
        if head is None:
            self._place(group, "")
            self._tidy(group, empty=True)
            return
        verdict, until = self._verdict(group, limits)
        if verdict == "serve":
            self._to_ready(group, head[1])
        else:
            self._refuse(group, verdict, until)

    def _plain_turn(self) -> bool:
        if self._plain is None:
            row = self._conn.execute(
                "SELECT plain FROM group_turn WHERE type = ?", (self._type,)
            ).fetchone()
            self._plain = self._saved_plain = row is None or bool(row[0])
        return self._plain

    def save_turn(self) -> None:
        """Store whose turn it is, if a reserve changed it."""
        if self._plain is not None and self._plain != self._saved_plain:
            self._conn.execute(
                "INSERT INTO group_turn (type, plain) VALUES (?, ?) "
                "ON CONFLICT (type) DO UPDATE SET plain = excluded.plain",
                (self._type, int(self._plain)),
            )
            self._saved_plain = self._plain

    # ------------------------------------------------------------ admin
    def _info(self, group: Group, pending: int) -> GroupInfo:
        held = max(group.until, group.tat if group.place == "D" else 0.0)
        return GroupInfo(
            name=group.name,
            pending=pending,
            running=group.running,
            settings=group.settings,
            throttled_until=held if held > self._now else None,
        )

    def info(self, name: str) -> GroupInfo:
        """One group's counts, settings and throttle (zeros for a group never seen)."""
        group = self.find(name)
        if group is None:
            return GroupInfo(name, 0, 0, None, None)
        return self._info(group, self._pending(name))

    def page(self, after: str | None, limit: int) -> GroupPage:
        """Up to ``limit`` groups by name after ``after``, deleting on the way the rows
        that hold nothing; ``next`` is set only if another group follows."""
        limit = max(limit, 1)
        out: list[GroupInfo] = []
        cursor = "" if after is None else after  # every name is longer than ""
        while True:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM task_groups WHERE type = ? AND name > ? "
                "ORDER BY name LIMIT ?",
                (self._type, cursor, limit + 1),
            ).fetchall()
            for row in rows:
                group = _group(row)
                pending = self._pending(group.name)
                if self._tidy(group, empty=pending == 0):
                    continue
                if len(out) == limit:
                    return GroupPage(out, out[-1].name)
                out.append(self._info(group, pending))
            if len(rows) <= limit:
                return GroupPage(out, None)
            cursor = str(rows[-1][0])

    def defaults(self) -> tuple[GroupLimits, int]:
        """The type's stored limits for groups without settings, and their config
        generation (``(GroupLimits(), -1)``: none stored)."""
        row = self._conn.execute(
            "SELECT concurrency, interval, rate, gen FROM group_defaults WHERE type = ?",
            (self._type,),
        ).fetchone()
        if row is None:
            return _NO_LIMITS, -1
        concurrency, interval, rate, gen = row
        return GroupLimits(
            None if concurrency is None else int(concurrency),
            None if interval is None else float(interval),
            None if rate is None else str(rate),
        ), int(gen)

    def set_defaults(self, limits: GroupLimits, gen: int, proxy: ProxyPolicy | None = None) -> bool:
        """Store the type's limits (and proxy policy, which ``proxies.py`` reads) as
        of config generation ``gen`` unless a newer generation is stored; a change of
        the group limits puts the groups the old limits held back in the rotation
        (checked at their turn). True if stored."""
        current, stored_gen = self.defaults()
        if gen < stored_gen:
            return False
        policy = (
            (None, None, None)
            if proxy is None
            else (proxy.bad_threshold, proxy.cooldown_seconds, proxy.max_concurrency)
        )
        self._conn.execute(
            "INSERT INTO group_defaults (type, concurrency, interval, rate, gen, "
            "proxy_threshold, proxy_cooldown, proxy_cap) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (type) DO UPDATE SET "
            "concurrency = excluded.concurrency, interval = excluded.interval, "
            "rate = excluded.rate, gen = excluded.gen, "
            "proxy_threshold = excluded.proxy_threshold, "
            "proxy_cooldown = excluded.proxy_cooldown, proxy_cap = excluded.proxy_cap",
            (
                self._type,
                limits.concurrency,
                limits.interval,
                limits.rate,
                gen,
                *policy,
            ),
        )
        if limits != current:
            # O(held groups), once per config change; reserve stays O(log G).
            held = self._conn.execute(
                f"SELECT {_COLUMNS} FROM task_groups WHERE type = ? AND place IN ('S', 'D')",
                (self._type,),
            ).fetchall()
            for row in held:
                self.wake += self._rejoin(_group(row))
        return True

    def configure(self, name: str, settings: GroupSettings | None) -> None:
        """New own settings (None: back to the type's values, throttle dropped).
        Whatever held the group may hold it no more: back in the rotation, checked
        at its turn."""
        group = self.get(name)
        group.settings = None if settings is None or settings.empty else settings
        if settings is None:
            group.until = 0.0
        stored = None if group.settings is None else json.dumps(group.settings.stored())
        self._conn.execute(
            "UPDATE task_groups SET settings = ?, until = ? WHERE type = ? AND name = ?",
            (stored, group.until, self._type, group.name),
        )
        if group.place != "R":
            self.wake += self._rejoin(group)
        self._tidy(group)
