"""The one-line progress summary ``fleet dev`` prints every few seconds."""

from __future__ import annotations

from typing import Any


def summary_line(
    automations: list[dict[str, Any]],
    pools: list[dict[str, Any]],
    identity_pools: list[dict[str, Any]] | None = None,
) -> str:
    """Summarise ``GET /api/v1/automations``, ``GET /api/v1/pools`` and
    ``GET /api/v1/identities`` in one line.

    Args:
        automations: The automations listing (``type``, ``queue`` with ``counters``,
            ``workers``).
        pools: The pools listing (``name``, ``available``, ``total``); an empty pool
            is left out.
        identity_pools: The identity pools (``pool``, ``counts`` by state).

    Returns:
        E.g. ``"cf-scraper 40 done, 3 dead, 5 waiting · pinger running · pool
        cf-cookies 4/5 free · identities demo 2 ready, 1 leased"``; ``"no automations
        yet"`` when all are empty.
    """
    parts: list[str] = []
    for a in automations:
        queue = a.get("queue")
        if queue:
            counters = queue.get("counters") or {}
            waiting = int(queue.get("pending_total", 0)) + int(queue.get("scheduled", 0))
            text = f"{counters.get('completed', 0)} done"
            if queue.get("dead"):
                text += f", {queue['dead']} dead"
            if waiting or queue.get("processing"):
                text += f", {waiting + int(queue.get('processing', 0))} waiting"
            parts.append(f"{a['type']} {text}")
        else:
            up = (a.get("workers") or {}).get("up", 0)
            parts.append(f"{a['type']} {'running' if up else 'no worker'}")
    for p in pools:
        if p.get("total"):
            parts.append(f"pool {p['name']} {p.get('available', 0)}/{p['total']} free")
    for ip in identity_pools or []:
        counts = ip.get("counts") or {}
        states = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        parts.append(f"identities {ip['pool']} {states or 'none'}")
    return " · ".join(parts) or "no automations yet"
