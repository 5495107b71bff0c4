"""The rules of proxy health (:class:`~fleet.core.capabilities.ProxyHealth`) as pure
functions over what a backend read of the candidates: which proxy a take gets, and
what a report does to a proxy's score and cool-down. The memory backend and the
SQLite transaction both call them; ``lua/proxies.lua`` is the only other copy,
checked against them by ``tests/conformance/test_differential_rules.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleet.core.capabilities.proxies import PLACE_RETRY_SECONDS, ProxyTake, spread_choice
from fleet.core.limiter import hold_live

__all__ = ["MIN_WAIT", "ProxyView", "hold_live", "proxy_pick", "proxy_report_rule"]

#: The shortest wait a refused take answers (never 0: that would mean "taken").
MIN_WAIT = 1e-3


@dataclass(frozen=True, slots=True)
class ProxyView:
    """One candidate as a take sees it at ``now``, expired places left out.

    Attributes:
        key: The proxy's key.
        cooling_until: End of its cool-down (0.0: none, or the record was forgotten).
        places: Live places held on it.
        mine: The taking token holds one of them.
        first_end: When the earliest live place ends (None: none held).
    """

    key: str
    cooling_until: float = 0.0
    places: int = 0
    mine: bool = False
    first_end: float | None = None

    def free(self, cap: int | None) -> bool:
        """A place can be taken: no cap, the token holds one already, or one is left."""
        return cap is None or self.mine or self.places < cap


def proxy_pick(
    views: Sequence[ProxyView],
    *,
    now: float,
    cap: int | None,
    sticky: bool = False,
    sticky_choice: str | None = None,
    spread: bool = False,
) -> ProxyTake:
    """Which proxy a take gets (docs/primitives.md "Proxies").

    Args:
        views: The distinct candidates, preferred first.
        now: The time of the take.
        cap: Places per proxy (None: no cap).
        sticky: The take names a sticky choice.
        sticky_choice: The proxy that choice holds now (None: none, or expired).
        spread: Spread the load (:func:`spread_choice`); not with a sticky choice.

    Returns:
        The first healthy candidate with a free place (or the spread's choice); the
        sticky choice alone while it is healthy; when every candidate cools, the one
        whose cool-down ends first (``cooling=True``); else nothing, with the wait to
        the first place's end (at most :data:`PLACE_RETRY_SECONDS`).
    """
    by_key = {v.key: v for v in views}
    order = [v.key for v in views]
    held = by_key.get(sticky_choice) if sticky_choice is not None else None
    if held is not None and held.cooling_until <= now:
        order = [held.key]
    healthy = [k for k in order if by_key[k].cooling_until <= now]
    if spread and not sticky and order:
        loads = [(k, by_key[k].places - by_key[k].mine) for k in healthy]
        full = {k for k in healthy if not by_key[k].free(cap)}
        picked = spread_choice(loads, order[0], full)
    else:
        picked = next((k for k in healthy if by_key[k].free(cap)), None)
    if picked is None and not healthy:
        usable = [k for k in order if by_key[k].free(cap)]
        if usable:
            return ProxyTake(min(usable, key=lambda k: by_key[k].cooling_until), cooling=True)
    if picked is None:
        ends = [e for k in order if (e := by_key[k].first_end) is not None]
        first = min(ends, default=now + PLACE_RETRY_SECONDS)
        return ProxyTake(None, wait=max(min(first - now, PLACE_RETRY_SECONDS), MIN_WAIT))
    return ProxyTake(picked)


def proxy_report_rule(
    score: int, cooling_until: float, *, ok: bool, threshold: int, cooldown: float, now: float
) -> tuple[int, float]:
    """A proxy's score and cool-down end after a report.

    A good report clears the score. A bad one counts toward the threshold unless the
    proxy already cools (reports about a cooling proxy's earlier uses do not extend
    its cool-down); reaching the threshold cools it for ``cooldown`` seconds.
    """
    if ok:
        return 0, cooling_until
    if cooling_until > now:
        return score, cooling_until
    score += 1
    if score >= threshold:
        cooling_until = now + cooldown
    return score, cooling_until
