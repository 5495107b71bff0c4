"""Prometheus ``/metrics``: queue counters and depths, workers, slots, plugin metrics.

Everything is read from the backend at scrape time (the master is stateless),
gathered asynchronously into a :class:`Snapshot`, then rendered by a custom
collector registered in the app's own ``CollectorRegistry`` (never the
process-global one, so several apps in one process do not clash).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from fleet.backends.base import Backend
from fleet.core import clock
from fleet.core.blocks.verdicts import VERDICT_KINDS
from fleet.core.demand import Demand, RateBook, measure
from fleet.core.meters import type_scope
from fleet.core.metrics import BUCKETS, merge_histograms, merge_snapshots
from fleet.core.records import QueueDepths
from fleet.core.runs import COUNTERS, OPEN_STATES, RunRecord
from fleet.core.stored import entry_unreadable
from fleet.core.tiers import DomainTier
from fleet.master.services.monitors import NAMESPACE as MONITORS_NAMESPACE
from fleet.master.services.proxy_metrics import ProxySnapshot, gather_proxies, proxy_families
from fleet.master.services.workers_view import is_up

#: Counters of QueueDepths exported as ``fleet_tasks_<name>_total``.
TASK_COUNTERS = ("submitted", "completed", "failed", "dead", "expired", "cancelled", "throttled")
DEPTH_STATES = ("high", "normal", "low", "processing", "scheduled", "dead")
#: Where a worker's stats frame may carry a task duration histogram
#: (same shape as a ``ctx.metrics`` histogram: count, sum, per-bucket counts).
DURATION_KEYS = ("task_duration", "task_duration_seconds")
#: Groups of one type exported with their own labels (the busiest ones), so that a
#: type with 100,000 groups cannot explode the label cardinality.
TOP_GROUPS = 20
#: Groups looked at per type and scrape to find them (a scrape stays bounded).
GROUPS_EXAMINED = 5000


#: Counters a batch worker reports in its stats frame (``tasks.<key>``), exported
#: per worker: stats key -> (metric name, help).
WORKER_COUNTERS: dict[str, tuple[str, str]] = {
    "zombies_cancelled": (
        "fleet_worker_zombies_cancelled",
        "Attempts a worker cancelled while running because their lease was lost",
    ),
    "timed_out": (
        "fleet_worker_tasks_timed_out",
        "Attempts a worker cancelled because they ran past their timeout_seconds",
    ),
    "slots_abandoned": (
        "fleet_worker_slots_abandoned",
        "Slots a worker gave up because their run_one ignored its cancel",
    ),
}


#: What a type needs of the fleet (:class:`~fleet.core.demand.Demand`), exported per
#: type for an autoscaler (docs/autoscaling.md): key -> (metric name, help).
DEMAND_GAUGES: dict[str, tuple[str, str]] = {
    "pending": ("fleet_queue_pending", "Tasks waiting in the queue (every priority)"),
    "arrival_rate": ("fleet_queue_arrival_rate", "Tasks submitted per second"),
    "completion_rate": ("fleet_queue_completion_rate", "Tasks completed per second"),
    "slot_rate": ("fleet_slot_throughput", "Tasks one busy slot completes per second"),
    "desired_workers": (
        "fleet_desired_workers",
        "Workers that would keep up with the arrivals and clear the backlog in a minute",
    ),
}


@dataclass
class TypeSnapshot:
    """What one scrape knows of one automation type."""

    depths: QueueDepths | None = None
    workers: dict[str, int] = field(default_factory=dict)  #: state -> count
    slots_busy: int = 0
    slots_total: int = 0
    plugin: dict[str, Any] = field(default_factory=dict)  #: merged ctx.metrics snapshot
    duration: dict[str, Any] | None = None
    per_second: float = 0.0  #: completed tasks per second, summed over live workers
    processes: list[tuple[str, float, float]] = field(default_factory=list)  #: wid, cpu, rss
    #: stats key of WORKER_COUNTERS -> worker id -> its count (since it started)
    worker_counts: dict[str, dict[str, float]] = field(default_factory=dict)
    #: record (catalog, or a worker part: hardware, config, gen, state, stats) ->
    #: how many stored values of it could not be read
    unreadable: dict[str, int] = field(default_factory=dict)
    #: the busiest groups (pending + running): (group, pending, running)
    groups: list[tuple[str, int, int]] = field(default_factory=list)
    groups_seen: int = 0  #: groups examined (at most GROUPS_EXAMINED)
    #: (worker id, seconds since its last report) of each worker not STOPPED
    heartbeat_ages: list[tuple[str, float]] = field(default_factory=list)
    #: (worker id, its slot target, the signal that limited it) of each live worker
    #: running the type with ``slots: "auto"``
    autoslots: list[tuple[str, float, str]] = field(default_factory=list)
    #: what the type needs of the fleet (a type with a queue only)
    demand: Demand | None = None


@dataclass
class Snapshot:
    """Everything one scrape exports."""

    types: dict[str, TypeSnapshot] = field(default_factory=dict)
    backend_up: bool = True
    proxies: ProxySnapshot = field(default_factory=ProxySnapshot)
    #: the live runs among the RUNS_EXAMINED newest, at most TOP_RUNS of them
    runs: list[RunRecord] = field(default_factory=list)
    runs_live: int = 0
    taken_at: float = 0.0  #: when the snapshot was read (Unix seconds)
    #: identity pool -> (identities by state, blocks over the identities examined)
    identities: dict[str, tuple[dict[str, int], int]] = field(default_factory=dict)
    #: type -> the first TOP_DOMAINS domains by name (their tier and verdicts)
    domains: dict[str, list[DomainTier]] = field(default_factory=dict)
    #: type -> the meters of its ``type:<type>`` scope (docs/costs.md); a type never
    #: metered is left out
    meters: dict[str, dict[str, float]] = field(default_factory=dict)
    #: monitor -> how many of the MONITOR_RUNS newest runs have it firing (a monitor
    #: some of them declare and none fires: 0)
    monitors_firing: dict[str, int] = field(default_factory=dict)


#: Domains of a type exported on /metrics at most (by name): the label cardinality stays
#: bounded; the REST API pages through all of them.
TOP_DOMAINS = 200


async def identity_pools(backend: Backend) -> dict[str, tuple[dict[str, int], int]]:
    """Every identity pool's counts by state and its identities' blocks (one pass of the
    pool's state on each engine: the page of one identity answers both)."""
    out: dict[str, tuple[dict[str, int], int]] = {}
    for pool in await backend.identities.pools():
        page = await backend.identities.page(pool, limit=1)
        out[pool] = (page.counts, page.blocks)
    return out


#: Runs exported on /metrics at most (the newest live ones), and runs looked at to
#: find them: a scrape stays bounded, and so does the label cardinality.
TOP_RUNS = 50
RUNS_EXAMINED = 1000


async def live_runs(backend: Backend) -> tuple[list[RunRecord], int]:
    """The newest live runs (at most TOP_RUNS) and how many runs are live among the
    RUNS_EXAMINED newest."""
    found: list[RunRecord] = []
    live = seen = 0
    after: str | None = None
    while seen < RUNS_EXAMINED:
        page = await backend.runs.page(after=after, limit=500)
        seen += len(page.runs)
        for record in page.runs:
            if record.state in OPEN_STATES:
                live += 1
                if len(found) < TOP_RUNS:
                    found.append(record)
        if page.next is None:
            break
        after = page.next
    return found, live


#: Runs whose kept monitor states a scrape reads (the newest ones; docs/monitors.md).
MONITOR_RUNS = 500


async def monitors_firing(backend: Backend) -> dict[str, int]:
    """Per monitor, how many of the MONITOR_RUNS newest runs have it firing, as the
    sweeper last decided (its kept ``state:<run>``: one page of runs, one read of KV)."""
    page = await backend.runs.page(limit=MONITOR_RUNS)
    names = [f"state:{record.id}" for record in page.runs]
    out: dict[str, int] = {}
    for raw in await backend.kv.get_many(MONITORS_NAMESPACE, names) if names else []:
        try:
            kept = json.loads(raw) if raw else None
        except ValueError:
            continue
        found = kept.get("states") if isinstance(kept, dict) else None
        for state in found if isinstance(found, list) else []:
            if not isinstance(state, dict) or not isinstance(state.get("monitor"), str):
                continue
            name = state["monitor"]
            out[name] = out.get(name, 0) + (state.get("state") == "firing")
    return out


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _valid_hist(h: Any) -> bool:
    return (
        isinstance(h, dict)
        and isinstance(h.get("buckets"), list)
        and len(h["buckets"]) == len(BUCKETS)
        and isinstance(h.get("count"), int | float)
        and isinstance(h.get("sum"), int | float)
    )


async def _busiest_groups(backend: Backend, automation_type: str, ts: TypeSnapshot) -> None:
    found: list[tuple[str, int, int]] = []
    after: str | None = None
    while len(found) < GROUPS_EXAMINED:
        page = await backend.groups.page(automation_type, after=after, limit=1000)
        found += [(g.name, g.pending, g.running) for g in page.groups]
        if page.next is None:
            break
        after = page.next
    ts.groups_seen = len(found)
    found.sort(key=lambda g: (-(g[1] + g[2]), g[0]))
    ts.groups = found[:TOP_GROUPS]


async def gather(
    backend: Backend, heartbeat_seconds: float, rates: RateBook | None = None
) -> Snapshot:
    """Read everything ``/metrics`` shows from the backend (``rates``: where the
    arrival and completion rates are measured between scrapes)."""
    snap = Snapshot()
    if not await backend.ping():
        snap.backend_up = False
        return snap
    entries = await backend.catalog.all()
    pairs = await backend.workers.all()
    snap.proxies = await gather_proxies(backend.proxies)
    snap.runs, snap.runs_live = await live_runs(backend)
    snap.identities = await identity_pools(backend)
    snap.monitors_firing = await monitors_firing(backend)
    snap.taken_at = clock.now()
    types = sorted({*entries, *(t for t, _ in pairs)})
    if types:
        scopes = {type_scope(t): t for t in types}
        got = await backend.meters.get(list(scopes))
        snap.meters = {scopes[scope]: meters for scope, meters in got.items() if meters}
    for t in types:
        ts = snap.types.setdefault(t, TypeSnapshot())
        if (entries.get(t) or {}).get("queue"):
            ts.depths = await backend.queues.depths(t)
            await _busiest_groups(backend, t, ts)
        if t in entries and entry_unreadable(entries[t]) is not None:
            ts.unreadable["catalog"] = 1
        # Any type's ctx.http meets domains (a continuous one too).
        found = await backend.domains.page(t, limit=TOP_DOMAINS)
        if found.items:
            snap.domains[t] = list(found.items)
    now = clock.now()
    plugin_snaps: dict[str, list[dict[str, Any]]] = {}
    for (t, wid), record in zip(pairs, await backend.workers.get_many(pairs), strict=True):
        if record is None:
            continue
        ts = snap.types[t]
        for part in record.unreadable:
            ts.unreadable[part] = ts.unreadable.get(part, 0) + 1
        up = is_up(record, now, heartbeat_seconds)
        # A late heartbeat before the worker counts as DOWN: what "lagging" alerts on.
        if record.last_seen is not None and record.state.get("state") != "STOPPED":
            ts.heartbeat_ages.append((wid, max(now - record.last_seen, 0.0)))
        state = record.state.get("state", "UNKNOWN") if up else "DOWN"
        ts.workers[state] = ts.workers.get(state, 0) + 1
        stats = record.stats or {}
        if not up:
            continue
        raw_slots = stats.get("slots")
        slots: dict[str, Any] = raw_slots if isinstance(raw_slots, dict) else {}
        ts.slots_busy += int(_num(slots.get("busy")))
        ts.slots_total += int(_num(slots.get("total")))
        raw_tasks = stats.get("tasks")
        tasks: dict[str, Any] = raw_tasks if isinstance(raw_tasks, dict) else {}
        ts.per_second += _num(tasks.get("per_second"))
        ts.processes.append((wid, _num(stats.get("cpu_percent")), _num(stats.get("rss_bytes"))))
        auto = stats.get("autoslots")
        if isinstance(auto, dict):
            ts.autoslots.append((wid, _num(auto.get("slots")), str(auto.get("limit") or "")))
        for key in WORKER_COUNTERS:
            if key in tasks:  # batch types only, and workers that report it
                ts.worker_counts.setdefault(key, {})[wid] = _num(tasks[key])
        if isinstance(stats.get("metrics"), dict):
            plugin_snaps.setdefault(t, []).append(stats["metrics"])
        for key in DURATION_KEYS:
            if _valid_hist(stats.get(key)):
                ts.duration = merge_histograms(ts.duration, stats[key])
                break
    for t, ts in snap.types.items():
        if ts.depths is not None:
            c = ts.depths.counters
            pair = rates.rates(t, now, c.submitted, c.completed) if rates else (None, None)
            # The workers up (a stopped one is counted DOWN), as GET /automations counts.
            live = sum(n for state, n in ts.workers.items() if state != "DOWN")
            ts.demand = measure(
                ts.depths, pair, workers=live, slots=ts.slots_total, slots_busy=ts.slots_busy
            )
    for t, snaps in plugin_snaps.items():
        try:
            snap.types[t].plugin = merge_snapshots(snaps)
        except (KeyError, TypeError, ValueError):
            snap.types[t].plugin = {}  # a malformed stats frame must not break scrapes
    return snap


def _cumulative(buckets: list[Any]) -> list[tuple[str, float]]:
    out = []
    total = 0.0
    for bound, count in zip(BUCKETS, buckets, strict=False):
        total += float(count)
        out.append(("+Inf" if math.isinf(bound) else repr(float(bound)), total))
    return out


class _SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        up = GaugeMetricFamily("fleet_backend_up", "1 if the backend answered the last scrape")
        up.add_metric([], 1.0 if snap.backend_up else 0.0)
        yield up
        counters = {
            name: CounterMetricFamily(
                f"fleet_tasks_{name}",
                f"Tasks {name} since the type's state was created",
                labels=["type"],
            )
            for name in TASK_COUNTERS
        }
        depth = GaugeMetricFamily(
            "fleet_queue_depth", "Tasks by type and state", labels=["type", "state"]
        )
        oldest = GaugeMetricFamily(
            "fleet_queue_oldest_pending_age_seconds",
            "Age of the oldest pending task",
            labels=["type"],
        )
        workers = GaugeMetricFamily(
            "fleet_workers", "Workers by type and state", labels=["type", "state"]
        )
        busy = GaugeMetricFamily("fleet_slots_busy", "Slots running a task", labels=["type"])
        total = GaugeMetricFamily("fleet_slots", "Slots running", labels=["type"])
        rate = GaugeMetricFamily(
            "fleet_tasks_per_second", "Completed tasks per second (live workers)", labels=["type"]
        )
        cpu = GaugeMetricFamily(
            "fleet_worker_cpu_percent", "Worker process CPU", labels=["type", "worker"]
        )
        rss = GaugeMetricFamily(
            "fleet_worker_rss_bytes", "Worker process memory", labels=["type", "worker"]
        )
        demand = {
            key: GaugeMetricFamily(name, text, labels=["type"])
            for key, (name, text) in DEMAND_GAUGES.items()
        }
        auto_slots = GaugeMetricFamily(
            "fleet_worker_auto_slots",
            'Slots a worker sized itself for a type with slots: "auto"',
            labels=["type", "worker"],
        )
        auto_limit = GaugeMetricFamily(
            "fleet_worker_auto_slots_limit",
            "1 for the signal that last held a worker's auto slots (loop_lag, cpu, rss, "
            "free_memory, throttled, efficiency, max_slots, idle, warming, growing)",
            labels=["type", "worker", "signal"],
        )
        heartbeat = GaugeMetricFamily(
            "fleet_worker_heartbeat_age_seconds",
            "Seconds since a worker (not stopped) last reported",
            labels=["type", "worker"],
        )
        # Per worker: a worker's count starts at 0 with the process, which is
        # what Prometheus expects of a counter (rate() handles the reset).
        per_worker = {
            key: CounterMetricFamily(name, text, labels=["type", "worker"])
            for key, (name, text) in WORKER_COUNTERS.items()
        }
        unreadable = GaugeMetricFamily(
            "fleet_unreadable_records",
            "Stored records that could not be read (shown as unreadable), by type and record",
            labels=["type", "record"],
        )
        g_pending = GaugeMetricFamily(
            "fleet_group_pending",
            f"Pending tasks of the {TOP_GROUPS} busiest groups of a type",
            labels=["type", "group"],
        )
        g_running = GaugeMetricFamily(
            "fleet_group_running",
            f"Running tasks of the {TOP_GROUPS} busiest groups of a type",
            labels=["type", "group"],
        )
        g_count = GaugeMetricFamily(
            "fleet_groups",
            f"Groups of a type with tasks or settings (counted up to {GROUPS_EXAMINED})",
            labels=["type"],
        )
        duration = HistogramMetricFamily(
            "fleet_task_duration_seconds",
            "Time run_one took, as reported by workers",
            labels=["type"],
        )
        p_counter = CounterMetricFamily(
            "fleet_plugin_counter", "ctx.metrics counters", labels=["type", "name"]
        )
        p_gauge = GaugeMetricFamily(
            "fleet_plugin_gauge", "ctx.metrics gauges", labels=["type", "name"]
        )
        p_hist = HistogramMetricFamily(
            "fleet_plugin_histogram", "ctx.metrics histograms", labels=["type", "name"]
        )
        for t, ts in sorted(snap.types.items()):
            if ts.depths is not None:
                c = ts.depths.counters
                for name in TASK_COUNTERS:
                    counters[name].add_metric([t], float(getattr(c, name)))
                for state in DEPTH_STATES:
                    depth.add_metric([t, state], float(getattr(ts.depths, state)))
                oldest.add_metric([t], float(ts.depths.oldest_pending_age or 0.0))
            for state, n in sorted(ts.workers.items()):
                workers.add_metric([t, state], float(n))
            busy.add_metric([t], float(ts.slots_busy))
            total.add_metric([t], float(ts.slots_total))
            rate.add_metric([t], ts.per_second)
            for wid, age in sorted(ts.heartbeat_ages):
                heartbeat.add_metric([t, wid], age)
            for wid, cpu_percent, rss_bytes in ts.processes:
                cpu.add_metric([t, wid], cpu_percent)
                rss.add_metric([t, wid], rss_bytes)
            for key, family in demand.items():
                value = ts.demand.get(key) if ts.demand is not None else None
                if isinstance(value, (int, float)):
                    family.add_metric([t], float(value))
            for wid, target, limit in sorted(ts.autoslots):
                auto_slots.add_metric([t, wid], target)
                auto_limit.add_metric([t, wid, limit], 1.0)
            for key, counts in ts.worker_counts.items():
                for wid, count in sorted(counts.items()):
                    per_worker[key].add_metric([t, wid], count)
            if ts.depths is not None:
                g_count.add_metric([t], float(ts.groups_seen))
            for name, pending, running in ts.groups:
                g_pending.add_metric([t, name], float(pending))
                g_running.add_metric([t, name], float(running))
            for record, n in sorted(ts.unreadable.items()):
                unreadable.add_metric([t, record], float(n))
            if ts.duration is not None:
                duration.add_metric(
                    [t], _cumulative(ts.duration["buckets"]), float(ts.duration["sum"])
                )
            for name, value in sorted((ts.plugin.get("counters") or {}).items()):
                p_counter.add_metric([t, str(name)], float(value))
            for name, value in sorted((ts.plugin.get("gauges") or {}).items()):
                p_gauge.add_metric([t, str(name)], float(value))
            for name, h in sorted((ts.plugin.get("histograms") or {}).items()):
                if _valid_hist(h):
                    p_hist.add_metric([t, str(name)], _cumulative(h["buckets"]), float(h["sum"]))
        yield from counters.values()
        yield from (depth, oldest, workers, busy, total, rate, cpu, rss, heartbeat)
        yield from (auto_slots, auto_limit)
        yield from demand.values()
        yield from per_worker.values()
        yield unreadable
        yield from (g_count, g_pending, g_running)
        yield duration
        yield from (p_counter, p_gauge, p_hist)
        yield from _run_families(snap)
        yield from _identity_families(snap)
        yield from _domain_families(snap)
        yield from _meter_families(snap)
        yield _monitor_family(snap)
        if snap.backend_up:
            yield from proxy_families(snap.proxies)


def _run_families(snap: Snapshot) -> Iterator[Metric]:
    live = GaugeMetricFamily("fleet_runs_live", f"Runs running, among the {RUNS_EXAMINED} newest")
    live.add_metric([], float(snap.runs_live))
    tasks = GaugeMetricFamily(
        "fleet_run_tasks",
        f"Counters of the {TOP_RUNS} newest live runs",
        labels=["run", "name", "counter"],
    )
    age = GaugeMetricFamily(
        "fleet_run_age_seconds",
        f"Seconds since each of the {TOP_RUNS} newest live runs was created",
        labels=["run", "name"],
    )
    for record in snap.runs:
        for counter in COUNTERS:
            value = float(record.counters.get(counter, 0))
            tasks.add_metric([record.id, record.name or "", counter], value)
        age.add_metric([record.id, record.name or ""], max(snap.taken_at - record.created_at, 0.0))
    yield from (live, tasks, age)


def _identity_families(snap: Snapshot) -> Iterator[Metric]:
    by_state = GaugeMetricFamily(
        "fleet_identities", "Identities of each pool by state", labels=["pool", "state"]
    )
    blocks = GaugeMetricFamily(
        "fleet_identity_blocks",
        "Blocks reported by the identities of each pool (ctx.identity.blocked)",
        labels=["pool"],
    )
    for pool, (counts, blocked) in sorted(snap.identities.items()):
        for state, n in sorted(counts.items()):
            by_state.add_metric([pool, state], float(n))
        blocks.add_metric([pool], float(blocked))
    yield from (by_state, blocks)


def _domain_families(snap: Snapshot) -> Iterator[Metric]:
    tier = GaugeMetricFamily(
        "fleet_domain_tier",
        f"The proxy tier (index of proxy_tiers) of each domain, first {TOP_DOMAINS} a type",
        labels=["type", "domain"],
    )
    verdicts = GaugeMetricFamily(
        "fleet_domain_verdicts",
        f"Verdicts met at each domain by kind, first {TOP_DOMAINS} domains a type",
        labels=["type", "domain", "kind"],
    )
    for t, states in sorted(snap.domains.items()):
        for state in states:
            tier.add_metric([t, state.domain], float(state.tier))
            for kind in VERDICT_KINDS:
                verdicts.add_metric([t, state.domain, kind], float(state.count(kind)))
    yield from (tier, verdicts)


def _meter_families(snap: Snapshot) -> Iterator[Metric]:
    meter = GaugeMetricFamily(
        "fleet_meter",
        "What each type spent in all, by meter (docs/costs.md: attempts, requests, "
        "requests:<tier>, bytes_received, bytes:<tier>, solves, browser_seconds, spend...)",
        labels=["type", "meter"],
    )
    for t, meters in sorted(snap.meters.items()):
        for name, value in sorted(meters.items()):
            meter.add_metric([t, name], _num(value))
    yield meter


def _monitor_family(snap: Snapshot) -> Metric:
    firing = GaugeMetricFamily(
        "fleet_monitors_firing",
        f"Runs among the {MONITOR_RUNS} newest with each monitor firing (docs/monitors.md)",
        labels=["monitor"],
    )
    for name, n in sorted(snap.monitors_firing.items()):
        firing.add_metric([name], float(n))
    return firing


class MasterMetrics:
    """The exporter of one app: its own registry and the snapshot collector."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _SnapshotCollector()
        self.registry.register(self._collector)
        #: The rates of every type, measured between this master's reads (scrapes
        #: and ``GET /automations`` alike).
        self.rates = RateBook()

    async def render(self, backend: Backend, heartbeat_seconds: float) -> bytes:
        """Gather a fresh snapshot and render the Prometheus text format."""
        self._collector.snapshot = await gather(backend, heartbeat_seconds, self.rates)
        return generate_latest(self.registry)
