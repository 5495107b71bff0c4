"""Differential: the delivery log on SQLite (``sqlite/webhooks.py``, deciding with
``fleet.core.webhooks.merged`` and ``dropped``) against Redis (``lua/webhooks.lua``), and
both against the pure rule itself, on random sequences of updates."""

from __future__ import annotations

import random
from pathlib import Path

from fleet.backends import open_backend
from fleet.core.webhooks import STATUSES, Delivery, Hook, dropped, merged

SEQUENCES = 60
EVENTS = [f"evt_{i}" for i in range(9)]
KEEP = 5


def model(updates: list[Delivery]) -> list[Delivery]:
    """The log the rule says ``updates`` leave, newest first."""
    log: dict[str, Delivery] = {}
    for u in updates:
        fresh = u.event_id not in log
        log[u.event_id] = merged(log.get(u.event_id), u)
        if fresh:
            for gone in dropped([(d.created_at, e) for e, d in log.items()], KEEP):
                del log[gone]
    return sorted(log.values(), key=lambda d: (d.created_at, d.event_id), reverse=True)


def sequence(rng: random.Random) -> list[Delivery]:
    out = []
    for step in range(rng.randrange(3, 40)):
        status = rng.choice(STATUSES)
        code = rng.choice([None, 200, 500, 302])
        at = 1_800_000_000.0 + rng.choice([step, step, 3]) + rng.randrange(1000) / 1000
        out.append(
            Delivery(
                rng.choice(EVENTS),
                "run.completed",
                status,
                rng.randrange(0, 6),
                code,
                rng.choice([None, "HTTP 500", "timeout"]),
                round(at, 3),
                round(at + 0.5, 3),
            )
        )
    return out


async def test_the_delivery_log_agrees_on_sqlite_redis_and_the_rule(
    tmp_path: Path, redis_url: str
) -> None:
    sq = await open_backend(f"sqlite:///{tmp_path / 'hooks.db'}")
    rd = await open_backend(redis_url)
    trimmed = finals = 0
    try:
        for seed in range(SEQUENCES):
            rng = random.Random(seed)
            updates = sequence(rng)
            hook = Hook(f"wh_{seed}", "http://x.test/", ("run.completed",), "whsec_x", 1.0)
            logs = []
            for backend in (sq, rd):
                await backend.webhooks.put(hook)
                steps = [await backend.webhooks.log(hook.id, u, KEEP) for u in updates]
                logs.append((steps, await backend.webhooks.deliveries(hook.id, limit=50)))
            expected = model(updates)
            assert logs[0] == logs[1], (seed, updates)
            assert logs[0][1] == expected, (seed, updates)
            trimmed += len({u.event_id for u in updates}) > len(expected)
            finals += any(d.status in ("delivered", "dead") for d in expected)
    finally:
        await sq.close()
        await rd.close()
    # the sequences did trim logs and did reach final states
    assert trimmed > SEQUENCES // 4 and finals > SEQUENCES // 2, (trimmed, finals)
