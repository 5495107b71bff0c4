"""The task groups of one type in the memory backend (see TaskGroups for the rule).

Each group keeps its pending tasks in one deque per tier (entries checked lazily
against the queue's tasks, like the queue's own tiers) and sits in at most one
place: ``R`` (in the ready heap, keyed by its best tier and its turn), ``D`` (in the
delayed heap until its rate or throttle lets it go), ``S`` (saturated: back to
``R`` when one of its tasks ends) or nowhere (``""``: empty, or paused). Heap
entries carry the group's ``mark`` at the time they were pushed; one whose mark is
old is skipped, so moving a group never searches a heap.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from fleet.core.capabilities.proxies import ProxyPolicy
from fleet.core.flow import GroupInfo, GroupLimits, GroupPage, GroupSettings, admit
from fleet.core.records import TIERS, Tier

Place = Literal["", "R", "D", "S"]
_TIER_INDEX = {t: i for i, t in enumerate(TIERS)}


@dataclass(slots=True)
class Group:
    name: str
    tiers: dict[Tier, deque[tuple[str, int]]] = field(
        default_factory=lambda: {t: deque() for t in TIERS}
    )
    tier_len: dict[Tier, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    running: int = 0
    tat: float = 0.0
    until: float = 0.0
    settings: GroupSettings | None = None
    place: Place = ""
    mark: int = 0
    key_tier: int = 0  #: the tier index it is queued under while in ``R``

    @property
    def pending(self) -> int:
        return sum(self.tier_len.values())

    def best_tier(self) -> Tier | None:
        for tier in TIERS:
            if self.tier_len[tier]:
                return tier
        return None


class GroupBook:
    """Every group of one type: where each one is, and the two heaps."""

    def __init__(self, on_earlier: Callable[[], None] = lambda: None) -> None:
        #: Called when the earliest time a held group may go again moved earlier
        #: (blocked reservers recompute how long to wait).
        self.on_earlier = on_earlier
        self.groups: dict[str, Group] = {}
        self._ready: list[tuple[int, int, str]] = []  # (tier index, mark, name)
        self._delayed: list[tuple[float, int, str]] = []  # (until, mark, name)
        self._marks = itertools.count(1)
        #: Whose turn it is when both kinds are pending in a tier: tasks without a
        #: group ("plain") or the groups. Kept across reserves, so single-task
        #: reserves alternate too.
        self.turn: Literal["plain", "group"] = "plain"
        #: The type's limits for groups without settings and for its proxies (one
        #: value for the fleet; the proxy operations read ``proxy``) and the config
        #: generation they came with.
        self.defaults = GroupLimits()
        self.proxy: ProxyPolicy | None = None
        self.defaults_gen = -1

    def get(self, name: str) -> Group:
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = Group(name)
        return group

    # ------------------------------------------------------------ places
    def activate(self, group: Group) -> bool:
        """Put a group with pending tasks in the rotation, unchecked (reserve checks
        its budget when its turn comes); True if it was not there."""
        tier = group.best_tier()
        if tier is None or group.place == "R":
            return False
        self._to_ready(group, tier)
        return True

    def _to_ready(self, group: Group, tier: Tier) -> None:
        group.place = "R"
        group.mark = next(self._marks)
        group.key_tier = _TIER_INDEX[tier]
        heapq.heappush(self._ready, (group.key_tier, group.mark, group.name))

    def joined(self, group: Group, tier: Tier) -> bool:
        """A task of ``tier`` joined the group: a group out of the rotation joins
        it (True: a reserver should wake); one queued under a worse tier moves to
        this one, at the back of its line."""
        if group.place == "":
            return self.activate(group)
        if group.place == "R" and _TIER_INDEX[tier] < group.key_tier:
            self._to_ready(group, tier)
        return False

    def set_aside(self, group: Group, place: Place, until: float = 0.0) -> None:
        group.place = place
        group.mark = next(self._marks)
        if place == "D":
            first = self.next_due()
            heapq.heappush(self._delayed, (until, group.mark, group.name))
            if first is None or until < first:
                self.on_earlier()

    def peek(self, tier: Tier) -> Group | None:
        """The group whose turn it is among those whose best tier is ``tier``."""
        want = _TIER_INDEX[tier]
        while self._ready:
            idx, mark, name = self._ready[0]
            group = self.groups.get(name)
            if group is None or group.place != "R" or group.mark != mark:
                heapq.heappop(self._ready)
                continue
            return group if idx == want else None
        return None

    def promote_due(self, now: float) -> int:
        """Groups whose rate or throttle let them go again rejoin the rotation."""
        moved = 0
        while self._delayed and self._delayed[0][0] <= now:
            _, mark, name = heapq.heappop(self._delayed)
            group = self.groups.get(name)
            if group is not None and group.place == "D" and group.mark == mark:
                group.place = ""
                moved += self.activate(group)
        return moved

    def next_due(self) -> float | None:
        while self._delayed:
            until, mark, name = self._delayed[0]
            group = self.groups.get(name)
            if group is not None and group.place == "D" and group.mark == mark:
                return until
            heapq.heappop(self._delayed)
        return None

    # ------------------------------------------------------------ budget
    def verdict(self, group: Group, limits: GroupLimits, now: float) -> tuple[str, float]:
        return admit(
            group.settings,
            limits,
            running=group.running,
            tat=group.tat,
            throttled_until=group.until,
            now=now,
        )

    def refuse(self, group: Group, verdict: str, until: float) -> None:
        """Set aside a group the verdict did not serve."""
        if verdict == "delayed":
            self.set_aside(group, "D", until)
        elif verdict == "saturated":
            self.set_aside(group, "S")
        else:
            self.set_aside(group, "")

    def settle(self, group: Group, limits: GroupLimits, now: float) -> None:
        """After a turn: back of the line if it can go again, else set aside."""
        tier = group.best_tier()
        if tier is None:
            self.set_aside(group, "")
            self.tidy(group, now)
            return
        verdict, until = self.verdict(group, limits, now)
        if verdict == "serve":
            self._to_ready(group, tier)
        else:
            self.refuse(group, verdict, until)

    def ended(self, name: str | None) -> bool:
        """One reservation of the group ended; True if the group rejoined the
        rotation (a reserver should wake)."""
        if name is None:
            return False
        group = self.groups.get(name)
        if group is None:
            return False
        group.running = max(group.running - 1, 0)
        if group.place == "S":
            group.place = ""
            return self.activate(group)
        return False

    def tidy(self, group: Group, now: float) -> None:
        """Forget a group that holds nothing any more."""
        if (
            group.pending == 0
            and group.running == 0
            and group.settings is None
            and group.until <= now
            and group.tat <= now
        ):
            self.groups.pop(group.name, None)

    # ------------------------------------------------------------ admin
    def info(self, group: Group, now: float) -> GroupInfo:
        held = max(group.until, group.tat if group.place == "D" else 0.0)
        return GroupInfo(
            name=group.name,
            pending=group.pending,
            running=group.running,
            settings=group.settings,
            throttled_until=held if held > now else None,
        )

    def page(self, after: str | None, limit: int, now: float) -> GroupPage:
        limit = max(1, limit)
        names = sorted(n for n in self.groups if after is None or n > after)
        out: list[GroupInfo] = []
        for name in names:
            group = self.groups[name]
            self.tidy(group, now)
            if name not in self.groups:
                continue
            if len(out) == limit:
                return GroupPage(out, out[-1].name)
            out.append(self.info(group, now))
        return GroupPage(out, None)

    def configure(self, name: str, settings: GroupSettings | None, now: float) -> bool:
        """New settings (None: the type's); True if a reserver should wake."""
        group = self.get(name)
        group.settings = None if settings is None or settings.empty else settings
        if settings is None:
            group.until = 0.0
        # Whatever held it may no longer hold: back in the rotation, checked at its turn.
        if group.place != "R":
            group.place = ""
            woke = self.activate(group)
        else:
            woke = False
        self.tidy(group, now)
        return woke

    def set_defaults(
        self, limits: GroupLimits, gen: int, proxy: ProxyPolicy | None = None
    ) -> tuple[bool, int]:
        """The type's limits as of config generation ``gen`` (kept only if no
        newer generation is stored); returns whether they were stored and how
        many held groups rejoined the rotation (reservers to wake)."""
        if gen < self.defaults_gen:
            return False, 0
        changed = limits != self.defaults
        self.defaults, self.proxy, self.defaults_gen = limits, proxy, gen
        if not changed:
            return True, 0
        # Whatever the old limits held may go now: back in line, checked at its turn.
        woke = 0
        for group in self.groups.values():
            if group.place in ("S", "D"):
                group.place = ""
                woke += self.activate(group)
        return True, woke
