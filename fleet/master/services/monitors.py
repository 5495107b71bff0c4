"""Monitors of runs (docs/monitors.md): declared on a run (kept in the KV beside it)
or on its types (config ``monitors``), evaluated by :func:`fleet.core.monitors.evaluate`.

The master holding the sweeper's lock checks the newest runs every sweep
(:func:`tick`): live while they run, once more when they ended (after the workers'
last meters landed). What it decided is kept per run (KV ``fleet-monitors``,
``state:<run>``); a monitor that starts or stops firing is published on the
``monitors`` topic (SSE) and logged. A run's record shows its monitors as last
decided, or as they stand now if the sweeper has not seen it yet.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pydantic import ValidationError

from fleet.backends.base import Backend
from fleet.core.metering import FLUSH_SECONDS
from fleet.core.meters import run_scope
from fleet.core.monitors import Figures, Monitors, MonitorState, evaluate, merged
from fleet.core.runs import DEFAULT_RUN_IDLE_TTL, DEFAULT_RUN_TTL, OPEN_STATES, RunRecord
from fleet.master.services.webhook_dispatch import monitor_changed

log = logging.getLogger(__name__)

NAMESPACE = "fleet-monitors"
#: SSE topic of monitors that start or stop firing.
TOPIC = "monitors"
#: Runs the sweeper looks at each tick, newest first.
NEWEST_RUNS = 500
#: How long a run's monitors are kept: as long as a run is, at the defaults.
KEEP_SECONDS = DEFAULT_RUN_TTL + DEFAULT_RUN_IDLE_TTL
#: An ended run is judged once its workers' last meters have landed.
SETTLE_SECONDS = 2 * FLUSH_SECONDS + 1


def output_fields(entry: Any) -> set[str]:
    """The top-level fields of a catalog entry's ``Output`` schema."""
    stream = (entry or {}).get("stream") or {}
    schema = stream.get("payload") if isinstance(stream, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    return set(props) if isinstance(props, dict) else set()


def unknown_fields(entry: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
    """422 details for ``monitors.max_null_rate`` fields the type's ``Output`` lacks."""
    monitors = config.get("monitors")
    nulls = monitors.get("max_null_rate") if isinstance(monitors, dict) else None
    if not isinstance(nulls, dict) or not nulls:
        return []
    fields = output_fields(entry)
    return [
        {
            "type": "value_error",
            "loc": ["body", "monitors", "max_null_rate", name],
            "msg": f"max_null_rate names {name!r}, a field the type's Output does not declare"
            + (f" (it has {', '.join(sorted(fields))})" if fields else " (it has no Output)"),
        }
        for name in sorted(set(nulls) - fields)
    ]


async def keep_spec(backend: Backend, run_id: str, spec: Monitors) -> None:
    """Keep a run's own monitors (as long as a run is kept)."""
    await backend.kv.set(
        NAMESPACE,
        f"spec:{run_id}",
        spec.model_dump_json(exclude_defaults=True),
        ttl_seconds=KEEP_SECONDS,
    )


async def spec_of(backend: Backend, record: RunRecord, configs: dict[str, Any]) -> Monitors:
    """The run's monitors: its own and its types' (the strictest of each)."""
    specs = []
    own = await backend.kv.get(NAMESPACE, f"spec:{record.id}")
    if own:
        specs.append(Monitors.model_validate_json(own))
    for t in sorted(record.by_type):
        if t not in configs:
            configs[t] = (await backend.configs.get(t)).get("monitors")
        if configs[t]:
            try:
                specs.append(Monitors.model_validate(configs[t]))
            except ValidationError:
                log.warning("monitors of %s do not validate: left out", t)
    return merged(specs) if specs else Monitors()


async def _stored(backend: Backend, run_id: str) -> dict[str, Any]:
    raw = await backend.kv.get(NAMESPACE, f"state:{run_id}")
    if not raw:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


async def states(
    backend: Backend,
    record: RunRecord,
    meters: dict[str, float],
    configs: dict[str, Any] | None = None,
    *,
    save: bool = False,
) -> list[MonitorState]:
    """The run's monitors now (``save``: kept, and their changes published)."""
    spec = await spec_of(backend, record, {} if configs is None else configs)
    if spec.empty:
        return []
    now = time.time()
    stored = await _stored(backend, record.id)
    outputs = float(meters.get("outputs", 0))
    output_at = float(stored.get("output_at", record.created_at))
    if outputs > float(stored.get("outputs", 0)):
        output_at = now
    ended = record.state not in OPEN_STATES
    before = {s.name: s for s in map(MonitorState.from_dict, stored.get("states", []))}
    settled = ended and record.finished_at is not None and now - record.finished_at > SETTLE_SECONDS
    figures = Figures(
        record.counters, meters, record.created_at, record.finished_at, ended, output_at, settled
    )
    found = evaluate(spec, figures, now, before)
    if save:
        value = {
            "states": [s.to_dict() for s in found],
            "outputs": outputs,
            "output_at": output_at,
            "final": settled,
        }
        await backend.kv.set(
            NAMESPACE, f"state:{record.id}", json.dumps(value), ttl_seconds=KEEP_SECONDS
        )
        for s in found:
            prev = before.get(s.name)
            if (prev.state if prev else "ok") != s.state and s.state in ("firing", "resolved"):
                log.warning(
                    "run %s: monitor %s %s (%s, threshold %s)",
                    record.id,
                    s.name,
                    s.state,
                    s.value,
                    s.threshold,
                )
                await backend.events.publish(TOPIC, {"run_id": record.id, **s.to_dict()})
                await monitor_changed(backend, record, s.to_dict())  # webhooks
    return found


async def tick(backend: Backend) -> int:
    """Check the monitors of the newest runs (those running, and those ended whose
    final check is still to come); how many runs were checked."""
    page = await backend.runs.page(limit=NEWEST_RUNS)
    configs: dict[str, Any] = {}
    checked = 0
    for record in page.runs:
        ended = record.state not in OPEN_STATES
        if ended:
            stored = await _stored(backend, record.id)
            if stored.get("final"):
                continue
        found = await backend.meters.get([run_scope(record.id)])
        if await states(backend, record, found.get(run_scope(record.id), {}), configs, save=True):
            checked += 1
    return checked
