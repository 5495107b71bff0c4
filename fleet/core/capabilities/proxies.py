"""ProxyHealth: the health of proxies, shared by every slot of every worker (``ctx.proxy``).

A proxy is named by a key (:func:`fleet.core.proxy.proxy_key`: scheme, host and port,
plus a digest of the user name; never a password). For each key the backend keeps:

* its counters: ``uses`` (times a slot was handed the proxy), ``oks`` and ``failures``
  (reports), and the reason and time of the last bad report;
* its ``score``: bad reports in a row; an ok report sets it back to 0;
* ``cooling_until``: set when a bad report brings the score to the caller's threshold.
  While it lies in the future the proxy is *cooling*: :meth:`ProxyHealth.take`
  hands it out only when every candidate cools;
* its *places*: the tokens of the slots using it now, each until its hold expires (a
  worker that died loses its places by itself), counted against the caller's
  ``max_concurrency``.

Plus *sticky choices*: a name (an account, a session) -> the proxy key chosen for it,
kept ``sticky_seconds`` after its last use.

The limits (threshold, cool-down, cap) are the type's :class:`ProxyPolicy`, one value
for the fleet: stored with the type's group limits by
:meth:`~fleet.core.capabilities.groups.TaskGroups.group_defaults_set` (tagged with
the config generation) and read by :meth:`ProxyHealth.take` and
:meth:`ProxyHealth.report` of a caller naming its ``automation_type`` inside
their atomic step, so a PATCH holds from the next call on every worker, whatever
config each one has applied. The values a call passes are used only when no policy
is stored for its type (or it names none).

A proxy's state is forgotten :data:`FORGET_SECONDS` after its last use, report, place
or the end of its cool-down, whichever is latest (its counters then start again from
0). Times are Unix seconds (float) from :func:`fleet.core.records.now`.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.core.capabilities.primitives import KV

if TYPE_CHECKING:
    from fleet.core.config import BaseConfig

#: A proxy untouched this long after its last activity is forgotten (seconds).
FORGET_SECONDS = 3600.0
#: The longest a ``take`` that found every usable proxy at its cap asks its
#: caller to wait before trying again (a place may free at any moment).
PLACE_RETRY_SECONDS = 0.1
#: Longest reason a bad report keeps (longer ones are cut).
MAX_REASON_LEN = 200


def spread_choice(
    loads: Sequence[tuple[str, int]], current: str | None, full: Collection[str] = ()
) -> str | None:
    """Where a slot that spreads its load goes: the rule of ``take(spread=True)``,
    which memory and SQLite call and ``lua/proxies.lua`` mirrors (the conformance suite
    holds the three to it).

    The slot stays on ``current`` while staying leaves it carrying no more than its
    share, ``ceil(total / n)`` places, where ``total`` counts every place on the
    healthy candidates plus the slot's own and ``n`` is their number: that is, while
    ``total > load(current) * n``. Otherwise it moves to the least-used candidate (the
    first in order on a tie) that is not ``full``. A proxy back from a cool-down carries
    nothing, so the slots of the proxies above their share move to it, one take at a
    time, until the places are even again; slots on proxies within their share never
    move (no churn between equal proxies).

    Args:
        loads: The healthy (not cooling) candidates, preferred first, each with the
            places *other* tokens hold on it now.
        current: The proxy the slot uses now (None or not among ``loads``: it moves).
        full: Candidates at the cap: never a target, nor a place to stay.

    Returns:
        The key to take, or None when every candidate is ``full`` (or none is given).
    """
    n = len(loads)
    total = sum(load for _, load in loads) + 1
    if current is not None and current not in full:
        for key, load in loads:
            if key == current:
                if total > load * n:
                    return current
                break
    best: str | None = None
    best_load = 0
    for key, load in loads:
        if key not in full and (best is None or load < best_load):
            best, best_load = key, load
    return best


@dataclass(frozen=True, slots=True)
class ProxyPolicy:
    """The health settings of a type's proxies: its config's ``proxy_bad_threshold``,
    ``proxy_cooldown_seconds`` and ``proxy_max_concurrency``.

    One value for the fleet: the backend stores the type's policy with its group
    limits and applies it to every take and report of the type (a worker's own copy
    counts only while none is stored).

    Attributes:
        bad_threshold: Bad reports in a row that cool a proxy down (>= 1).
        cooldown_seconds: How long a proxy cools down (>= 0).
        max_concurrency: Most slots on one proxy at once, fleet-wide (None: no cap).
    """

    bad_threshold: int = 1
    cooldown_seconds: float = 300.0
    max_concurrency: int | None = None

    @classmethod
    def of(cls, config: BaseConfig) -> ProxyPolicy:
        """The policy of a validated config."""
        return cls(
            config.proxy_bad_threshold, config.proxy_cooldown_seconds, config.proxy_max_concurrency
        )

    @classmethod
    def of_config(cls, config: Mapping[str, Any]) -> ProxyPolicy:
        """The policy of a type's effective config (stored values over the schema's
        defaults). A value this Fleet cannot read takes the field's default: it was
        validated when it was written, so that is a config from another version."""
        threshold = config.get("proxy_bad_threshold", 1)
        if not _is_int(threshold) or threshold < 1:
            threshold = 1
        cooldown = config.get("proxy_cooldown_seconds", 300.0)
        if not _is_number(cooldown) or not 0 <= cooldown < math.inf:
            cooldown = 300.0
        cap: int | None = config.get("proxy_max_concurrency")
        if cap is not None and (not _is_int(cap) or cap < 1):
            cap = None
        return cls(threshold, float(cooldown), cap)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ProxyTake:
    """What :meth:`ProxyHealth.take` did.

    Attributes:
        key: The proxy taken, or None when every usable candidate is at its cap.
        cooling: True when every candidate was cooling and the least-bad one was
            taken (the one whose cool-down ends first).
        wait: When ``key`` is None: seconds before trying again makes sense (> 0).
    """

    key: str | None
    cooling: bool = False
    wait: float = 0.0


@dataclass(frozen=True, slots=True)
class ProxyInfo:
    """One proxy as :meth:`ProxyHealth.list` reports it.

    Attributes:
        key: The proxy's key (no credentials).
        uses: Times a slot was handed it.
        oks: Ok reports.
        failures: Bad reports.
        score: Bad reports in a row (0 after an ok report).
        cooling_until: End of its cool-down while it is cooling, else None.
        in_use: Places held now (slots using it).
        last_reason: Reason of the last bad report (None if never reported bad).
        last_bad_at: When that report came.
    """

    key: str
    uses: int = 0
    oks: int = 0
    failures: int = 0
    score: int = 0
    cooling_until: float | None = None
    in_use: int = 0
    last_reason: str | None = None
    last_bad_at: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "proxy": self.key,
            "uses": self.uses,
            "oks": self.oks,
            "failures": self.failures,
            "score": self.score,
            "cooling": self.cooling_until is not None,
            "cooling_until": self.cooling_until,
            "in_use": self.in_use,
            "last_reason": self.last_reason,
            "last_bad_at": self.last_bad_at,
        }


class ProxyHealth(abc.ABC):
    """Fleet-wide proxy health: scores, cool-downs, places and sticky choices."""

    #: Where the secret salt of proxy keys is kept (the same backend's kv; see
    #: :func:`fleet.core.proxy.proxy_key_salt`); None: keys stay the process's own.
    salts: KV | None = None

    @abc.abstractmethod
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
        """Take a place on the first usable proxy of ``candidates`` for ``token``.

        Atomically, at the current time ``now`` (``max_concurrency`` being the stored
        policy's of ``automation_type`` when one is stored, see :class:`ProxyPolicy`):

        1. ``candidates`` are proxy keys in order of preference (a repeated key counts
           once); the expired places of each are dropped.
        2. With ``sticky`` set and its stored choice among the candidates and not
           cooling, that choice is the only candidate (a sticky key keeps its proxy
           while it is healthy, waiting for a place rather than moving).
        3. A candidate is *cooling* while its ``cooling_until > now``, and *free* if
           ``max_concurrency`` is None, ``token`` already holds a place on it, or
           fewer than ``max_concurrency`` tokens do.
        4. The first candidate that is free and not cooling is taken; with ``spread``
           (and no ``sticky``), the one :func:`spread_choice` names instead, given
           the healthy candidates with the places other tokens hold on each (held
           places are counted with or without ``max_concurrency``), ``candidates[0]``
           as the current proxy and the candidates that are not free as full. If
           every candidate is cooling, the free one whose cool-down ends first (the
           earliest in order on a tie) is taken, and ``cooling`` is True.
        5. Taking: ``token`` holds a place on it until ``now + hold_seconds``, its
           ``uses`` grows by 1, ``token``'s place on ``held`` (if another key) is
           freed, and with ``sticky`` the choice is stored for ``sticky_seconds``.
        6. Otherwise nothing changes and ``key`` is None; ``wait`` is the time until
           the earliest hold of those candidates ends, capped at
           :data:`PLACE_RETRY_SECONDS`.

        Args:
            candidates: Proxy keys, preferred first (at least one).
            token: The caller's place (one per slot handle).
            held: The key ``token`` holds a place on now, if any.
            max_concurrency: The most places per proxy (>= 1), or None for no cap
                (places are still recorded: they are the ``in_use`` count).
            hold_seconds: How long a place lasts without a renewal (> 0).
            sticky: A sticky name (an account, a session), or None.
            sticky_seconds: How long the sticky choice outlives its last use (> 0).
            spread: Balance the places over the healthy candidates (a slot's
                ``ensure()`` on fixed URLs) rather than prefer the first one.
            automation_type: The caller's type: its stored policy's cap, if it has
                one, replaces ``max_concurrency`` (read in the same atomic step).
        """

    @abc.abstractmethod
    async def renew(self, key: str, token: str, hold_seconds: float) -> bool:
        """Extend ``token``'s place on ``key`` to now + ``hold_seconds``.

        Returns:
            True if it held one (not expired); else False and nothing changes.
        """

    @abc.abstractmethod
    async def release(self, key: str, token: str) -> bool:
        """Free ``token``'s place on ``key``.

        Returns:
            True if it held one (not expired); a stale or unknown token changes nothing.
        """

    @abc.abstractmethod
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
        """Report how a use of proxy ``key`` went.

        Atomically (``threshold`` and ``cooldown_seconds`` being the stored policy's of
        ``automation_type`` when one is stored, read in the same step): an ok report
        adds 1 to ``oks`` and sets ``score`` to 0 (a cool-down in force runs on). A bad
        report adds 1 to ``failures`` and keeps ``reason`` (cut to
        :data:`MAX_REASON_LEN`) and the time; unless the proxy is cooling (a report of
        a use that began before the cool-down), ``score`` grows by 1 and, if it reaches
        ``threshold``, the proxy cools until ``now + cooldown_seconds``. The score is
        not reset by a cool-down: until an ok report, the next bad report cools it
        again.

        Returns:
            The end of the proxy's cool-down if it is cooling after the report, else None.
        """

    @abc.abstractmethod
    async def policy(self, automation_type: str) -> tuple[ProxyPolicy | None, int]:
        """The type's stored :class:`ProxyPolicy` and the config generation of the
        record it came with (:meth:`TaskGroups.group_defaults
        <fleet.core.capabilities.groups.TaskGroups.group_defaults>`'s): ``(None, gen)``
        when that record holds none, ``(None, -1)`` when nothing was ever stored."""

    @abc.abstractmethod
    async def listing(self, *, limit: int = 1000) -> list[ProxyInfo]:
        """The proxies not forgotten, by key, at most ``limit``."""

    @abc.abstractmethod
    async def sticky(self, name: str) -> str | None:
        """The proxy key stored for sticky name ``name`` (None: none, or expired)."""
